"""Warming numba's cache: built-in split patterns in, every compiled loop a job may run compiled into
numba's cache (or loaded from it) out, with numba's account of which (``compiled.cache.CacheUse``).

Runs each stage's compiled path once on a few hundred bytes, through the very calls the stages make, so
with the argument types numba compiles for: counting text and documents (the counter grown past its
first size too), summing sorted count runs as the reduce does, the merge loop (its rarely taken
regrowths too), encoding text and documents, and tallying the ids of counted words (an evaluate task).
What a job compiles depends on its pattern (its counting and encoding loops) and nothing else, so a
process, or a worker image, that ran this for a job's pattern runs the job on machine code loaded from
the cache (on this project's machine, about a second for what took 17-22 s to compile for gpt2). Where
numba keeps it, and what an entry must match to serve: ``compiled.cache``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from bpe_dask.compiled import Counter, train_merges
from bpe_dask.compiled import warm_up as warm_up_merge_loop
from bpe_dask.compiled.cache import CacheUse, cache_use
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import as_arrays
from bpe_dask.io.records import Documents
from bpe_dask.rules.patterns import split_pattern
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.stages.counters import CompiledCounter
from bpe_dask.stages.merge import initial_vocab, laid_out
from bpe_dask.stages.reduce import sum_sorted
from bpe_dask.tokenizer import Tokenizer

SPECIAL = "<|endoftext|>"
# A little of everything the scanners tell apart: letters, contractions, digits, punctuation, runs
# of spaces and newlines, accents, CJK, an emoji, and a special token.
TEXT = (
    "Once upon a time, it's said, 12345 cats   didn't STOP.\n\n  Café naïve — 東京 🙂 x=1;"
    f"{SPECIAL}She'll say: \"hello\" again\t\r\n" * 8
)


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
                f"only the built-in patterns are compiled (gpt2, gpt4, o200k), not {name}: a pattern of "
                "your own runs in the regex module, with nothing to compile"
            )
        if pattern.name not in found:
            found.append(pattern.name)
    return found


def warm_up(patterns: Iterable[str] = ("gpt2",)) -> CacheUse:
    """Run every compiled loop a job with one of ``patterns`` may run, so numba compiles each into its
    cache, or loads it from there; gives numba's account of which it did."""
    names = builtin_patterns(patterns)
    started = time.perf_counter()
    tables = []
    for name in names:
        pretokenizer = Pretokenizer([SPECIAL], name)
        counter = CompiledCounter(pretokenizer)  # what a map task counts with
        counter.add(TEXT)
        counter.add_documents(Documents.of(TEXT.split(SPECIAL)))
        grown = Counter(name, capacity=4)  # its arrays grow and its table is hashed again
        data = TEXT.encode("utf-8")
        grown.add(data, pretokenizer.piece_bounds(data))
        table = counter.table().sort_by("token")  # a shard is sorted by token
        tables.append(table)
        size = 256 + 1 + 40  # as merge.py lays out and merges a table:
        vocab, merges = train_merges(laid_out(table, size, "numba"), initial_vocab([SPECIAL]), size)
        tokenizer = Tokenizer(vocab, merges, [SPECIAL], name, engine="numba")
        tokenizer.encode_array(TEXT, np.uint16)  # what an encode task of text calls
        documents = Documents.of(TEXT.split(SPECIAL))
        tokenizer.encode_utf8_documents(documents.data, documents.ends, SPECIAL, np.uint16)  # of records
        tokenizer.pretoken_histogram(*as_arrays(table))  # what an evaluate task calls
    sum_sorted(tables + tables)  # what a reduce task calls: sorted runs, two and more
    warm_up_merge_loop()  # the merge loop's regrowths, which a small table never needs
    return cache_use(time.perf_counter() - started)
