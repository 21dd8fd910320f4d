"""Documents: values in, UTF-8 documents out, by one rule for every kind of input.

Every source (a JSON Lines or Parquet record's text, an element of a Python iterable or of a Dask
collection, a row of an Arrow column) turns its values into ``Documents``: a batch of UTF-8
documents back to back. A value is a document when it is text: a ``str`` (a lone surrogate is not
text), or ``bytes`` of valid UTF-8. Anything else is a bad record (``utf8_of`` says what is wrong
with it): the job stops with one line naming it, or, with ``on_bad_record="skip"``, leaves it out
and counts it (``BadRecords``). With ``utf8_errors="replace"``, invalid UTF-8 becomes U+FFFD, and a
lone surrogate one U+FFFD, as the tokenizer encodes such text, so training and encoding see the
same text.

>>> policy = RecordPolicy("skip")
>>> bad = BadRecords()
>>> documents = values_documents(["a b", None, b"c", 7], policy, bad, lambda k: f"element {k}")
>>> documents.texts(), bad
(['a b', 'c'], BadRecords(count=2, first='element 1: null'))
>>> values_documents([b"\\xff"], RecordPolicy(), BadRecords(), lambda k: f"element {k}")
Traceback (most recent call last):
bpe_dask.errors.InputError: element 0: invalid UTF-8 at byte 0 (utf8_errors="replace" substitutes U+FFFD; ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pyarrow as pa

from bpe_dask.errors import BpeDaskError, InputError
from bpe_dask.rules.special_tokens import valid_text

ON_BAD_RECORD = ("error", "skip")


@dataclass
class BadRecords:
    """The records ``on_bad_record="skip"`` left out: how many, and the first, described."""

    count: int = 0
    first: str | None = None

    def add(self, description: str) -> None:
        self.count += 1
        self.first = self.first or description

    def merge(self, other: BadRecords) -> None:
        self.count += other.count
        self.first = self.first or other.first


@dataclass(frozen=True)
class Documents:
    """A batch of documents: their UTF-8 bytes back to back, the ``k``-th ending at ``ends[k]``.

    >>> Documents.of(["ab", "c"]).ends.tolist(), Documents.of(["ab", "c"]).texts()
    ([2, 3], ['ab', 'c'])
    """

    data: bytes
    ends: np.ndarray

    @classmethod
    def of(cls, texts: list[str]) -> Documents:
        return cls.joined([text.encode("utf-8") for text in texts])

    @classmethod
    def joined(cls, encoded: list[bytes]) -> Documents:
        """The documents of UTF-8 ``encoded`` (one alone is not copied)."""
        return cls(b"".join(encoded), np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded))))

    @classmethod
    def one(cls, data: bytes) -> Documents:
        """``data`` as a batch of one document."""
        return cls(data, np.array([len(data)], np.int64))

    def __len__(self) -> int:
        return len(self.ends)

    def texts(self) -> list[str]:
        starts_ends = pairwise([0, *self.ends.tolist()])
        return [self.data[a:b].decode("utf-8") for a, b in starts_ends]


@dataclass(frozen=True)
class RecordPolicy:
    """What a bad record does (``on_bad_record``: stop the job, or ``skip`` it), how invalid UTF-8
    reads (``utf8_errors``: a bad record, or ``replace``d by U+FFFD). Messages name the options as
    keywords, which the command line says as its flags (``wording.as_flags``)."""

    on_bad_record: str = "error"
    utf8_errors: str = "strict"

    def __post_init__(self) -> None:
        if self.on_bad_record not in ON_BAD_RECORD:
            raise BpeDaskError(f"on_bad_record must be error or skip, got {self.on_bad_record!r}")

    def handle(self, where: str, problem: NotText, bad: BadRecords) -> None:
        """A bad record at ``where``: an ``InputError`` saying what is wrong and the ways out, or
        skipped into ``bad``."""
        if self.on_bad_record == "skip":
            bad.add(f"{where}: {problem}")
            return
        ways = ['on_bad_record="skip" leaves such records out']
        if problem.replaceable:
            ways.insert(0, 'utf8_errors="replace" substitutes U+FFFD')
        if problem.no_field:  # in every record, likely: another field holds the text
            ways.insert(0, "text_column= names the field that holds the text")
        raise InputError(f"{where}: {problem} ({'; '.join(ways)})")


STRICT = RecordPolicy()  # bad records stop the job, invalid UTF-8 is a bad record


class NotText(Exception):
    """What is wrong with a value that is not a document; ``replaceable`` when it is invalid UTF-8
    or a lone surrogate, which ``utf8_errors="replace"`` would read as U+FFFD; ``no_field`` when a
    record lacks the field the text was looked for in."""

    def __init__(self, problem: str, replaceable: bool = False, no_field: bool = False) -> None:
        super().__init__(problem)
        self.replaceable, self.no_field = replaceable, no_field


def utf8_of(value: object, policy: RecordPolicy) -> bytes:
    """The UTF-8 of a value that is text; else ``NotText`` saying what it is.

    >>> utf8_of("é", RecordPolicy()), utf8_of(b"\\xff", RecordPolicy(utf8_errors="replace"))
    (b'\\xc3\\xa9', b'\\xef\\xbf\\xbd')
    >>> utf8_of(3.5, RecordPolicy())
    Traceback (most recent call last):
    bpe_dask.io.documents.NotText: a float, not a string
    """
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            if policy.utf8_errors == "strict":
                raise NotText("text holding a lone surrogate, which is not valid Unicode", True) from None
            return valid_text(value).encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as error:
            if policy.utf8_errors == "strict":
                raise NotText(f"invalid UTF-8 at byte {error.start}", True) from None
            return data.decode("utf-8", "replace").encode("utf-8")
        return data
    if value is None or (isinstance(value, float) and value != value) or _is_pandas_null(value):
        raise NotText("null")
    kind = type(value).__name__
    raise NotText(f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}, not a string")


def _is_pandas_null(value: object) -> bool:
    return type(value).__name__ in ("NAType", "NaTType") and type(value).__module__.startswith("pandas")


def values_documents(
    values: Iterable, policy: RecordPolicy, bad: BadRecords, where: Callable[[int], str]
) -> Documents:
    """The documents of ``values``, bad ones (named by ``where(k)``) handled by ``policy``."""
    encoded = []
    for k, value in enumerate(values):
        try:
            encoded.append(utf8_of(value, policy))
        except NotText as problem:
            policy.handle(where(k), problem, bad)
    return Documents.joined(encoded)


TEXT_KINDS = ("is_string", "is_large_string", "is_string_view", "is_binary", "is_large_binary")


def is_text_type(kind: pa.DataType) -> bool:
    """Whether an Arrow column of ``kind`` holds text: strings or binary, or a dictionary of them.

    >>> is_text_type(pa.large_string()), is_text_type(pa.dictionary(pa.int8(), pa.binary()))
    (True, True)
    >>> is_text_type(pa.int64())
    False
    """
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return any(getattr(pa.types, name, lambda _: False)(kind) for name in TEXT_KINDS)  # views: pyarrow 16


def with_offsets(column: pa.Array) -> pa.Array:
    """A column of text as one of strings or binary, which Arrow finds by offsets (to slice, and to read
    straight from its buffers): a dictionary decoded, string views copied once (no offsets, nor kernels)."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_string_view(column.type):
        column = column.cast(pa.large_string())
    return column


def column_documents(
    column: pa.Array, policy: RecordPolicy, bad: BadRecords, where: Callable[[int], str]
) -> Documents:
    """A column of text (string, large_string, string_view, binary, dictionary-encoded) as documents,
    straight from its buffers where it is valid UTF-8 with no nulls (pyarrow does not check the
    UTF-8 of a string column it reads), else row by row; a null or invalid UTF-8 is a bad record
    named by ``where(row)``."""
    column = with_offsets(column)
    if column.null_count and policy.on_bad_record == "skip" and _valid_utf8(kept := column.drop_null()):
        for row in np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)).tolist():
            bad.add(f"{where(row)}: null")  # and the rest from the buffers, as if there were none
        column = kept
    if column.null_count == 0 and _valid_utf8(column):
        data, offsets = flat_bytes(column.cast(pa.large_binary()))
        return Documents(data.tobytes(), offsets[1:])
    return values_documents(column.cast(pa.large_binary()).to_pylist(), policy, bad, where)


def flat_bytes(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary or large_binary array's bytes (uint8, over Arrow's buffer) and where each value starts
    and the last ends (Arrow's offsets, as int64 from 0: a copy of the array's size)."""
    _, offsets, data = array.buffers()
    kind = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    offsets = np.frombuffer(offsets, kind)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return data[offsets[0] : offsets[-1]], offsets.astype(np.int64, copy=False) - offsets[0]


def _valid_utf8(column: pa.Array) -> bool:
    try:
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            column.cast(pa.large_string())  # checks the UTF-8
        else:
            column.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True
