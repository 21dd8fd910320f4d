"""Planning: input URLs in, special-token-aligned byte ranges out.

Takes paths, globs, directories or URLs (anything fsspec opens) and a target chunk size;
gives ``ByteRange``s that tile every file exactly. Each cut is moved forward to the start
of a special token, or, where none is near, to a whitespace boundary (or, in text without
whitespace, a change between letters, digits and punctuation) that provably leaves the
pre-tokenization unchanged (see ``_is_safe_whitespace_cut`` and ``_class_cut_in``). Counting
each range on its own therefore gives exactly the counts of the whole file.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import fsspec
import regex
from fsspec.utils import infer_compression

from .errors import BpeDaskError
from .storage import describe, filesystem

log = logging.getLogger(__name__)

DEFAULT_LOOKAHEAD = 1 << 20  # how far past a nominal cut we look for a special token
_FIRST_WINDOW = 1 << 16
_GLOB_CHARS = frozenset("*?[")
_WHITESPACE = regex.compile(r"\s")
# Whitespace bytes that are whole characters on their own: a UTF-8 continuation or lead
# byte is never below 0x80, so a cut before one of these is always between characters.
_ASCII_WHITESPACE = bytes(b for b in range(128) if _WHITESPACE.match(chr(b)))
_ASCII_WHITESPACE_BYTE = regex.compile(b"[" + regex.escape(_ASCII_WHITESPACE) + b"]")
# The ASCII members of the pattern's three non-whitespace classes: \p{L}, \p{N}, and the rest.
ASCII_LETTERS = bytes(b for b in range(128) if chr(b).isascii() and chr(b).isalpha())
ASCII_DIGITS = b"0123456789"
ASCII_PUNCTUATION = bytes(b for b in range(0x21, 0x7F) if not chr(b).isalnum())


def _any_of(chars: bytes) -> bytes:
    return b"[" + regex.escape(chars) + b"]"


_L, _N, _P = _any_of(ASCII_LETTERS), _any_of(ASCII_DIGITS), _any_of(ASCII_PUNCTUATION)
# Letter|digit, letter|punctuation, digit|letter, digit|punctuation, punctuation|digit: see
# ``_class_cut_in``. Not punctuation|letter, which a contraction ("'s") spans.
_CLASS_CHANGE = regex.compile(
    b"(?<=" + _L + b")(?=" + _N + b"|" + _P + b")|(?<=" + _N + b")(?=" + _L + b"|" + _P + b")"
    b"|(?<=" + _P + b")(?=" + _N + b")"
)


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
    special_tokens: Sequence[str] = (),
    storage_options: dict | None = None,
    lookahead: int = DEFAULT_LOOKAHEAD,
) -> list[ByteRange]:
    """Cut each file into ranges of about ``chunk_size`` bytes at safe boundaries."""
    if chunk_size < 1:
        raise BpeDaskError(f"chunk size must be positive, got {chunk_size}")
    specials = encode_specials(special_tokens)
    ranges: list[ByteRange] = []
    for file in files:
        cuts = _file_cuts(file, chunk_size, specials, storage_options or {}, lookahead)
        bounds = [0, *cuts, file.size]
        ranges.extend(ByteRange(file, a, b) for a, b in pairwise(bounds))
    return ranges


def encode_specials(special_tokens: Iterable[str]) -> list[bytes]:
    """The special tokens as UTF-8, longest first: the form the cut searches take."""
    return sorted({t.encode("utf-8") for t in special_tokens}, key=len, reverse=True)


def _file_cuts(
    file: InputFile, chunk_size: int, specials: list[bytes], storage_options: dict, lookahead: int
) -> list[int]:
    if file.size <= chunk_size or file.compression:
        return []
    fs, path = filesystem(file.url, storage_options)
    reader = _Reader(fs, path, file.size)
    cuts: list[int] = []
    for target in range(chunk_size, file.size, chunk_size):
        start = max(target, cuts[-1] + 1 if cuts else 1)
        if start >= file.size:
            break
        cut = find_cut(reader, start, specials, lookahead)
        if cut is None:
            log.debug("no safe cut within %d bytes after %s:%d", lookahead, file.url, start)
        elif cut < file.size:
            cuts.append(cut)
    return cuts


class _Reader:
    """Byte windows of one file through fsspec (ranged reads, so S3 fetches only what is asked).

    Remembers the windows of the current cut, which the whitespace fallback reads again.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, path: str, size: int) -> None:
        self.fs, self.path, self.size = fs, path, size
        self.recent: dict[tuple[int, int], bytes] = {}

    def read(self, start: int, end: int) -> bytes:
        start, end = max(0, start), min(self.size, end)
        if (start, end) not in self.recent:
            self.recent[(start, end)] = (
                self.fs.cat_file(self.path, start=start, end=end) if end > start else b""
            )
        return self.recent[(start, end)]


def find_cut(reader: _Reader, start: int, specials: list[bytes], lookahead: int) -> int | None:
    """The first safe cut at or after ``start``, looking at most ``lookahead`` bytes ahead."""
    reader.recent.clear()
    return _prefer_special(lambda search: _scan(reader, start, specials, lookahead, search), specials)


def find_cut_in_buffer(data: bytes, start: int, specials: list[bytes]) -> int | None:
    """The first safe cut at or after ``start`` in a buffer that more text follows.

    Positions within a margin of the buffer's end are not judged: a special token or a
    character may run on past it.
    """
    end = len(data) - context_margin(specials)
    if start >= end:
        return None
    return _prefer_special(lambda search: search(data, 0, start, end, specials), specials)


def _prefer_special(search_with: Callable, specials: list[bytes]) -> int | None:
    """The start of a special token where the search finds one, else a whitespace boundary,
    else (in text with no whitespace, such as minified JSON) a change of character class."""
    cut = search_with(_special_cut_in) if specials else None
    if cut is None:
        cut = search_with(_whitespace_cut_in)
    return cut if cut is not None else search_with(_class_cut_in)


def context_margin(specials: list[bytes]) -> int:
    """Bytes of context a cut needs on either side: the longest special token, or a character."""
    return max((len(t) for t in specials), default=0) + 4


def _scan(reader: _Reader, start: int, specials: list[bytes], lookahead: int, search) -> int | None:
    """Search growing windows after ``start`` until a cut is found or the look-ahead is spent."""
    margin = context_margin(specials)
    limit = min(reader.size, start + lookahead)
    length = _FIRST_WINDOW
    while True:
        end = min(limit, start + length)
        window_start = start - margin
        window = reader.read(window_start, end + margin)
        offset = max(window_start, 0)
        # The window reaches ``margin`` bytes past ``end``, so a special token starting
        # before ``end`` is always seen whole.
        cut = search(window, offset, start, end, specials)
        if cut is not None or end >= limit:
            return cut
        length *= 4


def _special_cut_in(window: bytes, offset: int, lo: int, hi: int, specials: list[bytes]) -> int | None:
    """The first special-token start in ``[lo, hi)`` that no other special-token occurrence straddles.

    Splitting at such a position ``p`` cannot change the special-token split of the whole
    text: every occurrence lies wholly before or after ``p``, so the left-to-right,
    longest-first scan of the whole text has a match starting exactly at ``p``.
    """
    candidates = sorted(
        pos + offset for token in specials for pos in _occurrences(window, token, lo - offset, hi - offset)
    )
    for p in candidates:
        if not straddled(window, p - offset, specials):
            return p
    return None


def _whitespace_cut_in(window: bytes, offset: int, lo: int, hi: int, specials: list[bytes]) -> int | None:
    for match in _ASCII_WHITESPACE_BYTE.finditer(window, lo - offset, hi - offset):
        p = match.start()
        if _is_safe_whitespace_cut(window, p) and not straddled(window, p, specials):
            return p + offset
    return None


def _is_safe_whitespace_cut(window: bytes, p: int) -> bool:
    r"""Whether cutting before the whitespace byte at ``p`` leaves the pre-tokenization unchanged.

    It does when the character before ``p`` is not whitespace. In the GPT-2 pattern
    ``'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`` whitespace
    appears only as a leading optional space or in all-whitespace matches, so no match
    holds a non-whitespace character followed by a whitespace one: none can span ``p``.
    The pattern also matches every character, so its matches tile the text and ``p`` is a
    boundary between two of them. With no look-behind, the matches from ``p`` onwards are
    the same whether the scan starts at 0 or at ``p``; and the match that ends at ``p``
    ends in a non-whitespace character, so the ``(?!\S)`` look-ahead never looks past ``p``.
    """
    if p == 0:
        return False
    begin = p - 1
    while begin > max(0, p - 4) and 0x80 <= window[begin] < 0xC0:
        begin -= 1
    try:
        previous = window[begin:p].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return len(previous) == 1 and not _WHITESPACE.match(previous)


def _class_cut_in(window: bytes, offset: int, lo: int, hi: int, specials: list[bytes]) -> int | None:
    r"""The first position in ``[lo, hi)`` between two ASCII characters that no pre-token joins.

    Those are a letter or a digit followed by a character of another non-whitespace class,
    and punctuation followed by a digit. In the GPT-2 pattern no match holds both a letter
    and a digit, or a digit and punctuation; and the only match with both a letter and
    punctuation, a contraction like ``'s``, has the punctuation first. So, as for a
    whitespace cut, the matches tile the text with a boundary at ``p``, the match ending at
    ``p`` ends in a non-whitespace character (no look-ahead past ``p``), and the matches from
    ``p`` onwards are the same whether the scan starts at 0 or at ``p``. ASCII bytes are
    whole characters in UTF-8, so ``p`` is between characters.
    """
    for match in _CLASS_CHANGE.finditer(window, max(lo - offset, 1), hi - offset):
        p = match.start()
        if not straddled(window, p, specials):
            return p + offset
    return None


def _occurrences(window: bytes, token: bytes, lo: int, hi: int) -> Iterable[int]:
    pos = window.find(token, max(lo, 0))
    while 0 <= pos < hi:
        yield pos
        pos = window.find(token, pos + 1)


def straddled(window: bytes | str, p: int, specials: Sequence[bytes] | Sequence[str]) -> bool:
    """Whether some special-token occurrence starts before ``p`` and ends after it (in bytes, or in text)."""
    return any(
        window.startswith(token, s) for token in specials for s in range(max(0, p - len(token) + 1), p)
    )
