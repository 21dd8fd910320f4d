"""Word-count tables in bpe-dask's counts schema with OpenWebText's statistics: a Zipf count curve
over unique pre-tokens in OpenWebText's mix of kinds, for timing ``bpe-dask merge`` alone.

Memory grows by about 40 bytes a row (the tokens in Arrow arrays, their counts in numpy, and the
tokens seen so far as 64-bit hashes in a table of their own rather than a Python set of bytes),
so that a table of 100 million rows takes about 4 GB to make (4.1 GB measured, in 34 minutes), not 17.
"""

from __future__ import annotations

import array
import math
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numba import njit

from synth.coining import PUNCTUATION, WHITESPACE, cap, coined_name, coined_word, foreign_word
from synth.words import EMOJI, OWT_COMMON, OWT_NAMES, bars

# Counts tables: OpenWebText has about 2.5 billion pre-tokens and 4 million unique ones.
OWT_PRETOKENS, OWT_UNIQUE, COUNTS_HEAPS_BETA = 2.5e9, 4e6, 0.55
# The count curve ends below 1 (rounded up to 1), so the rarest third or so occur once.
LAST_RANK_COUNT = 0.45

# The commonest GPT-2 pre-tokens of English web text, most frequent first.
HEAD_PRETOKENS = bars(
    ",| the|.| of| and| to| a| in|\n\n| is| that| for|-| on| with| it| was| as|'s| The| be| are| I|"
    " by| at| this| have| from| (| you| not|)| an| or| he| his| but| they|:|\n| we| has| their| will|"
    " were| more| \"| which| one| been| can| all| her| would| \u201c| had| about| said| It|'t| she| there|"
    ' so| out| if|\u201d| who| up|?| also| In| when| time| than| its| what| people| like|"| new| just|'
    ' do|."| them| other| some| over| into| only| He| my| after| could| A| our| first| two| years|'
    " no|'| This| how| But| any| most| We| these| get|/| $|!| year| 1| 2| made| even| because| make|"
    " where| through| There| back| many| well|.\u201d|;| 3| much| And| If| 10| way| They|%| 2017| You|"
    " 2016|The| me| very| It|I| going| she|\u2019|s| -| \u2014|...| right| really| day| 5| 4|"
    "'re|'ve|'ll|'m|'d| 2018| 20| world| US| said| 2015| used| being"
)


def zipf_counts(unique: int, total: float, rng: random.Random) -> np.ndarray:
    """Counts for ranks 1..unique: ~1/(rank+1) for the head, a steeper power in the tail down to
    ``LAST_RANK_COUNT`` at the last rank (at least 1 once rounded), scaled to about ``total``, and
    jittered so that neighbouring ranks interleave."""
    head = max(10, unique // 40)
    # c(r) = c1 / (r + 1) up to ``head``, then c1 / (head + 1) * (r / head) ** -slope; choose slope
    # so that c(unique) = LAST_RANK_COUNT with c1 fixed by the total (integral approximation, bisection).
    low, high = 1.05, 6.0
    for _ in range(60):
        slope = (low + high) / 2
        tail = head**slope * ((head + 0.5) ** (1 - slope) - (unique + 0.5) ** (1 - slope)) / (slope - 1)
        c1 = total / (math.log((head + 1.5) / 1.5) + tail / (head + 1))
        last = c1 / (head + 1) * (unique / head) ** -slope
        low, high = (slope, high) if last > LAST_RANK_COUNT else (low, slope)
    counts = array.array("q")
    for rank in range(1, unique + 1):
        c = c1 / (rank + 1) if rank <= head else c1 / (head + 1) * (rank / head) ** -slope
        if rank > 20:
            c *= math.exp(rng.gauss(0.0, 0.3))
        counts.append(max(1, int(c + rng.random())))
    return np.frombuffer(counts, np.int64)


@njit
def _first_time(table: np.ndarray, token: bytes) -> bool:
    """Whether ``token`` is new to ``table`` (open addressing over 64-bit FNV-1a hashes, 0 empty),
    which then holds it. Two tokens of one hash would count as one: at 100 million tokens, a chance
    of about 3 in 10,000 that any two collide."""
    h = np.uint64(0xCBF29CE484222325)
    for byte in token:
        h = (h ^ np.uint64(byte)) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h = h | np.uint64(1)  # never 0, the empty slot's mark
    mask = np.uint64(len(table) - 1)
    slot = h & mask
    while table[slot] != 0:
        if table[slot] == h:
            return False
        slot = (slot + np.uint64(1)) & mask
    table[slot] = h
    return True


class _Seen:
    """The tokens emitted so far, and how many."""

    def __init__(self, unique: int) -> None:
        self.table = np.zeros(1 << max(4, (2 * unique).bit_length()), np.uint64)  # at most half full
        self.count = 0

    def add(self, token: bytes) -> bool:
        """Whether ``token`` is new (then it is counted)."""
        new = _first_time(self.table, token)
        self.count += new
        return new

    def __len__(self) -> int:
        return self.count


class _PretokenStream:
    """Unique pre-tokens (UTF-8 bytes), commonest first, in OpenWebText's mix of kinds: words with
    their space, capitalised and unspaced forms, names, then (more so among the rarer ones) digit
    runs, capitals, punctuation runs, non-ASCII words, emoji and whitespace runs."""

    KEPT_WORDS = 1 << 20  # the commonest coined words, kept; rarer ones are coined again when named

    def __init__(self, rng: random.Random, unique: int) -> None:
        self.rng = rng
        self.seen = _Seen(unique)
        self.words = [""]  # by rank, as emitted (the first ``KEPT_WORDS``)
        self.word_rank = 0  # the words emitted
        self.name_rank = 0

    def word(self, rank: int) -> str:
        """The word of ``rank``: a pure function of it (``coined_word``), kept for the commonest."""
        if rank < len(self.words):
            return self.words[rank]
        return OWT_COMMON[rank - 1] if rank <= len(OWT_COMMON) else coined_word(rank)

    def name(self, rank: int) -> str:
        return OWT_NAMES[rank - 1] if rank <= len(OWT_NAMES) else coined_name(rank)

    def earlier_word(self) -> str:
        """A word already emitted, the commoner likelier (for capitalised and unspaced forms)."""
        return self.word(int(math.exp(self.rng.random() * math.log(self.word_rank + 1))) or 1)

    def candidate(self) -> str:
        rng = self.rng
        space = " " if rng.random() < 0.75 else ""
        # Exotic kinds take a growing share down the ranks: about 20% of the rarest rows.
        if rng.random() < 0.2 * min(1.0, math.log10(len(self.seen) + 10) / 6.6):
            r = rng.random()
            if r < 0.45:
                digits = 1 + int(rng.expovariate(1 / 3.5))
                return space + str(rng.randrange(10 ** (digits - 1), 10**digits))
            if r < 0.6:
                word = self.earlier_word()
                return space + (word.upper() if rng.random() < 0.7 else cap(word) + word.upper())
            if r < 0.74:
                pieces = [PUNCTUATION[int(len(PUNCTUATION) * rng.random() ** 1.5)] for _ in range(3)]
                return space + "".join(pieces[: rng.randrange(1, 4)])
            if r < 0.96:
                return space + foreign_word(rng, self.word(rng.randrange(1, self.word_rank + 2)))
            if r < 0.99:
                return space + "".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 4)))
            return rng.choice(WHITESPACE)
        r = rng.random()
        if r < 0.62:
            self.word_rank += 1
            word = self.word(self.word_rank)
            if len(self.words) < self.KEPT_WORDS:
                self.words.append(word)
            return " " + word
        if r < 0.72:
            self.name_rank += 1
            return space + self.name(self.name_rank)
        if r < 0.84:
            return " " + cap(self.earlier_word())
        word = self.earlier_word()
        return word if rng.random() < 0.6 else cap(word)

    def take(self, unique: int) -> pa.ChunkedArray:
        """The first ``unique`` distinct pre-tokens, as a binary column."""
        chunks: list[pa.Array] = []
        chunk: list[bytes] = []
        found = 0
        for token in HEAD_PRETOKENS:
            data = token.encode()
            if found < unique and self.seen.add(data):
                chunk.append(data)
                found += 1
        while found < unique:
            data = self.candidate().encode()
            if self.seen.add(data):
                chunk.append(data)
                found += 1
                if len(chunk) == 1 << 20:
                    chunks.append(pa.array(chunk, pa.binary()))
                    chunk = []
        chunks.append(pa.array(chunk, pa.binary()))
        return pa.chunked_array(chunks, pa.binary())


def make_counts(unique: int, seed: int = 0) -> pa.Table:
    """A pyarrow Table in bpe-dask's counts schema with ``unique`` rows of OpenWebText statistics."""
    rng = random.Random(f"bpe-dask:counts:{seed}")
    total = OWT_PRETOKENS * (unique / OWT_UNIQUE) ** (1 / COUNTS_HEAPS_BETA)
    tokens = _PretokenStream(rng, unique).take(unique)
    counts = zipf_counts(unique, max(total, 2.0 * unique), rng)
    schema = pa.schema([("token", pa.binary()), ("count", pa.int64())])
    return pa.table({"token": tokens, "count": pa.array(counts, pa.int64())}, schema=schema)


def write_counts(unique: int, seed: int, out: str | Path) -> dict[str, float]:
    """Write the counts table to ``out`` (Parquet) and return a summary."""
    table = make_counts(unique, seed)
    pq.write_table(table, str(out))
    counts = table.column("count").to_numpy()
    lengths = np.sort(pc.binary_length(table.column("token")).to_numpy())
    return {
        "rows": table.num_rows,
        "total_count": int(counts.sum()),
        "max_count": int(counts.max()) if len(counts) else 0,
        "share_count_1": int(np.count_nonzero(counts == 1)) / max(1, len(counts)),
        "share_count_le_10": int(np.count_nonzero(counts <= 10)) / max(1, len(counts)),
        "median_token_bytes": int(lengths[len(lengths) // 2]) if len(lengths) else 0,
        "p99_token_bytes": int(lengths[int(len(lengths) * 0.99)]) if len(lengths) else 0,
    }
