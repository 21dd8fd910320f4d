"""bpe-dask: exact byte-level BPE training (GPT-2 / CS336 rules) and encoding as Dask jobs.

    from bpe_dask import Tokenizer, train_bpe
    vocab, merges = train_bpe("corpus.txt", 10_000, ["<|endoftext|>"])
    ids = Tokenizer(vocab, merges, ["<|endoftext|>"]).encode("Hello world")

The jobs, each also a command of the ``bpe-dask`` CLI: ``train`` (count, merge, write a tokenizer
directory), ``count_words`` and ``merge`` (the two halves of ``train``), ``encode`` (a corpus to
token ids), ``evaluate`` (how well tokenizers compress held-out text). They take inputs as a path,
URL or glob, or a list of them, then keyword options (``JobOptions``); ``train`` and ``count_words``
also take text in memory (a ``pyarrow`` Table, a Hugging Face dataset), and ``train_from_iterator``
and ``count_from_iterator`` the documents a Python iterable gives. ``reference`` holds the
plain trainer every engine is tested against.
"""

from __future__ import annotations

import importlib

from bpe_dask.version import __version__

TYPE_CHECKING = False  # as ``typing.TYPE_CHECKING``, whose import alone would take a tenth of the start
if TYPE_CHECKING:
    from bpe_dask.errors import BpeDaskError
    from bpe_dask.jobs.count import CountResult, count_from_iterator, count_words
    from bpe_dask.jobs.encode import encode
    from bpe_dask.jobs.evaluate import evaluate
    from bpe_dask.jobs.options import JobOptions
    from bpe_dask.jobs.train import merge, train, train_bpe, train_from_iterator
    from bpe_dask.tokenizer import Tokenizer

# Each name of the API and its module, imported on first use: ``import bpe_dask`` itself loads none of
# Dask, Arrow or numba (seconds), so that the ``bpe-dask`` command answers a signal from its first line
# (``__main__``), and ``bpe_dask.Tokenizer`` costs what the tokenizer needs.
_HOMES = {
    "BpeDaskError": "bpe_dask.errors",
    "CountResult": "bpe_dask.jobs.count",
    "JobOptions": "bpe_dask.jobs.options",
    "Tokenizer": "bpe_dask.tokenizer",
    "count_from_iterator": "bpe_dask.jobs.count",
    "count_words": "bpe_dask.jobs.count",
    "encode": "bpe_dask.jobs.encode",
    "evaluate": "bpe_dask.jobs.evaluate",
    "merge": "bpe_dask.jobs.train",
    "train": "bpe_dask.jobs.train",
    "train_bpe": "bpe_dask.jobs.train",
    "train_from_iterator": "bpe_dask.jobs.train",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'bpe_dask' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # once: the next look-up is a plain one
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "BpeDaskError",
    "CountResult",
    "JobOptions",
    "Tokenizer",
    "__version__",
    "count_from_iterator",
    "count_words",
    "encode",
    "evaluate",
    "merge",
    "train",
    "train_bpe",
    "train_from_iterator",
]
