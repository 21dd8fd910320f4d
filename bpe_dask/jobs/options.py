"""Job options: keyword options in, one checked ``JobOptions`` value out, used by every job.

Takes what the Python API's keyword arguments or the command line (``config``) give: special
tokens, chunk size, work directory, storage options, invalid-UTF-8 handling and where to run (a
``Client``, a scheduler address or scheduler file, or a LocalCluster of N workers). Every job
checks its options here, once, before any work, so a mistake is the same one-line
``BpeDaskError`` whichever way the job was started. Storage options (which may hold
credentials) never show in a ``repr``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from dask.utils import parse_bytes
from distributed import Client

from bpe_dask.cluster.client import scheduler_address
from bpe_dask.engines import check_engine
from bpe_dask.errors import BpeDaskError, UsageError
from bpe_dask.io.inputs import Reading
from bpe_dask.io.storage import absolute
from bpe_dask.io.text import check_utf8_errors
from bpe_dask.io.tokenizer_formats import ROLES, token_roles
from bpe_dask.rules.pretokenize import check_special_tokens, split_pattern
from bpe_dask.stages.count import CountSettings

MERGE_PLACES = ("auto", "client", "worker")

PathLike = str | os.PathLike


@dataclass(frozen=True)
class JobOptions:
    """How a job runs. Every field has a default; ``JobOptions.of(**kwargs)`` checks them all.

    >>> options = JobOptions.of(special_tokens=["<|endoftext|>"], chunk_size="64MB", pattern="cl100k_base")
    >>> options.chunk_size, options.pattern
    (64000000, 'gpt4')
    >>> JobOptions.of(chunk_sise=1)
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: unknown option 'chunk_sise' (options: bos_token, chunk_size, ...)
    """

    special_tokens: tuple[str, ...] = ()
    chunk_size: int | None = None  # bytes per map task; None: sized from the input and the cluster
    work_dir: str | None = None  # kept shards, so a re-run resumes; None: a temporary directory
    storage_options: dict = field(default_factory=dict, repr=False)  # for fsspec; may hold secrets
    utf8_errors: str = "strict"  # or "replace": invalid UTF-8 is read as U+FFFD
    pattern: str = "gpt2"
    input_format: str | None = None  # text, jsonl or parquet; None: by each file's name
    text_column: str = "text"  # the field or column of a record that holds its text
    on_bad_record: str = "error"  # or "skip": leave bad records out, counted in the report
    engine: str = "auto"  # counting and merging: compiled (numba) where it can, or "python", or "numba"
    client: Client | None = field(default=None, repr=False)  # run on this client's cluster
    scheduler: str | None = None  # or connect to this scheduler
    scheduler_file: str | None = None  # or to the one this file names (`dask scheduler --scheduler-file`)
    workers: int | None = None  # or start a LocalCluster of this many workers (default: one per core)
    in_process: bool | None = None  # count in this process (None: for small inputs, with no cluster asked)
    merge_on: str = "auto"  # where the merge loop runs: auto, client or worker
    ship_package: bool = False  # upload this bpe_dask to workers that lack it
    ship_credentials: bool = False  # send this machine's AWS_* credentials to the tasks (not by default)
    overwrite: bool = False  # replace results already in the output
    strict_pattern: bool = False  # a split pattern that leaves text out of every pre-token is an error
    show_progress: bool = False  # progress bars and log lines on stderr
    # The special tokens transformers takes for each role (tokenizer_config.json); None: GPT-2's, where
    # <|endoftext|> is one of them, as bos and eos.
    bos_token: str | None = None
    eos_token: str | None = None
    pad_token: str | None = None

    @classmethod
    def of(cls, options: JobOptions | None = None, **changes: Any) -> JobOptions:
        """``options`` (or the defaults) with ``changes``, checked. Unknown names are refused."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise BpeDaskError(f"unknown option {unknown[0]!r} (options: {', '.join(sorted(known))})")
        return replace(options or cls(), **changes)

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise in place once, here
        set_(self, "special_tokens", check_special_tokens(self.special_tokens or ()))
        if self.chunk_size is not None:
            set_(self, "chunk_size", parse_size(self.chunk_size, "chunk size"))
        if self.workers is not None:
            set_(self, "workers", positive_int(self.workers, "workers"))
        if not isinstance(self.storage_options or {}, dict):  # its value may hold a secret: not shown
            raise BpeDaskError(f"storage options must be a dict, got a {type(self.storage_options).__name__}")
        set_(self, "storage_options", dict(self.storage_options or {}))
        if isinstance(self.work_dir, os.PathLike):  # a pathlib.Path, as ``out`` may be
            set_(self, "work_dir", os.fspath(self.work_dir))
        for name in ("work_dir", "scheduler", "pattern", "utf8_errors", "merge_on", "engine", "input_format"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise BpeDaskError(f"{name} must be a string, got {getattr(self, name)!r}")
        if self.work_dir:
            set_(self, "work_dir", absolute(self.work_dir))  # as the workers must read it
        for name in ("ship_package", "ship_credentials", "overwrite", "show_progress", "strict_pattern") + (
            ("in_process",) if self.in_process is not None else ()
        ):
            if not isinstance(getattr(self, name), bool):
                raise BpeDaskError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.client is not None and not isinstance(self.client, Client):
            raise BpeDaskError(f"client must be a distributed.Client, got {self.client!r}")
        check_utf8_errors(self.utf8_errors)
        self.reading()
        set_(self, "pattern", split_pattern(self.pattern).spec)  # a built-in's name, or the regex
        check_engine(self.engine)
        if self.merge_on not in MERGE_PLACES:
            raise BpeDaskError(f"merge_on must be auto, client or worker, got {self.merge_on!r}")
        if self.scheduler_file is not None and not isinstance(self.scheduler_file, (str, os.PathLike)):
            raise BpeDaskError(f"scheduler_file must be a path, got {self.scheduler_file!r}")
        places = [
            name for name in ("scheduler_file", "client", "scheduler", "workers") if getattr(self, name)
        ]
        if len(places) > 1:
            raise UsageError(f"give one place to run: {places[0]}= or {places[1]}=, not both")
        if self.scheduler_file is not None:
            # A scheduler file's path is this machine's, and what it holds is checked now, before any
            # work (and read again when the job connects).
            set_(self, "scheduler_file", os.path.abspath(os.path.expanduser(self.scheduler_file)))
            scheduler_address(self.scheduler_file)
        if self.in_process and self.wants_cluster:
            raise BpeDaskError("in_process=True counts here: it cannot take client, scheduler or workers")
        check_replacement_character(self.special_tokens, self.utf8_errors)
        token_roles(self.special_tokens, self.roles())  # each one of the special tokens

    def roles(self) -> dict[str, str | None]:
        """The special tokens given for transformers' roles (``tokenizer_formats.token_roles``)."""
        return {role: getattr(self, role) for role in ROLES}

    @property
    def wants_cluster(self) -> bool:
        return bool(self.client or self.scheduler or self.workers or self.scheduler_file)

    @property
    def on_scheduler(self) -> bool:
        """Whether the job runs on a scheduler already running: an address, or a scheduler file."""
        return bool(self.scheduler or self.scheduler_file)

    def reading(self) -> Reading:
        return Reading(self.input_format, self.text_column, self.on_bad_record)

    def count_settings(self) -> CountSettings:
        return CountSettings(self.special_tokens, self.utf8_errors, self.pattern, self.engine)


def check_replacement_character(special_tokens: Sequence[str], utf8_errors: str) -> None:
    """With invalid UTF-8 read as U+FFFD, a special token holding U+FFFD would match text that is
    not there, and differently depending on where a range starts: refuse it."""
    if utf8_errors == "replace" and any("\ufffd" in token for token in special_tokens):
        raise BpeDaskError(
            "a special token holding U+FFFD cannot be told apart from invalid UTF-8 read as "
            'U+FFFD (utf8_errors="replace")'
        )


def parse_size(value: int | str, what: str = "size") -> int:
    """Bytes from ``65536``, ``"65536"``, ``"64MiB"`` or ``"1.5GB"``; a fraction of a byte is refused
    (``1.5`` was cut to 1 byte without a word).

    >>> parse_size("1.5KB"), parse_size(" 64 MiB ")
    (1500, 67108864)
    >>> parse_size(1.5)
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: size 1.5 is not a whole number of bytes (use bytes, or e.g. 64MiB)
    """
    try:
        size = value if isinstance(value, int) and not isinstance(value, bool) else parse_bytes(str(value))
        number, unit = re.fullmatch(r"\s*([-+\d.eE]+)\s*([A-Za-z]*)\s*", str(value)).groups()
        exact = float(number) * (parse_bytes(f"1{unit}") if unit else 1)
    except (ValueError, TypeError, AttributeError):
        raise BpeDaskError(f"not a size: {value!r} (use bytes, or e.g. 64MiB)") from None
    if exact != size:
        raise BpeDaskError(f"{what} {value!r} is not a whole number of bytes (use bytes, or e.g. 64MiB)")
    if size < 1:
        raise BpeDaskError(f"{what} must be positive, got {value!r}")
    return size


VOCAB_UNITS = {"": 1, "k": 1000, "K": 1000, "Ki": 1024}


def vocab_count(value: Any) -> int:
    """A vocabulary size: a whole number, or text with ``k`` (1,000) or ``Ki`` (1,024) after it.

    >>> vocab_count("32k"), vocab_count("32Ki"), vocab_count("1.5k"), vocab_count(50257), vocab_count("50257")
    (32000, 32768, 1500, 50257, 50257)
    """
    if isinstance(value, str) and (found := re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(k|K|Ki)?\s*", value)):
        number, unit = found.groups()
        size = float(number) * VOCAB_UNITS[unit or ""]
        if size != int(size):
            raise BpeDaskError(f"not a whole number of tokens: {value!r}")
        value = int(size)
    elif isinstance(value, str):
        raise BpeDaskError(f"not a vocabulary size: {value!r} (a whole number, or with k or Ki: 32k, 32Ki)")
    return positive_int(value)


def positive_int(value: Any, what: str = "") -> int:
    return whole_number(value, what, least=1)


def whole_number(value: Any, what: str = "", least: int = 0) -> int:
    """``value`` (an int, or text such as a flag's) as a whole number of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value))
        except ValueError:
            raise BpeDaskError(f"not a whole number: {value!r}") from None
    if value < least:
        bound = "a positive number" if least == 1 else f"{least} or more"
        raise BpeDaskError(f"{what} must be {bound}, got {value}".strip())
    return value
