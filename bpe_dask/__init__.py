"""bpe-dask: exact byte-level BPE training (GPT-2 / CS336 rules) as a Dask job.

from bpe_dask import Tokenizer, train_bpe
vocab, merges = train_bpe("corpus.txt", 10_000, ["<|endoftext|>"])
ids = Tokenizer(vocab, merges, ["<|endoftext|>"]).encode("Hello world")
"""

__version__ = "0.1.0"

from .errors import BpeDaskError
from .pipeline import count_words, train, train_bpe
from .tokenizer import Tokenizer

__all__ = ["BpeDaskError", "Tokenizer", "__version__", "count_words", "train", "train_bpe"]
