"""What bpe-dask writes: every output's names in one list, and earlier outputs known again among inputs.

Takes the files a listing of inputs holds (``fs.find`` or ``fs.glob``'s, with their sizes; for a
few, what they hold: the JSON beside a file of ids); gives which of them earlier bpe-dask jobs
wrote, each said as what it is (``Skipped``). The writers take their names from here
(``TOKENIZER.names``, ``ENCODED.owns``, ``EVALUATION.owns``, ``METADATA_PREFIX``), and so do their
output checks, so an output a job writes is an output a listing skips:

- a directory output (``DIRECTORY_OUTPUTS``: a tokenizer, ``.npy`` shards, an evaluation) holds
  ``_SUCCESS`` and files of its kind: the whole folder is skipped (Spark leaves ``_SUCCESS`` beside
  files of its own: their folder is read); one of its files alone (a ``report.json``, a
  ``compression.png`` moved out of its folder) is skipped too;
- a file of ids (``encode --format bin``) and a work directory's encoded shard, by the JSON beside
  them (``F`` and ``F.json``, whose keys say which: ``SIDECARS``), read when a listing holds both;
- a counts table, and a work directory's count shard, by the keys bpe-dask puts in its Parquet
  metadata (``METADATA_PREFIX``; ``io.inputs`` reads the footer);
- temporary files (``.partial-``, ``.work-``, probes) start with ``.``, which every listing skips.

>>> ENCODED.owns("000012.npy"), ENCODED.owns("notes.npy"), TOKENIZER.owns("merges.txt")
(True, False, True)
>>> [k.what for k in [kind_of({"_SUCCESS", "index.json", "report.json", "000000.npy"})]]
['encoded .npy shards']
>>> kind_of({"_SUCCESS", "part-00000.parquet"}) is None  # Spark's
True
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass

import fsspec

from bpe_dask.io.publish import PROBE, SUCCESS

REPORT = "report.json"
INDEX = "index.json"
TOKENIZER_FILES = (
    "vocab.json",
    "merges.txt",
    "tokenizer.json",
    "tokenizer.tiktoken",
    "tokenizer_config.json",  # transformers' AutoTokenizer: which special token is eos, bos, pad
    "special_tokens_map.json",
)
CURVE_FILES = ("compression.csv", "compression.png")
EVALUATION_FILES = ("evaluation.json", "evaluation.png")


@dataclass(frozen=True)
class DirectoryOutput:
    """A kind of directory a job publishes (with ``_SUCCESS`` last): what it is, as the skip line
    says, and the names of its files (and, with ``numbered``, files named by a number and that suffix)."""

    what: str
    names: tuple[str, ...]
    numbered: str = ""

    def owns(self, name: str) -> bool:
        """Whether ``name`` is one this kind of output writes (``_SUCCESS`` aside)."""
        if name in self.names:
            return True
        return bool(self.numbered) and name.endswith(self.numbered) and name[: -len(self.numbered)].isdigit()


TOKENIZER = DirectoryOutput("a tokenizer", (*TOKENIZER_FILES, *CURVE_FILES, REPORT))  # train, merge, save
ENCODED = DirectoryOutput("encoded .npy shards", (INDEX, REPORT), ".npy")  # encode --format npy
EVALUATION = DirectoryOutput("an evaluation", EVALUATION_FILES)  # evaluate --out
DIRECTORY_OUTPUTS = (TOKENIZER, ENCODED, EVALUATION)

# Every key bpe-dask puts in a Parquet file's metadata (a counts table's settings, a shard's tallies).
METADATA_PREFIX = b"bpe_dask."
COUNTS = "word counts bpe-dask count wrote"
# The JSON beside a file bpe-dask wrote, by keys that say what the file is.
SIDECARS = {
    frozenset({"dtype", "tokens"}): "token ids bpe-dask encode wrote",  # F.bin and its report, F.bin.json
    frozenset({"text_bytes", "bad_records"}): "a work directory's encoded ids",  # F.npy and F.npy.json
}
SIDECAR = "the JSON bpe-dask writes beside ids"
SIDECAR_LIMIT = 1 << 20  # a sidecar is a few hundred bytes: a larger JSON file is not one
# The names a job writes under before it commits (``io.publish``: ``.partial-*``, ``.NAME.partial-*``,
# ``.NAME.old-*``, ``.NAME.publishing``; ``jobs.context``'s scratch ``.NAME.work-*``; probes): a
# directory's listing hides them, as every name starting with ``.``; a glob's finds them.
LEFTOVER = re.compile(rf"{re.escape(PROBE)}.*|\.partial-.*|\..+\.(partial|old|work)-.*|\..+\.publishing")


@dataclass(frozen=True)
class Skipped:
    """An earlier output found among the inputs: a folder (whole) or a file, and what it is."""

    path: str
    what: str
    folder: bool = False

    def said(self, top: str) -> str:
        """Its name below ``top``, a folder's with a ``/``."""
        name = self.path[len(top) :].lstrip("/") if top and self.path.startswith(top) else self.path
        return f"{name}{'/' if self.folder else ''}"


def kind_of(names: set[str]) -> DirectoryOutput | None:
    """The kind of output a folder holding ``names`` is: ``_SUCCESS`` and files of that kind (the
    kind that owns most of them: ``report.json`` is a tokenizer's and ``.npy`` shards')."""
    if SUCCESS not in names:
        return None
    owned = {kind: sum(kind.owns(name) for name in names) for kind in DIRECTORY_OUTPUTS}
    best = max(owned, key=owned.get)
    return best if owned[best] else None


def earlier_outputs(fs: fsspec.AbstractFileSystem, listing: dict[str, dict], top: str) -> list[Skipped]:
    """What of ``listing`` (paths under ``top`` and their ``info``) earlier bpe-dask jobs wrote.
    Nothing when ``top`` itself is such a folder: named on its own, it is read as asked."""
    top = top.rstrip("/")
    folders: dict[str, set[str]] = defaultdict(set)
    for path in listing:
        parent, _, name = path.rpartition("/")
        folders[parent].add(name)
    if kind_of(folders.get(top, set())):
        return []
    skipped: dict[str, Skipped] = {}  # by path, in the order found

    def skip(path: str, what: str, folder: bool = False) -> None:
        if path not in skipped and not path.startswith(tuple(f"{gone}/" for gone in skipped)):
            skipped[path] = Skipped(path, what, folder)

    for path in sorted(listing):  # a folder before what it holds
        parts = path[len(top) :].split("/")
        left = next((k for k, part in enumerate(parts) if LEFTOVER.fullmatch(part)), None)
        if left is not None:
            folder = left < len(parts) - 1 or listing[path].get("type") == "directory"
            skip(top + "/".join(parts[: left + 1]), "what a stopped bpe-dask job left", folder)
    for folder, names in sorted(folders.items()):  # a folder before those inside it
        if kind := kind_of(names):
            skip(folder, kind.what, True)
    inside = tuple(f"{gone}/" for gone in skipped)
    files = {
        p: i
        for p, i in listing.items()
        if p not in skipped and not p.startswith(inside) and i.get("type") != "directory"
    }
    for path in sorted(files):
        name, described = path.rpartition("/")[2], path.removesuffix(".json")
        if any(kind.owns(name) for kind in DIRECTORY_OUTPUTS):
            skip(path, "files of bpe-dask outputs")
        elif path.endswith(".json") and (described in files or described.endswith((".bin", ".npy"))):
            # A sidecar is read only beside its file (or named as one whose file is gone): few reads.
            what = sidecar_of(fs, path, files[path].get("size"))
            if what is not None and described in files:
                skip(described, what)
            if what is not None:
                skip(path, SIDECAR)
    return list(skipped.values())


def sidecar_of(fs: fsspec.AbstractFileSystem, path: str, size: int | None = None) -> str | None:
    """What the file beside the JSON ``path`` is, if ``path`` is the sidecar bpe-dask writes with it
    (``SIDECARS``), else ``None``. Only a small JSON file is read."""
    if size is None or size > SIDECAR_LIMIT:  # no size: a web server's, which may send anything
        return None
    try:
        held = json.loads(fs.cat_file(path))
    except (OSError, ValueError):
        return None
    if not isinstance(held, dict):
        return None
    return next((what for keys, what in SIDECARS.items() if keys <= held.keys()), None)


def is_written_parquet(metadata: dict[bytes, bytes] | None) -> bool:
    """Whether a Parquet schema's ``metadata`` is what bpe-dask puts in its counts and shards."""
    return any(key.startswith(METADATA_PREFIX) for key in metadata or {})


def say_skipped(skipped: list[Skipped], top: str) -> str:
    """What was skipped of a listing under ``top``, in a few words: one name of each kind, and how
    many more of that kind there are.

    >>> say_skipped([Skipped("d/tok", "a tokenizer", True), Skipped("d/a.parquet", COUNTS),
    ...              Skipped("d/b.parquet", COUNTS)], "d")
    'earlier bpe-dask outputs: tok/ (a tokenizer), a.parquet and 1 more (word counts bpe-dask count wrote)'
    """
    kinds: dict[str, list[Skipped]] = {}
    for one in skipped:
        kinds.setdefault(one.what, []).append(one)
    said = [
        f"{same[0].said(top)}{f' and {len(same) - 1} more' if len(same) > 1 else ''} ({what})"
        for what, same in kinds.items()
    ]
    return f"earlier bpe-dask outputs: {', '.join(said)}"
