"""Planning: input URLs in, special-token-aligned byte ranges out.

Takes paths, globs, directories or URLs (anything fsspec opens), a target chunk size and the
``Pretokenizer`` of the job; gives ``InputFile``s and ``ByteRange``s that tile every file exactly.
Each cut is moved forward to the start of a special token, or where none is near, to another
safe cut of the pretokenizer (``pretokenize`` says why they are safe), so counting each range on
its own gives exactly the counts of the whole file. Reads only small windows around the cuts.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import fsspec
from fsspec.utils import infer_compression

from .errors import BpeDaskError
from .pretokenize import Pretokenizer
from .storage import describe, filesystem

log = logging.getLogger(__name__)

DEFAULT_LOOKAHEAD = 1 << 20  # how far past a nominal cut we look for a special token
_FIRST_WINDOW = 1 << 16
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class InputFile:
    """One input file: its full URL, its size, and what identifies this version of it."""

    url: str
    size: int
    version: str
    compression: str | None = None  # compressed files are read whole, as a stream

    @property
    def name(self) -> str:
        """The URL as a user would write it: local files as plain paths."""
        return self.url.removeprefix("file://")


@dataclass(frozen=True)
class ByteRange:
    """Bytes ``[start, end)`` of one input file; the unit of work of one map task."""

    file: InputFile
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def key(self) -> str:
        """A digest of what this range holds: the file's identity and version, and the range."""
        text = f"{self.file.url}\0{self.file.version}\0{self.start}\0{self.end}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def expand_inputs(
    inputs: Sequence[str], storage_options: dict | None = None, exclude: Sequence[str] = ()
) -> list[InputFile]:
    """Every file the inputs name, in order: globs and directories expand sorted by path.

    Inside directories, names starting with ``.`` or ``_`` (``.DS_Store``, ``_SUCCESS``) are
    skipped, and so is anything under ``exclude`` (the job's own output and work directory).
    A file named twice is read once.
    """
    excluded = [url.rstrip("/") + "/" for url in _urls(exclude, storage_options or {})]
    files: dict[str, InputFile] = {}
    for spec in inputs:
        found = _expand_one(str(spec), storage_options or {})
        if not found:
            raise BpeDaskError(f"no input files match {spec!r}")
        for file in found:
            if not any(file.url.startswith(prefix) for prefix in excluded):
                files.setdefault(file.url, file)
    return list(files.values())


def _urls(paths: Sequence[str], storage_options: dict) -> list[str]:
    urls = []
    for path in filter(None, paths):
        fs, stripped = filesystem(path, storage_options)
        urls.append(fs.unstrip_protocol(stripped))
    return urls


def _expand_one(spec: str, storage_options: dict) -> list[InputFile]:
    fs, path = filesystem(spec, storage_options)
    try:
        return _list_files(fs, path, spec)
    except BpeDaskError:
        raise
    except Exception as error:  # an unreachable store, bad credentials, no such bucket, ...
        raise BpeDaskError(f"cannot read {spec}: {describe(error)}") from None


def _list_files(fs: fsspec.AbstractFileSystem, path: str, spec: str) -> list[InputFile]:
    if _GLOB_CHARS & set(path) and not fs.exists(path):  # a literal name like "f[1].txt" wins
        entries = fs.glob(path, detail=True)
    elif fs.isdir(path):
        entries = fs.find(path, detail=True)
        entries = {p: e for p, e in entries.items() if not _is_hidden(p[len(path) :])}
    elif fs.exists(path):
        entries = {path: fs.info(path)}
    else:
        raise BpeDaskError(f"input not found: {spec}")
    files = []
    for name in sorted(entries):
        info = entries[name]
        if info.get("type") == "directory":
            continue
        url = fs.unstrip_protocol(name)
        files.append(InputFile(url, int(info["size"]), _version_of(info), infer_compression(name)))
    return files


def _is_hidden(relative_path: str) -> bool:
    return any(part[:1] in (".", "_") for part in relative_path.split("/") if part)


def _version_of(info: dict) -> str:
    """What changes when the file changes: size plus mtime or ETag, whichever the store has."""
    for field in ("ETag", "etag", "md5Hash", "mtime", "LastModified", "last_modified", "created"):
        if info.get(field) is not None:
            return f"{info['size']}:{field}={info[field]}"
    return f"{info['size']}"


def plan_ranges(
    files: Iterable[InputFile],
    chunk_size: int,
    pretokenizer: Pretokenizer,
    storage_options: dict | None = None,
    lookahead: int = DEFAULT_LOOKAHEAD,
) -> list[ByteRange]:
    """Cut each file into ranges of about ``chunk_size`` bytes at safe cuts."""
    if chunk_size < 1:
        raise BpeDaskError(f"chunk size must be positive, got {chunk_size}")
    ranges: list[ByteRange] = []
    for file in files:
        cuts = _file_cuts(file, chunk_size, pretokenizer, storage_options or {}, lookahead)
        bounds = [0, *cuts, file.size]
        ranges.extend(ByteRange(file, a, b) for a, b in pairwise(bounds))
    return ranges


def _file_cuts(
    file: InputFile, chunk_size: int, pretokenizer: Pretokenizer, storage_options: dict, lookahead: int
) -> list[int]:
    if file.size <= chunk_size or file.compression:
        return []
    fs, path = filesystem(file.url, storage_options)
    cuts: list[int] = []
    for target in range(chunk_size, file.size, chunk_size):
        start = max(target, cuts[-1] + 1 if cuts else 1)
        if start >= file.size:
            break
        cut = find_cut(fs, path, file.size, start, pretokenizer, lookahead)
        if cut is None:
            log.debug("no safe cut within %d bytes after %s:%d", lookahead, file.url, start)
        elif cut < file.size:
            cuts.append(cut)
    return cuts


def find_cut(
    fs: fsspec.AbstractFileSystem,
    path: str,
    size: int,
    start: int,
    pretokenizer: Pretokenizer,
    lookahead: int,
) -> int | None:
    """The first safe cut at or after ``start``, reading windows that grow until one holds a cut
    or ``lookahead`` bytes are spent (ranged reads, so S3 fetches only what is asked)."""
    # Bytes of context a cut needs on either side: the longest special token, and a character.
    margin = 4 * pretokenizer.context + 4
    limit = min(size, start + lookahead)
    length = _FIRST_WINDOW
    while True:
        end = min(limit, start + length)
        window_start = max(0, start - margin)
        window = fs.cat_file(path, start=window_start, end=min(size, end + margin))
        cut = pretokenizer.first_cut_in_bytes(window, start - window_start, end - window_start)
        if cut is not None or end >= limit:
            return None if cut is None else window_start + cut
        length *= 4
