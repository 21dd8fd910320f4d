"""The compiled core (numba): each task of the pipeline as one loop, at machine speed.

What the rest of the package uses, for the built-in split patterns (``gpt2``, ``gpt4``, ``o200k``,
``superbpe``): ``Counter`` counts pre-tokens, ``Encoder`` encodes text, documents and batches of texts,
``learn_merges`` runs the merge loop (on ``Words``, the words laid out as its records;
``learn_merges_long`` on ``LongWords``, long words with their positions linked), and
``sum_sorted`` sums sorted count tables; each computes what a rule in ``bpe_dask.rules`` states, and
gives flat arrays that the callers turn into Arrow tables. ``compile_merge_loop`` compiles the merge
loop ahead of need. ``table_of`` (with ``pattern_number``) gives the table a pattern's scanner
reads, for the tests. Every compiled function of the package compiles once per machine
(``compile_once``): processes that share numba's cache take turns.
"""

from __future__ import annotations

from bpe_dask.compiled.cache import functions
from bpe_dask.compiled.compile_once import share_compiles
from bpe_dask.compiled.count import Counter
from bpe_dask.compiled.encoder import Encoder
from bpe_dask.compiled.merge_loop import compile_merge_loop, learn_merges
from bpe_dask.compiled.merge_positions import LongWords, learn_merges_long
from bpe_dask.compiled.scan import pattern_number, table_of
from bpe_dask.compiled.sum_sorted import sum_sorted
from bpe_dask.compiled.word_records import Words

share_compiles(functions().values())

__all__ = [
    "Counter",
    "Encoder",
    "LongWords",
    "Words",
    "compile_merge_loop",
    "learn_merges",
    "learn_merges_long",
    "pattern_number",
    "sum_sorted",
    "table_of",
]
