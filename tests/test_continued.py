"""Continued training (issue 42): a base tokenizer extended with merges learned on a corpus, every id
it had kept, held to the reference trainer started from the same base (``rules.reference``)."""

from __future__ import annotations

import corpus
import pytest

from bpe_dask import Tokenizer
from bpe_dask.rules import reference
from bpe_dask.stages.merge import train_merges
from conftest import CS336_DIR

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    """GPT-2's own vocabulary and merges: its bytes at ids 0-255 in an order of their own, 50,000
    merges, <|endoftext|> at 50,256."""
    return Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt", [EOT])


@pytest.fixture(scope="module")
def multilingual() -> dict[bytes, int]:
    """The pre-token counts of text GPT-2 never saw much of: German, mixed scripts, odd words."""
    text = (CS336_DIR / "german.txt").read_text(encoding="utf-8") + corpus.mixed_corpus(7, 600)
    return reference.pretokenize([text], [EOT])


@pytest.mark.parametrize("engine", ["python", "numba"])
def test_gpt2_extended_keeps_every_id_and_learns_the_references_merges(gpt2, multilingual, engine):
    more = 300
    base = (gpt2.vocab, gpt2.merges)
    want = reference.train_on_counts(multilingual, len(gpt2.vocab) + more, [EOT], base=base)
    vocab, merges = train_merges(
        list(multilingual.items()), len(gpt2.vocab) + more, [EOT], engine=engine, base=gpt2.vocabulary
    )
    assert merges == want[1] and vocab == want[0]
    assert merges[:50_000] == gpt2.merges and len(merges) == 50_000 + more
    assert all(vocab[i] == token for i, token in gpt2.vocab.items())  # every id, <|endoftext|>'s included
    assert sorted(set(vocab) - set(gpt2.vocab)) == list(range(50_257, 50_257 + more))
