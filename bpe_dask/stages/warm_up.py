"""Warming numba's cache: built-in split patterns and stages in, the compiled loops those stages run
compiled into numba's cache (or loaded from it) out, with numba's account of which
(``compiled.cache.CacheUse``).

``compile_stages`` runs each stage's compiled path once on a few hundred bytes, through the very calls
the stages make, so with the argument types a job compiles for: checking UTF-8, counting text and
documents (the counter grown past its first size too), summing sorted count runs as the reduce does, the
merge loop (its rarely taken regrowths too), encoding text and documents (a cache grown and swept too),
and tallying the ids of counted words (an evaluate task). What a stage compiles depends on its pattern
(its counting and encoding loops) and nothing else, so a process, or a worker image, that ran it for a
job's pattern runs the job on machine code loaded from the cache. ``bpe-dask warm-up`` compiles every
stage; a job's embedded cluster only the stages its workers run compiled (``cluster.client``), and
``train`` the merge loop (``stages.compile_ahead``). Where numba keeps it, and what an entry must match
to serve: ``compiled.cache``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from bpe_dask.compiled import Counter, Encoder, LongWords, compile_merge_loop, learn_merges_long
from bpe_dask.compiled.cache import CacheUse, cache_use
from bpe_dask.compiled.utf8 import check_utf8
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import as_arrays, counts_table
from bpe_dask.io.documents import Documents
from bpe_dask.rules import reference
from bpe_dask.rules.patterns import PATTERNS, SUPERWORDS, split_pattern
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.rules.vocabulary import Vocabulary
from bpe_dask.stages.counters import CompiledCounter
from bpe_dask.stages.merge import train_merges
from bpe_dask.stages.reduce import sum_sorted
from bpe_dask.tokenizer import Tokenizer, encode_utf8_documents, histogram

SPECIAL = "<|endoftext|>"
# A little of everything the scanners tell apart: letters, contractions, digits, punctuation, runs
# of spaces and newlines, accents, CJK, an emoji, and a special token.
TEXT = (
    "Once upon a time, it's said, 12345 cats   didn't STOP.\n\n  Café naïve — 東京 🙂 x=1;"
    f'{SPECIAL}She\'ll say: "hello" again\t\r\n' * 8
)
# What a stage runs compiled: a map task's counting, a reduce task's sum of sorted runs, the merge
# loop, an encode task, and an evaluate task's counting and tally of ids.
STAGES = ("count", "reduce", "merge", "encode", "evaluate")
MERGED = 256 + 1 + 40  # the warm-up tokenizer's vocabulary: the bytes, the special token, 40 merges


def builtin_patterns(names: Iterable[str]) -> list[str]:
    """The built-in patterns ``names`` name (``gpt4`` or ``cl100k_base``, ...), each once.

    >>> builtin_patterns(["cl100k_base", "gpt2", "gpt4"])
    ['gpt4', 'gpt2']
    """
    found: list[str] = []
    for name in names:
        pattern = split_pattern(name)
        if not pattern.builtin:
            raise BpeDaskError(
                f"only the built-in patterns are compiled ({', '.join(PATTERNS)}), not {name}: a pattern of "
                "your own runs in the regex module, with nothing to compile"
            )
        if pattern.name not in found:
            found.append(pattern.name)
    return found


def compile_stages(patterns: Iterable[str] = ("gpt2",), stages: Iterable[str] = STAGES) -> CacheUse:
    """Run every compiled loop that ``stages`` (``STAGES``, all by default) run in a job with one of
    ``patterns``, so numba compiles each into its cache, or loads it from there; gives numba's
    account of which it did."""
    names, stages = builtin_patterns(patterns), set(stages)
    if stages - set(STAGES):
        raise ValueError(f"no such stages: {sorted(stages - set(STAGES))}; the stages are {STAGES}")
    started = time.perf_counter()
    for name in names:
        pretokenizer = Pretokenizer([SPECIAL], name)
        if stages & {"count", "evaluate"}:
            _count(pretokenizer)
        if stages & {"encode", "evaluate"}:
            _encode(pretokenizer, stages)
    if "reduce" in stages:  # the same for every pattern
        table = _counts(Pretokenizer([SPECIAL]))
        sum_sorted([table, table, table], "numba")  # sorted runs, two and more: as the tree of reduce tasks
    if "merge" in stages:
        counts = _counts(Pretokenizer([SPECIAL]))
        merging = logging.getLogger(train_merges.__module__)
        level = merging.level
        merging.setLevel(logging.WARNING)  # its line saying which loop merges how many words is a job's
        try:
            train_merges(counts, MERGED, [SPECIAL], engine="numba")  # as a job calls it
        finally:
            merging.setLevel(level)
        compile_merge_loop()  # its regrowths too, which a small table never needs
        if any(split_pattern(name) in SUPERWORDS for name in names):
            _merge_documents()
    return cache_use(time.perf_counter() - started)


def _merge_documents() -> None:
    """What SuperBPE's second stage merges with: documents split into a base's tokens, and the loop
    of long words (``compiled.merge_positions``)."""
    base = Vocabulary(*reference.train([TEXT], MERGED, [SPECIAL]), [SPECIAL])
    data = TEXT.encode("utf-8")
    ids, ends = Encoder(base.byte_ids, base.merge_ranks).pretoken_ids(data, np.array([0, len(data)]))
    words = LongWords([(ids, ends, np.array([2]))], 1, len(ids))
    list(learn_merges_long(words, dict(base.vocab), len(base.vocab) + 16))


def _count(pretokenizer: Pretokenizer) -> None:
    """What a map task counts with: text, documents, and a counter whose arrays grow."""
    counter = CompiledCounter(pretokenizer)
    counter.add(TEXT)
    check_utf8(np.frombuffer(TEXT.encode("utf-8"), np.uint8))  # what its reader checks text with
    counter.add_documents(Documents.of(TEXT.split(SPECIAL)))
    grown = Counter(pretokenizer.pattern.name, capacity=4)  # its arrays grow and its table is hashed again
    data = TEXT.encode("utf-8")
    grown.add(data, pretokenizer.piece_bounds(data))


def _encode(pretokenizer: Pretokenizer, stages: set[str]) -> None:
    """What an encode task (text, records) and an evaluate task (counted words) call, with a tokenizer
    of the warm-up text's first merges (the reference trainer's: the merge loop is a stage of its own)."""
    counts = _counts(pretokenizer)
    vocab, merges = reference.train([TEXT], MERGED, [SPECIAL])
    tokenizer = Tokenizer(vocab, merges, [SPECIAL], pretokenizer.pattern.name, engine="numba")
    if "encode" in stages:
        tokenizer.encode_array(TEXT, np.uint16)  # what an encode task of text calls
        documents = Documents.of(TEXT.split(SPECIAL))
        encode_utf8_documents(
            tokenizer, documents.data, documents.ends, [tokenizer.token_id(SPECIAL)], np.uint16
        )
        small = Encoder(list(range(256)), {}, pretokenizer.pattern.name, cache_entries=8)
        small.first_entries = 2  # its cache grows, then is swept where full at its largest (long texts)
        small.encode_texts([TEXT], Pretokenizer(pattern=pretokenizer.pattern))
    if "evaluate" in stages:
        histogram(tokenizer, *as_arrays(counts))  # what an evaluate task calls


def _counts(pretokenizer: Pretokenizer) -> pa.Table:
    """The warm-up text's counts, sorted by token as a shard is, without compiling anything."""
    return counts_table(pretokenizer.count(TEXT)).sort_by("token")
