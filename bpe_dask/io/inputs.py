"""Inputs: paths, globs, directories or URLs in; the files they name out, each with its format.

Takes what the user named (anything fsspec opens) and how to read it (``Reading``: the format, the
field or column of a record's text, what a bad record does); gives ``InputFile``s: each file's
URL, size and version (what changes when it changes), its compression and its format, by name
(``.jsonl``, ``.parquet``, ... after any compression suffix) unless one is given. A Parquet file's
text column is found by ``text_column_index``.

>>> Reading().format_of("data/part-0.jsonl.zst", "zstd"), Reading().format_of("a.txt", None)
('jsonl', 'text')
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import PurePosixPath

import fsspec
import pyarrow as pa
from fsspec.utils import infer_compression

from bpe_dask.credentials import shown
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.documents import is_text_type
from bpe_dask.io.footers import Footer, read_footer
from bpe_dask.io.publish import SUCCESS
from bpe_dask.io.storage import LOCAL, Store, describe
from bpe_dask.io.web import file_info, is_http, path_of
from bpe_dask.io.written import COUNTS, Skipped, earlier_outputs, is_written_parquet, say_skipped, sidecar_of

log = logging.getLogger(__name__)

_GLOB_CHARS = frozenset("*?[")
_WEB_GLOB_CHARS = frozenset("*[")  # in a URL, ``?`` starts the query (a signed URL's, say)

INPUT_FORMATS = ("text", "jsonl", "parquet")
BAD_RECORD_ACTIONS = ("error", "skip")
# Names a file is recognised by (after any compression suffix such as .gz or .zst).
_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonlines": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


@dataclass(frozen=True)
class Reading:
    """How the job reads its inputs: the format (``None``: by each file's name), the field or
    column that holds a record's text, and what a bad record does (stop the job, or be skipped)."""

    input_format: str | None = None
    text_column: str = "text"
    on_bad_record: str = "error"

    def __post_init__(self) -> None:
        if self.input_format not in (None, *INPUT_FORMATS):
            raise BpeDaskError(f"input format must be text, jsonl or parquet, got {self.input_format!r}")
        if not isinstance(self.text_column, str) or not self.text_column:
            raise BpeDaskError(f"text column must be a non-empty name, got {self.text_column!r}")
        if self.on_bad_record not in BAD_RECORD_ACTIONS:
            raise BpeDaskError(f"on bad record must be error or skip, got {self.on_bad_record!r}")

    def format_of(self, name: str, compression: str | None) -> str:
        if self.input_format is not None:
            return self.input_format
        name = PurePosixPath(name).name.lower()
        if compression:  # data.jsonl.zst
            name = PurePosixPath(name).stem
        return _SUFFIXES.get(PurePosixPath(name).suffix, "text")


@dataclass(frozen=True)
class InputFile:
    """One input file: its full URL, its size, and what identifies this version of it."""

    url: str
    size: int
    version: str
    compression: str | None = None  # compressed files are read whole, as a stream
    format: str = "text"  # or "jsonl", "parquet": a file of records, each a document
    reading: Reading = Reading()
    # False: the store did not say the file's size (a web server that sends no Content-Length); 0
    # stands in for it, and the file is read whole, as one stream, to its end.
    sized: bool = True

    @property
    def name(self) -> str:
        """The URL as a user would write it, to show: local files as plain paths, a web URL's
        credentials hidden (``web.shown``)."""
        return shown(self.url.removeprefix("file://"))

    @property
    def has_records(self) -> bool:
        return self.format != "text"

    def identity(self) -> str:
        """What the file is and how it is read, for the keys of its partitions."""
        text = f"{self.url}\0{self.version}"
        if self.has_records:
            text += f"\0{self.format}\0{self.reading.text_column}\0{self.reading.on_bad_record}"
        return text


def expand_inputs(
    inputs: Sequence[str],
    store: Store = LOCAL,
    exclude: Sequence[str] = (),
    reading: Reading = Reading(),
    outputs: Sequence[str] = (),
    footers: dict[str, Footer] | None = None,
) -> list[InputFile]:
    """Every file the inputs name, in order: globs and directories expand sorted by path.

    Inside directories, names starting with ``.`` or ``_`` (``.DS_Store``, ``_SUCCESS``) are
    skipped, and so is anything under ``exclude`` (the job's own output and work directory), or
    that is one of ``outputs``, the files it writes (an earlier ``--out ids.bin`` in a folder of
    inputs); an input named on its own that is one of them is an error: the job would replace what
    it reads. What earlier bpe-dask jobs wrote (``io.written``) is skipped too, with a line saying
    what; named on its own, a file is read as asked, but token ids or word counts bpe-dask wrote are
    refused. A file named twice is read once. Each file's format comes from ``reading``. Parquet
    footers are read here (bpe-dask's say so), into ``footers`` when given, for the planner, and
    a Parquet file without the text column is refused.
    """
    under = [_url(path, store).rstrip("/") + "/" for path in exclude if path]
    written = [_url(path, store).rstrip("/") for path in outputs if path]
    footers = {} if footers is None else footers
    files: dict[str, InputFile] = {}
    for spec in inputs:
        listing = _expand_one(str(spec), store, reading)
        found = listing.files
        if not found and not listing.skipped:
            raise BpeDaskError(f"no input files match {spec!r}")
        for file in found:
            if file.url in written and not listing.top:  # named on its own
                raise BpeDaskError(
                    f"input {shown(file.url)} is the job's own output (out=): it would "
                    "replace what it reads; write elsewhere"
                )
        kept = [f for f in found if f.url not in written and not any(f.url.startswith(p) for p in under)]
        kept = _without_earlier_outputs(kept, listing, store, footers, shown(str(spec)))
        for file in kept:
            if file.url in footers:  # a Parquet file without the text column: said before any work
                text_column_index(file, footers[file.url].metadata.schema.to_arrow_schema())
            files.setdefault(file.url, file)
    return list(files.values())


@dataclass(frozen=True)
class _Listing:
    """The files one input names; of a directory or a glob, the folder listed and earlier outputs in it."""

    files: list[InputFile]
    top: str = ""  # empty: a file named on its own
    skipped: tuple[Skipped, ...] = ()


def _without_earlier_outputs(
    found: list[InputFile], listing: _Listing, store: Store, footers: dict[str, Footer], spec: str
) -> list[InputFile]:
    """``found`` but for what bpe-dask wrote (``io.written``): Parquet files it wrote skipped if
    listed, refused if named, as is a file of ids named on its own; one line says what was skipped."""
    # (An empty file has no footer: it is an empty input, which a job need not read.)
    parquet = [f for f in found if f.format == "parquet" and f.url not in footers and (f.size or not f.sized)]
    with ThreadPoolExecutor(16) as pool:  # a store answers many footer reads at once
        footers.update(
            zip([f.url for f in parquet], pool.map(lambda f: read_footer(f, store), parquet), strict=True)
        )
    kept, skipped = [], list(listing.skipped)
    for file in found:
        counts = file.url in footers and is_written_parquet(footers[file.url].metadata.metadata)
        # Named on its own, a file is looked at beside (one request; not of a web server, for whom
        # a missing file is a GET).
        beside = None if counts or listing.top or is_http(file.url) else _ids_beside(file, store)
        if (counts or beside) and not listing.top:
            what = beside or f"{COUNTS} (bpe-dask merge reads them)"
            raise BpeDaskError(f"{file.name} holds {what}, not text: name the text it was made from instead")
        if counts:
            skipped.append(Skipped(store.fs(file.url)[1], COUNTS))
        else:
            kept.append(file)
    if skipped and not kept:
        raise BpeDaskError(f"no input files in {spec}, only {say_skipped(skipped, listing.top)}")
    if skipped:
        log.info("%s: skipping %s", spec, say_skipped(skipped, listing.top))
    return kept


def _ids_beside(file: InputFile, store: Store) -> str | None:
    """What a file named on its own is, if the JSON bpe-dask writes beside token ids is beside it."""
    fs, path = store.fs(f"{file.url}.json")
    try:
        size = fs.info(path).get("size")
    except (OSError, ValueError):  # no such file: the usual answer
        return None
    what = sidecar_of(fs, path, size)
    return f"{what} (as {PurePosixPath(path).name} beside it says)" if what else None


def _url(path: str, store: Store) -> str:
    fs, stripped = store.fs(path)
    return fs.unstrip_protocol(stripped)


def _expand_one(spec: str, store: Store, reading: Reading) -> _Listing:
    fs, path = store.fs(spec)
    try:
        return _list_files(fs, path, spec, reading)
    except BpeDaskError:
        raise
    except Exception as error:  # an unreachable store, bad credentials, no such bucket, ...
        raise BpeDaskError(f"cannot read {shown(spec)}: {describe(error)}") from None


def _list_files(fs: fsspec.AbstractFileSystem, path: str, spec: str, reading: Reading) -> _Listing:
    """The files ``spec`` (``path`` in ``fs``) names, each with its format as ``reading`` says."""
    top, skipped = "", []
    if is_http(path) and not (_WEB_GLOB_CHARS & set(path) or path.endswith("/")):
        # A URL names a file: asking fsspec whether it is a directory would GET it and, were it
        # served as HTML or with no type, read it all to look for links. ``?`` starts a query.
        entries = {path: file_info(fs, path)}
    elif _GLOB_CHARS & set(path) and not fs.exists(path):  # a literal name like "f[1].txt" wins
        entries = fs.glob(path, detail=True)
        top = path[: min(path.find(c) % (len(path) + 1) for c in _GLOB_CHARS)].rpartition("/")[0] or "/"
        skipped = earlier_outputs(fs, entries, top)
    elif fs.isdir(path):
        entries = fs.find(path, detail=True)
        top = path.rstrip("/") or "/"
        entries = {p: e for p, e in entries.items() if not _is_hidden(p[len(path) :].removesuffix(SUCCESS))}
        skipped = earlier_outputs(fs, entries, top)  # ``_SUCCESS`` kept so far: it marks an output
        entries = {p: e for p, e in entries.items() if not _is_hidden(p[len(path) :])}
    elif fs.exists(path):
        entries = {path: fs.info(path)}
    else:
        raise BpeDaskError(f"input not found: {spec}")
    gone = {s.path for s in skipped}
    files = []
    for name in sorted(entries):
        info = entries[name]
        if info.get("type") == "directory" or name in gone or any(name.startswith(f"{p}/") for p in gone):
            continue
        url = fs.unstrip_protocol(name)
        if is_http(url) and info.get("size") is None:  # listed from an index page, which gives no sizes
            info = file_info(fs, name)
        size = info.get("size")
        compression = infer_compression(path_of(name))
        form = reading.format_of(path_of(name), compression)
        file = InputFile(url, int(size or 0), _version_of(info), compression, form, reading, size is not None)
        if form == "parquet" and compression:
            raise BpeDaskError(
                f"{file.name}: a Parquet file cannot be read compressed as a whole ({compression})"
            )
        files.append(file)
    return _Listing(files, top, tuple(skipped))


def _is_hidden(relative_path: str) -> bool:
    return any(part[:1] in (".", "_") for part in relative_path.split("/") if part)


_VERSION_FIELDS = (
    "ETag",
    "etag",
    "md5Hash",
    "mtime",
    "LastModified",
    "last_modified",
    "Last-Modified",
    "created",
)


def _version_of(info: dict) -> str:
    """What changes when the file changes: size plus mtime or ETag, whichever the store has."""
    for field in _VERSION_FIELDS:
        if info.get(field) is not None:
            return f"{info['size']}:{field}={info[field]}"
    return f"{info['size']}"


def text_column_index(file: InputFile, schema: pa.Schema) -> int:
    """The index of the file's text column among its leaf columns, if it is a column of text."""
    name = file.reading.text_column
    if name not in schema.names:
        raise BpeDaskError(
            f"{file.name}: no column {name!r} (columns: {', '.join(schema.names)}; text_column= names it)"
        )
    field = schema.field(name)
    if not is_text_type(field.type):
        raise BpeDaskError(f"{file.name}: column {name!r} holds {field.type}, not text")
    return sum(_leaf_count(schema.field(i).type) for i in range(schema.get_field_index(name)))


def _leaf_count(kind: pa.DataType) -> int:
    return sum(_leaf_count(kind.field(i).type) for i in range(kind.num_fields)) if kind.num_fields else 1
