"""The merge loop: word counts in, vocabulary and merges out.

Takes ``(word bytes, count)`` pairs, a target vocabulary size and where training starts (the bytes,
or a base vocabulary and its merges: continued training); gives the byte-level BPE vocabulary (ids
laid out by ``rules.vocabulary.start``: the bytes or the base's, then the special tokens, then one
id per merge) and the merges in order. The words are first split into the base's tokens
(``laid_out``); each step then merges the most frequent adjacent pair, ties going to the
lexicographically greater ``(bytes, bytes)`` pair.

The loop is incremental: it keeps the count of every pair, an index from each pair to the
words that hold it, and a heap of candidate pairs whose stale entries are skipped when
popped. A merge touches only the words that contain the merged pair.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from operator import add
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bpe_dask import interrupts
from bpe_dask.engines import use_compiled
from bpe_dask.io.counts_table import token_bytes, word_chunks, words_bytes
from bpe_dask.rules.bpe import allowed
from bpe_dask.rules.vocabulary import Vocabulary, start

if TYPE_CHECKING:
    from bpe_dask.compiled import LongWords, Words
    from bpe_dask.compiled.word_records import Chunk

log = logging.getLogger(__name__)

Pair = tuple[int, int]


class _Descending(bytes):
    """Bytes that sort in reverse, so a min-heap breaks count ties towards the greater pair
    (docs/exactness.md#ties)."""

    __slots__ = ()

    def __lt__(self, other: bytes) -> bool:  # type: ignore[override]
        return bytes.__gt__(self, other)


def train_merges(
    word_counts: pa.Table | Iterable[tuple[bytes, int]] | Words,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
    engine: str = "auto",
    *,
    base: Vocabulary | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: tuple[str, ...] = (),
    stopped: Callable[[str, int], None] | None = None,
    savings: list[int] | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Learn merges until the vocabulary holds ``vocab_size`` tokens or no pair is left.

    ``word_counts`` are ``(word bytes, count)`` pairs, or a counts table (``token``, ``count``), or
    what ``laid_out`` made of them (for the same ``base``). With a ``base``, training continues from
    it: the merges returned begin with its merges. ``progress`` is called with the number of merges
    learned after each merge. ``engine`` is ``"python"`` (the loop below), ``"numba"`` (the same loop
    compiled, ``compiled.learn_merges``), or ``"auto"``: numba for large tables when it is installed,
    where its start-up pays off. The tests check every engine against the plain reference trainer
    (``bpe_dask.rules.reference``).

    ``max_token_length`` (bytes), ``max_words`` and ``forbid`` leave out of the running every pair
    that would make a token they rule out (``rules.bpe.allowed``); ``min_frequency`` stops the loop
    when the best pair left occurs fewer times. When one of them ends the loop before the
    vocabulary is full, ``stopped`` is told which: ``"min_frequency"`` and the best pair's count, or
    ``"token_limits"`` and 0.

    ``savings``, when given, gets for each merge how many tokens it saves: by how much the merge
    shortens the words, times their counts. It is not the pair's count, which counts overlapping
    pairs (``a a a`` holds ``a a`` twice, and one merge saves one token).
    """
    if not hasattr(word_counts, "text_bytes"):  # not laid out yet
        word_counts = laid_out(word_counts, vocab_size, engine, base)
    # Said here, once, where the loop starts (the words may have been laid out before, by the job).
    log.info("merging %s words with the %s", f"{word_counts.rows:,}", word_counts.loop)
    vocab, merges = start(special_tokens, (base.vocab, base.merges) if base else None)
    limits = {"min_frequency": min_frequency, "max_token_length": max_token_length, "max_words": max_words}
    learned = _learner(word_counts)(word_counts, vocab, vocab_size, **limits, forbid=forbid, stopped=stopped)
    kept = len(merges)
    for a, b, saved in learned:  # each merge's token is in ``vocab`` already
        merges.append((vocab[a], vocab[b]))
        if savings is not None:
            savings.append(saved)
        if progress is not None:
            progress(len(merges) - kept)
    return vocab, merges


def _learner(words: LaidOut | Words | LongWords) -> Callable[..., Iterator[tuple[int, int, int]]]:
    """The loop for words laid out as ``words`` are (``laid_out``): each takes the words, the first
    vocabulary, the vocabulary size, and ``train_merges``'s limits and ``stopped`` by name."""
    if isinstance(words, LaidOut):
        return _python_loop
    from bpe_dask.compiled import LongWords, learn_merges, learn_merges_long

    return learn_merges_long if isinstance(words, LongWords) else learn_merges


def _python_loop(words, vocab, vocab_size, *, min_frequency, stopped, **limits):
    return _MergeState(words, vocab, **limits).learn_merges(vocab_size, min_frequency, stopped)


class LaidOut(list):
    """Words as the pure-Python loop takes them: ``(ids, count)`` pairs (ids as bytes where they are
    bytes), with what ``compiled.Words`` also tells: how many words, and the tokens they stand for
    before any merge (each word's ids times its count)."""

    text_bytes = 0  # the bytes of text the words stand for, set by ``laid_out``, as on ``Words``
    loop = "Python loop"

    @property
    def rows(self) -> int:
        return len(self)

    @property
    def tokens(self) -> int:
        return sum(len(ids) * count for ids, count in self)


def laid_out(
    word_counts: pa.Table | Iterable[tuple[bytes, int]],
    vocab_size: int,
    engine: str = "auto",
    base: Vocabulary | None = None,
) -> LaidOut | Words:
    """The words as ``train_merges`` takes them, for the engine that will merge them, each split into
    ``base``'s tokens (``Vocabulary.merged``, or its compiled encoder; with no base, its bytes are its
    ids): from numba's threshold up, laid out as the compiled loop's records (``compiled.Words``);
    below it, ``(ids, count)`` pairs. Nothing here keeps the table: given one no one else holds
    (``laid_out(read_counts(url), ...)``), it is freed once its words are laid out, before the loop
    builds its index of pairs."""
    if not isinstance(word_counts, pa.Table):
        pairs = list(word_counts)
        tokens = pa.array([w for w, _ in pairs], pa.binary())
        word_counts = pa.table({"token": tokens, "count": pa.array([c for _, c in pairs], pa.int64())})
    text_bytes = words_bytes(word_counts)
    rows, size = word_counts.num_rows, token_bytes(word_counts)
    if merge_engine(engine, rows, size) != "numba":
        columns = (word_counts.column(c).to_pylist() for c in ("token", "count"))
        word_counts = list(zip(*columns, strict=True))
        laid = LaidOut(word_counts if base is None else [(base.merged(w), c) for w, c in word_counts])
        laid.text_bytes = text_bytes
        return laid
    from bpe_dask.compiled import LongWords, Words

    chunks = word_chunks(word_counts)
    if base is not None:
        chunks = _split_by(base, chunks)
    long = _long(word_counts, size)
    words = LongWords(chunks, rows, size) if long else Words(chunks, rows, size, vocab_size)
    words.text_bytes = text_bytes
    return words


ENCODE_SLICE = 1 << 24  # bytes of words one thread splits into a base's tokens at a time


def _split_by(base: Vocabulary, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
    """The words of ``chunks`` split into ``base``'s tokens by its compiled encoder, in order, in
    slices of ``ENCODE_SLICE`` bytes on every core of this machine (the encoder releases the GIL):
    the ids of a slice take four bytes a byte, so a table of long documents is never encoded whole."""
    from bpe_dask.compiled import Encoder

    encoder = Encoder(base.byte_ids, base.merge_ranks)

    def encoded(data: np.ndarray, offsets: np.ndarray, counts: np.ndarray) -> Chunk:
        start = offsets[0]
        return (*encoder.pretoken_ids(data[start : offsets[-1]], offsets - start), counts)

    def slices() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for data, offsets, counts in chunks:
            cuts = np.searchsorted(offsets, np.arange(0, offsets[-1], ENCODE_SLICE), side="right") - 1
            for a, b in pairwise([*np.unique(np.maximum(cuts, 0)).tolist(), len(offsets) - 1]):
                if b > a:
                    yield data, offsets[a : b + 1], counts[a:b]

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with ThreadPoolExecutor(threads, thread_name_prefix="bpe-dask-split") as pool:
        pending: deque = deque()
        for piece in slices():
            pending.append(pool.submit(encoded, *piece))
            if len(pending) > 2 * threads:  # a few ahead: their ids are held until laid out
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _long(word_counts: pa.Table, size: int) -> bool:
    """Whether the words are long: the word an average byte is in has ``LONG_WORD`` bytes or more (a
    few long documents among many short numbers are long words; one long run among words, not)."""
    if not size or size < LONG_WORD // 4 * word_counts.num_rows:  # most are short: not worth measuring
        return False
    lengths = pc.cast(pc.binary_length(word_counts.column("token")), pa.int64())
    return pc.sum(pc.multiply(lengths, lengths)).as_py() >= LONG_WORD * size


NUMBA_MIN_WORDS = 50_000  # below this, loading compiled code costs more than it saves
NUMBA_MIN_BYTES = 1 << 20  # ... unless the words are long: the Python loop reads a word whole per merge
# Words of this many bytes on average, by bytes (SuperBPE's documents), take the loop that links their
# positions (``compiled.merge_positions``): the records' loop reads a word whole per merge that touches it.
LONG_WORD = 64
# Input from which the merge loop likely runs compiled: varied text of this size holds about as many
# distinct pre-tokens as NUMBA_MIN_WORDS; English prose holds far fewer.
COMPILE_AHEAD_BYTES = 1 << 20


def merge_engine(engine: str, words: int, size: int = 0) -> str:
    """``"numba"`` or ``"python"``: the engine ``train_merges`` runs for this many words of ``size``
    bytes in all."""
    work = max(words, size * NUMBA_MIN_WORDS // NUMBA_MIN_BYTES)
    return "numba" if use_compiled(engine, work, NUMBA_MIN_WORDS) else "python"


class _MergeState:
    """Words, pair counts, a pair-to-words index and a lazy heap of candidate pairs.

    A word is a ``str`` whose characters are token ids (``chr(id)``): merging a pair in it
    is then ``str.replace``, which goes left to right without overlaps exactly as BPE does,
    and a pair is a two-character string, cheap to build, hash and look for. The index
    from pair to words is allowed to hold stale and repeated entries (a word whose pair
    was merged away, or that gained it twice): a merge skips any word not holding the pair.
    Likewise the heap keeps entries whose count has changed until they surface; it is never
    compacted, since a run of tens of thousands of merges pushes only a few times as many
    entries as there are pairs.
    """

    def __init__(
        self,
        word_counts: Iterable[tuple[bytes | tuple[int, ...], int]],
        vocab: dict[int, bytes],
        max_token_length: int | None = None,
        max_words: int | None = None,
        forbid: tuple[str, ...] = (),
    ) -> None:
        self.vocab = vocab
        self.limits = (max_token_length, max_words, [part.encode("utf-8") for part in forbid])
        self.limited = any((max_token_length, max_words, forbid))
        self.descending = {token_id: _Descending(token) for token_id, token in vocab.items()}
        self.words: list[str] = []
        self.freqs: list[int] = []
        pair_counts: dict[str, int] = defaultdict(int)
        where: dict[str, list[int]] = defaultdict(list)
        for ids, count in word_counts:
            if len(ids) < 2:
                continue  # a single token has no pair to merge
            # Each id a character: bytes as latin-1, where byte b is chr(b), the id of its token.
            word = ids.decode("latin-1") if isinstance(ids, bytes) else "".join(map(chr, ids))
            index = len(self.words)
            self.words.append(word)
            self.freqs.append(count)
            for pair in map(add, word, word[1:]):
                pair_counts[pair] += count
                where[pair].append(index)
        self.pair_counts, self.where = pair_counts, where
        self.heap = [self._entry(pair, count) for pair, count in pair_counts.items() if self._fits(pair)]
        heapq.heapify(self.heap)

    def _entry(self, pair: str, count: int) -> tuple[int, bytes, bytes, str]:
        return (-count, self.descending[ord(pair[0])], self.descending[ord(pair[1])], pair)

    def _fits(self, pair: str) -> bool:
        """Whether merging ``pair`` makes a token the limits allow: a pair that does not fit never
        will (tokens keep their bytes), so it gets no heap entry, though it is counted."""
        return not self.limited or allowed(self.vocab[ord(pair[0])] + self.vocab[ord(pair[1])], *self.limits)

    def learn_merges(
        self, vocab_size: int, min_frequency: int, stopped: Callable[[str, int], None] | None
    ) -> Iterator[tuple[int, int, int]]:
        """Merge the best pair left into a new token of the vocabulary until it holds ``vocab_size``
        tokens or no pair is left (``train_merges`` says when ``stopped`` is told why), giving each
        merge as it is made: the two ids it joins and the tokens it saves."""
        vocab = self.vocab
        new_id = max(vocab) + 1  # each merge at the next free id (``start``)
        while len(vocab) < vocab_size:
            interrupts.check()  # a signal is raised here, between merges, not in whatever C called back
            best = self.pop_best()
            if best is None:
                if self.pair_counts and stopped is not None:  # pairs are left, all ruled out
                    stopped("token_limits", 0)
                return
            (a, b), count = best
            if count < min_frequency:
                if stopped is not None:
                    stopped("min_frequency", count)
                return
            vocab[new_id] = vocab[a] + vocab[b]
            yield a, b, self.merge((a, b), new_id)
            new_id += 1

    def pop_best(self) -> tuple[Pair, int] | None:
        """The most frequent pair that fits (ties to the greater bytes) and its count, skipping stale
        heap entries."""
        heap, pair_counts = self.heap, self.pair_counts
        while heap:
            negative_count, _, _, pair = heapq.heappop(heap)
            if pair_counts.get(pair) == -negative_count:
                return (ord(pair[0]), ord(pair[1])), -negative_count
        return None

    def merge(self, pair: Pair, new_id: int) -> int:
        """Replace ``pair`` with ``new_id`` in every word that holds it, updating counts and index;
        gives how many tokens that saves (the words' shortening times their counts).

        Only the pairs at the merged spots change: ``x a b y`` loses ``x a``, ``a b`` and ``b y``
        and gains ``x X`` and ``X y``. Where two merged spots touch (``a b a b``), the pair
        between them is one pair, counted once on each side of the merge.
        """
        self.descending[new_id] = _Descending(self.vocab[new_id])
        merged, joined = chr(new_id), chr(pair[0]) + chr(pair[1])
        words, freqs, where = self.words, self.freqs, self.where
        delta: dict[str, int] = defaultdict(int)
        saved = 0
        for index in where.pop(joined):
            word = words[index]
            at = word.find(joined)
            if at < 0:
                continue  # a stale or repeated entry
            freq, end, last = freqs[index], -1, len(word) - 2
            while at >= 0:  # the pairs the old word loses
                delta[joined] -= freq
                if at > 0 and at != end:
                    delta[word[at - 1 : at + 1]] -= freq
                if at < last:
                    delta[word[at + 1 : at + 3]] -= freq
                end = at + 2
                at = word.find(joined, end)
            new_word = word.replace(joined, merged)
            words[index] = new_word
            saved += (len(word) - len(new_word)) * freq
            at, last = new_word.find(merged), len(new_word) - 1
            while at >= 0:  # the pairs the new word gains, which it is now listed under
                if at > 0:
                    gained = new_word[at - 1 : at + 1]
                    delta[gained] += freq
                    where[gained].append(index)
                if at < last and new_word[at + 1] != merged:
                    gained = new_word[at : at + 2]
                    delta[gained] += freq
                    where[gained].append(index)
                at = new_word.find(merged, at + 1)
        self._apply(delta)
        return saved

    def _apply(self, delta: dict[str, int]) -> None:
        pair_counts, heap = self.pair_counts, self.heap
        for pair, change in delta.items():
            if not change:
                continue
            count = pair_counts.get(pair, 0) + change
            if count > 0:
                pair_counts[pair] = count
                if self._fits(pair):
                    heapq.heappush(heap, self._entry(pair, count))
            else:
                del pair_counts[pair]
                self.where.pop(pair, None)
