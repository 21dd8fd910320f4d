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

from bpe_dask.errors import BpeDaskError
from bpe_dask.jobs.count import CountResult, count_from_iterator, count_words
from bpe_dask.jobs.encode import encode
from bpe_dask.jobs.evaluate import evaluate
from bpe_dask.jobs.options import JobOptions
from bpe_dask.jobs.train import merge, train, train_bpe, train_from_iterator
from bpe_dask.tokenizer import Tokenizer
from bpe_dask.version import __version__

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
