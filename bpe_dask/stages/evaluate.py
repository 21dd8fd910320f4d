"""Evaluating (the map stage of ``bpe-dask evaluate``): one part and tokenizers in, how many tokens
the part is under each of them out; no ids are kept.

Takes a part of any source (``sources.part``), what to measure (``Measure``: tokenizers that share
one split pattern and one set of special tokens, ``CountSettings``, each at one or more vocabulary
sizes) and the job's store; reads and counts the part's pre-tokens once, as counting does
(``count.count_part``). Then, for each tokenizer, it merges each distinct pre-token once and
tallies the ids it makes times its count (``tokenizer.histogram``),
and adds one token per special token. That is exactly ``len(Tokenizer.encode(text))``, because
encoding merges every pre-token on its own.

A smaller vocabulary of the same tokenizer costs no second merging when its merges nest (each joins
bytes or tokens that earlier merges made, and no two make the same token; ``nested``), as trained
ones do: merging applies merges in the order learned, so stopping at the first ``m`` merges leaves
what the whole encoding holds with each token of a later merge split back into the two it joined,
and those into theirs. So the tally of ids at the full size times ``pieces_at(size)`` (into how many
ids of that size each id splits) is the token count at that size: a dot product per size.

>>> from bpe_dask.io.inputs import InputFile
>>> from bpe_dask.io.plan import ByteRange
>>> from bpe_dask.tokenizer import Tokenizer
>>> _ = open("held-out.txt", "w").write("hi hi<|endoftext|>hi!")
>>> from bpe_dask.sources.files import FilePart
>>> part = FilePart(ByteRange(InputFile("held-out.txt", 21, "v1"), 0, 21))
>>> vocab = {**{i: bytes([i]) for i in range(256)}, 257: b"hi"}
>>> bytes_only = Tokenizer(vocab, [], ["<|endoftext|>"])
>>> merged = Tokenizer(vocab, [(b"h", b"i")], ["<|endoftext|>"])
>>> measure_part(part, [Measure(bytes_only), Measure(merged)], CountSettings(("<|endoftext|>",)))
Measured(text_bytes=21, documents=0, tokens=(9, 6), bad_records=BadRecords(count=0, first=None))
>>> len(merged.encode("hi hi<|endoftext|>hi!"))
6
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bpe_dask.io.counts_table import as_arrays
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.sources.part import Part, read_bytes
from bpe_dask.stages.count import CountSettings, Seen, count_part
from bpe_dask.stages.read_events import reporter
from bpe_dask.tokenizer import Tokenizer, histogram


@dataclass(frozen=True)
class Measure:
    """A tokenizer to measure at one or more vocabulary sizes: for each, into how many ids of that
    size each of its ids splits (``pieces_at``), or ``None`` for the tokenizer whole."""

    tokenizer: Tokenizer
    pieces: tuple[np.ndarray | None, ...] = (None,)


def nested(tokenizer: Tokenizer) -> bool:
    """Whether each merge joins bytes or tokens that earlier merges made, and no two merges make the
    same token: then the tokenizer cut to a size encodes as the whole one with every token of a
    later merge split back (``pieces_at``). Trained tokenizers' merges nest.

    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi", 257: b"hi!"}
    >>> nested(Tokenizer(vocab, [(b"h", b"i"), (b"hi", b"!")])), nested(Tokenizer(vocab, [(b"hi", b"!")]))
    (True, False)
    """
    made: set[bytes] = set()
    for a, b in tokenizer.merges:
        if any(len(part) > 1 and part not in made for part in (a, b)) or a + b in made:
            return False
        made.add(a + b)
    return made <= set(tokenizer.vocab.values())


def pieces_at(tokenizer: Tokenizer, vocab_size: int) -> np.ndarray:
    """For each id of a ``nested`` tokenizer, how many ids the tokenizer cut to ``vocab_size`` encodes
    its bytes to: 1 for the bytes and the first merges' tokens, and a later merge's token the sum
    of the two it joined.

    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi", 257: b"hi!"}
    >>> pieces_at(Tokenizer(vocab, [(b"h", b"i"), (b"hi", b"!")]), 257)[[104, 256, 257]].tolist()
    [1, 1, 2]
    """
    kept = vocab_size - tokenizer.vocabulary.first_size
    pieces = np.ones(max(tokenizer.vocab) + 1, np.int64)
    token_id = tokenizer.token_id
    for a, b in tokenizer.merges[kept:]:  # in the order learned: what a merge joins is done before it
        pieces[token_id(a + b)] = pieces[token_id(a)] + pieces[token_id(b)]
    return pieces


@dataclass(frozen=True)
class Measured:
    """A partition's UTF-8 text bytes, its documents (records; 0 for text files) and its tokens under
    each measure at each of its sizes, in the order given."""

    text_bytes: int
    documents: int
    tokens: tuple[int, ...]
    bad_records: BadRecords = field(default_factory=BadRecords)
    read_bytes: int = field(default=0, repr=False)  # the bytes read of an input of no known size, else 0


def measure_part(
    part: Part, measures: Sequence[Measure], settings: CountSettings, store: Store = LOCAL
) -> Measured:
    """The tokens of one part under each of ``measures``, whose tokenizers' split pattern and
    special tokens are ``settings``'; a failure that may be transient is retried in place."""
    return store.retries.run(_measure_part, part, measures, settings, store)


def _measure_part(part: Part, measures: Sequence[Measure], settings: CountSettings, store: Store) -> Measured:
    bad, seen = BadRecords(), Seen()
    progress = reporter(store, part.size or 0)  # how far the reading has got, to the client
    counter = count_part(part, settings, store, bad=bad, progress=progress, seen=seen)
    data, offsets, counts = as_arrays(counter.table())
    specials = counter.specials.count
    tokens = []
    for measure in measures:
        tally = histogram(measure.tokenizer, data, offsets, counts)
        tokens += [int(tally.sum() if p is None else tally @ p) + specials for p in measure.pieces]
    documents = seen.documents if part.stand_alone else 0
    return Measured(seen.text_bytes, documents, tuple(tokens), bad, read_bytes(part, progress.read))
