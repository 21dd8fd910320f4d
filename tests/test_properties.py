"""Property tests (Hypothesis) of exactness: counting, planning cuts, training and encoding, each held
to the plain CS336 algorithm of ``bpe_dask.rules.reference`` over random text, special tokens, split
patterns, engines, chunk and block sizes and input formats.

The default ("ci") profile runs 200 examples per property (a quarter of that where an example costs
more); ``HYPOTHESIS_PROFILE=long`` runs 5,000 (profiles: tests/conftest.py).
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import dask
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe_dask
from bpe_dask.io.inputs import expand_inputs
from bpe_dask.io.plan import plan_ranges
from bpe_dask.rules import reference
from bpe_dask.rules.patterns import PATTERNS
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.stages.count import CountSettings, counts_compiled
from bpe_dask.stages.merge import merge_engine
from bpe_dask.tokenizer import uses_compiled

# --- what the properties draw -----------------------------------------------------------------------

# Pieces of text chosen for the pattern's edge cases: every character class, contractions (case
# matters to GPT-2's and not to GPT-4's), line ends alone and together, Unicode whitespace that is
# not ASCII, separators that are \s to `re` and not to `regex`, titlecase and modifier letters and
# combining marks (o200k's classes), a BOM (an ordinary "other" character: nothing strips it), and
# the halves of special tokens, so an occurrence can be split across a cut.
FRAGMENTS = [
    "a", "b", "Z", "é", "ß", "я", "日本", "👍", "👩‍👩‍👧", "e\u0301", "\u0301", "ǅ", "ʰ", "Ω",
    "7", "42", "12345", "٣",
    "'s", "'t", "'re", "'ll", "'ve", "'d", "'m", "'S", "'T", "'RE", "'", "''",
    " ", " ", "  ", "\n", "\r\n", "\r", "\n\n", "\r\r\n", "\t", "\u00a0", "\u3000", "\u2028", "\x0b",
    "\x1c", "\x1f", "\x85",
    "\ufeff", ".", ",!", "--", "/", "\x00", "<", "|", ">", "<|", "|>", "endoftext", "a|>", "x", "y",
]  # fmt: skip
RUNS = [
    "abcxyzAZéßяΩǅʰ",  # letters (cased, titlecase, modifier)
    "0123456789٣",  # digits
    ".,!?-/'\"<|>()#@\ufeff",  # other
    " \t\n\r\x0b\x0c\u00a0\u3000\x85",  # whitespace
]
# Special tokens that overlap each other (one holding another, one's end another's start), that hold
# whitespace or non-ASCII, or that are a single common character.
SPECIAL_CANDIDATES = [
    "<|endoftext|>", "<|endoftext|><|endoftext|>", "<|a|>", "x<|a|>", "<|a|>y", "<|end of text|>",
    "<|fin|é>", "\n\n", " ", "'s", "ab", "aa", "日本", "|>",
]  # fmt: skip
# None holds U+FFFD, which utf8_errors="replace" refuses in a special token.
SPECIAL_ALPHABET = "ab<|>x \n'é"
# Invalid UTF-8, each a way Python's "replace" decoding (one U+FFFD per maximal invalid subsequence) and
# a reader that decodes block by block could part.
INVALID = [
    b"\x80", b"\xff", b"\xfe",  # a stray continuation byte, bytes never valid
    b"\xe6\x97", b"\xf0\x9f\x91",  # sequences cut short
    b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",  # overlong, a surrogate, past U+10FFFF
]  # fmt: skip

ENGINES = ["python", "numba"]
BUILTIN = ["gpt2", "gpt4", "o200k", "superbpe", "superbpe-lines"]
# Patterns of one's own: cut only where a special token starts. The last leaves text out of every
# pre-token (newlines, and everything but lowercase ASCII), which must be left out alike everywhere.
CUSTOM = [r"\p{L}+|\p{N}{1,2}|\s+|[^\s\p{L}\p{N}]+", r"\w+|\s+|.", r"[a-z]+"]


def regex_of(pattern: str) -> str:
    return PATTERNS[pattern].regex if pattern in PATTERNS else pattern


def examples(fraction: float):
    """A share of the profile's examples, for properties that cost more per example."""
    return settings(max_examples=max(5, int(settings.default.max_examples * fraction)))


# Sets in which one token holds another, or one's end is another's start: where several match at
# one place the longest wins, and an occurrence may straddle another's start or a cut.
OVERLAPPING = [
    ["<|endoftext|>", "<|endoftext|><|endoftext|>"], ["<|a|>", "x<|a|>", "<|a|>y"], ["a", "ab", "b"],
    ["\n", "\n\n"], ["'s", "s"], ["aa", "a"], ["|>", "<|a|>"],
]  # fmt: skip
special_tokens = st.one_of(
    st.sampled_from(OVERLAPPING),
    st.lists(
        st.one_of(st.sampled_from(SPECIAL_CANDIDATES), st.text(SPECIAL_ALPHABET, min_size=1, max_size=4)),
        max_size=3,
        unique=True,
    ),
)
# Training publishes no files from train_bpe, but a special token spelt as one byte's GPT-2 name is
# refused there: keep to tokens of more than one character.
training_special_tokens = st.one_of(
    st.sampled_from([tokens for tokens in OVERLAPPING if all(len(t) > 1 for t in tokens)]),
    st.lists(st.sampled_from([t for t in SPECIAL_CANDIDATES if len(t) > 1]), max_size=2, unique=True),
)


def pieces(specials: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(FRAGMENTS),
        st.sampled_from(RUNS).flatmap(lambda run: st.text(run, min_size=1, max_size=10)),
        st.characters(codec="utf-8"),  # any character but a lone surrogate
        *([st.sampled_from(specials)] if specials else []),
    )


def texts(specials: list[str], max_pieces: int = 40, min_pieces: int = 0) -> st.SearchStrategy[str]:
    return st.lists(pieces(specials), min_size=min_pieces, max_size=max_pieces).map("".join)


@st.composite
def engine_and_pattern(draw, patterns=(*BUILTIN, *CUSTOM)) -> tuple[str, str]:
    engine = draw(st.sampled_from(ENGINES))
    # The compiled engine scans the built-in patterns only (and refuses others).
    return engine, draw(st.sampled_from([p for p in patterns if engine == "python" or p in BUILTIN]))


# The merge loop's limits (``train``'s min_frequency, max_token_length, max_words and forbid), as
# keyword arguments.
merge_limits = st.fixed_dictionaries(
    {
        "min_frequency": st.one_of(st.just(0), st.integers(1, 5)),
        "max_token_length": st.none() | st.integers(1, 8),
        "max_words": st.none() | st.integers(1, 3),
        "forbid": st.lists(st.sampled_from([": ", " a", "a", "\n\n", "日"]), max_size=2).map(tuple),
    }
)
chunk_sizes = st.one_of(st.integers(1, 64), st.integers(65, 2048), st.just(1 << 30))
block_sizes = st.one_of(st.integers(1, 64), st.sampled_from([1000, 1 << 16, 8 << 20]))


# --- helpers ------------------------------------------------------------------------------------------


def counts_of(table: pa.Table) -> dict[bytes, int]:
    return dict(zip(table.column("token").to_pylist(), table.column("count").to_pylist(), strict=True))


def write_records(path: Path, docs: list[str], fmt: str, row_group_size: int, ascii_json: bool) -> None:
    if fmt == "parquet":
        pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), path, row_group_size=row_group_size)
        return
    data = "".join(json.dumps({"text": d}, ensure_ascii=ascii_json) + "\n" for d in docs).encode()
    path.write_bytes(gzip.compress(data) if fmt == "jsonl.gz" else data)


# --- counting -----------------------------------------------------------------------------------------


@st.composite
def text_files(draw) -> tuple[list[str], list[str]]:
    specials = draw(special_tokens)
    return specials, draw(st.lists(texts(specials), min_size=1, max_size=2))


@st.composite
def one_text(draw) -> tuple[list[str], str]:
    specials = draw(special_tokens)
    return specials, draw(texts(specials, min_pieces=1))


@given(
    corpus=text_files(),
    how=engine_and_pattern(),
    chunk_size=chunk_sizes,
    block_size=block_sizes,
    compressed=st.booleans(),
)
def test_counting_text_files_equals_the_reference(corpus, how, chunk_size, block_size, compressed):
    """Each file is one text: its pre-tokens never cross a cut the planner or a task's blocks make."""
    specials, docs = corpus
    engine, pattern = how
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for n, doc in enumerate(docs):
            path = Path(folder, f"in{n}.txt.gz" if compressed else f"in{n}.txt")
            data = doc.encode("utf-8")
            path.write_bytes(gzip.compress(data) if compressed else data)
            paths.append(str(path))
        with dask.config.set({"bpe-dask.block-size": block_size}):
            result = bpe_dask.count_words(
                paths, specials, chunk_size=chunk_size, engine=engine, pattern=pattern, in_process=True
            )
        assert counts_of(result.table()) == reference.pretokenize(docs, specials, regex_of(pattern))


# Tokens alike in their first eight bytes, holding zero bytes, prefixes of one another: what a sort
# by the first eight bytes as a number must still put in the order of the bytes.
ALIKE = st.lists(st.sampled_from(["\x00", "\x01", "a", "b", "ab", "é", " ", "\n", "1", "'s"]), max_size=300)


@given(pieces=ALIKE, pattern=st.sampled_from(BUILTIN))
def test_a_compiled_counters_sorted_table_is_in_the_order_of_the_bytes(pieces, pattern):
    """A shard is sorted by token, as the reduce merges shards as sorted runs: the compiled counter
    sorts by each token's first eight bytes first, then by its bytes where those tie."""
    from bpe_dask.stages.counters import CompiledCounter, RegexCounter

    text = "".join(pieces)
    pretokenizer = Pretokenizer(pattern=pattern)
    compiled, regex = CompiledCounter(pretokenizer), RegexCounter(pretokenizer)
    compiled.add(text)
    regex.add(text)
    got = compiled.sorted_table()
    assert got.to_pylist() == regex.sorted_table().to_pylist()
    tokens = got.column("token").to_pylist()
    assert tokens == sorted(tokens)


@given(
    specials=special_tokens,
    data=st.data(),
    how=engine_and_pattern(BUILTIN),
    chunk_size=chunk_sizes,
    block_size=block_sizes,
    compressed=st.booleans(),
)
def test_counting_invalid_utf8_with_replace_equals_the_reference(
    specials, data, how, chunk_size, block_size, compressed
):
    """``utf8_errors="replace"``: the counts of the whole file decoded as Python decodes it (one U+FFFD
    for each maximal invalid sequence), however the file is cut."""
    engine, pattern = how
    parts = st.one_of(pieces(specials).map(lambda s: s.encode("utf-8")), st.sampled_from(INVALID))
    raw = b"".join(data.draw(st.lists(parts, max_size=40), label="parts"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "in.txt.gz" if compressed else "in.txt")
        path.write_bytes(gzip.compress(raw) if compressed else raw)
        with dask.config.set({"bpe-dask.block-size": block_size}):
            options = {"engine": engine, "pattern": pattern, "in_process": True, "utf8_errors": "replace"}
            result = bpe_dask.count_words(str(path), specials, chunk_size=chunk_size, **options)
    want = reference.pretokenize([raw.decode("utf-8", "replace")], specials, regex_of(pattern))
    assert counts_of(result.table()) == want


@st.composite
def documents(draw) -> tuple[list[str], list[str]]:
    specials = draw(special_tokens)
    return specials, draw(st.lists(texts(specials, max_pieces=12), max_size=12))


@given(
    corpus=documents(),
    fmt=st.sampled_from(["jsonl", "jsonl.gz", "parquet"]),
    how=engine_and_pattern(),
    chunk_size=chunk_sizes,
    block_size=block_sizes,
    row_group_size=st.integers(1, 5),
    ascii_json=st.booleans(),
)
def test_counting_records_counts_each_document_alone(
    corpus, fmt, how, chunk_size, block_size, row_group_size, ascii_json
):
    """JSON Lines and Parquet: each record's text is a document, counted as the reference counts it
    on its own, whatever the runs of lines or row groups a partition holds."""
    specials, docs = corpus
    engine, pattern = how
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, f"docs.{fmt}")
        write_records(path, docs, fmt, row_group_size, ascii_json)
        with dask.config.set({"bpe-dask.block-size": block_size}):
            result = bpe_dask.count_words(
                str(path), specials, chunk_size=chunk_size, engine=engine, pattern=pattern, in_process=True
            )
        assert counts_of(result.table()) == reference.pretokenize(docs, specials, regex_of(pattern))


@given(
    specials=special_tokens,
    data=st.data(),
    how=engine_and_pattern(),
    batch_size=st.integers(1, 5),
)
def test_count_from_iterator_counts_each_document_alone(specials, data, how, batch_size):
    """Documents from an iterable, as ``str`` or as UTF-8 ``bytes`` (invalid bytes read as U+FFFD
    with ``utf8_errors="replace"``), in batches of any size."""
    engine, pattern = how
    as_bytes = st.lists(
        st.one_of(pieces(specials).map(lambda s: s.encode()), st.sampled_from(INVALID)), max_size=12
    ).map(b"".join)
    docs = data.draw(st.lists(st.one_of(texts(specials, max_pieces=12), as_bytes), max_size=8), label="docs")
    result = bpe_dask.count_from_iterator(
        iter(docs), specials, pattern=pattern, batch_size=batch_size, engine=engine, utf8_errors="replace"
    )
    decoded = [d.decode("utf-8", "replace") if isinstance(d, bytes) else d for d in docs]
    assert counts_of(result.table()) == reference.pretokenize(decoded, specials, regex_of(pattern))


# --- planning cuts ------------------------------------------------------------------------------------


@given(
    corpus=one_text(),
    pattern=st.sampled_from([*BUILTIN, *CUSTOM]),
    chunk_size=st.one_of(st.integers(1, 64), st.integers(65, 1024)),
    lookahead=st.one_of(st.integers(1, 16), st.just(1 << 20)),
)
def test_planned_boundaries_are_safe_cuts(corpus, pattern, chunk_size, lookahead):
    """``plan_ranges`` tiles the file, cuts only between characters, and each range counted alone by
    the reference sums to the whole text's counts."""
    specials, text = corpus
    data = text.encode("utf-8")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "in.txt")
        path.write_bytes(data)
        ranges = plan_ranges(
            expand_inputs([str(path)]), chunk_size, Pretokenizer(specials, pattern), lookahead=lookahead
        )
    bounds = [r.start for r in ranges] + [ranges[-1].end]
    assert bounds[0] == 0 and bounds[-1] == len(data) and bounds == sorted(set(bounds))
    total: Counter[bytes] = Counter()
    for a, b in itertools.pairwise(bounds):
        # A strict decode: a cut inside a character fails here.
        total.update(reference.pretokenize([data[a:b].decode("utf-8")], specials, regex_of(pattern)))
    assert dict(total) == reference.pretokenize([text], specials, regex_of(pattern))


@given(
    specials=special_tokens,
    data=st.data(),
    pattern=st.sampled_from(BUILTIN),
    chunk_size=st.integers(1, 64),
)
def test_planned_boundaries_keep_invalid_utf8_whole(specials, data, pattern, chunk_size):
    """With invalid UTF-8, each range decoded alone with U+FFFD for invalid bytes counts, summed, as
    the whole file decoded at once: no cut splits an invalid sequence, or a character from one."""
    parts = st.one_of(pieces(specials).map(lambda s: s.encode("utf-8")), st.sampled_from(INVALID))
    raw = b"".join(data.draw(st.lists(parts, min_size=1, max_size=40), label="parts"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "in.txt")
        path.write_bytes(raw)
        ranges = plan_ranges(expand_inputs([str(path)]), chunk_size, Pretokenizer(specials, pattern))
    total: Counter[bytes] = Counter()
    for r in ranges:
        piece = raw[r.start : r.end].decode("utf-8", "replace")
        total.update(reference.pretokenize([piece], specials, regex_of(pattern)))
    assert dict(total) == reference.pretokenize([raw.decode("utf-8", "replace")], specials, regex_of(pattern))


@given(corpus=one_text(), pattern=st.sampled_from([*BUILTIN, *CUSTOM]), data=st.data())
def test_recut_pieces_are_safe_cuts(corpus, pattern, data):
    """``recut`` (how a task's blocks and the tokenizer's stream are cut, the stream's once ``least``
    characters are held) gives the text back in pieces that the reference counts, one by one, as the
    whole."""
    specials, text = corpus
    splits = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8), label="splits"))
    given_pieces = [text[a:b] for a, b in zip([0, *splits], [*splits, len(text)], strict=True)]
    least = data.draw(st.integers(0, 40), label="least")
    cut = list(Pretokenizer(specials, pattern).recut(given_pieces, least=least))
    assert "".join(cut) == text
    total: Counter[bytes] = Counter()
    for piece in cut:
        total.update(reference.pretokenize([piece], specials, regex_of(pattern)))
    assert dict(total) == reference.pretokenize([text], specials, regex_of(pattern))


# --- training -----------------------------------------------------------------------------------------


@st.composite
def training_corpus(draw) -> tuple[list[str], list[str]]:
    specials = draw(training_special_tokens)
    return specials, draw(st.lists(texts(specials, max_pieces=60), min_size=1, max_size=2))


@given(
    corpus=training_corpus(),
    how=engine_and_pattern(),
    chunk_size=chunk_sizes,
    merges=st.integers(0, 60),
    limits=merge_limits,
)
def test_train_bpe_equals_the_reference(corpus, how, chunk_size, merges, limits):
    """``train_bpe``: the reference's vocabulary (ids included) and merges, in order."""
    specials, docs = corpus
    engine, pattern = how
    vocab_size = 256 + len(specials) + merges
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for n, doc in enumerate(docs):
            Path(folder, f"in{n}.txt").write_bytes(doc.encode("utf-8"))
            paths.append(str(Path(folder, f"in{n}.txt")))
        options = {"chunk_size": chunk_size, "engine": engine, "pattern": pattern, "in_process": True}
        got = bpe_dask.train_bpe(paths, vocab_size, specials, **options, **limits)
    want = reference.train(docs, vocab_size, specials, regex_of(pattern), **limits)
    assert got[1] == want[1]
    assert got[0] == want[0]


# Special tokens no learned token can read the same as in vocab.json, which train_from_iterator writes.
ITERATOR_SPECIALS = st.one_of(
    st.just(["<|a|>", "x<|a|>", "<|a|>y"]),
    st.lists(st.sampled_from(["<|endoftext|>", "<|a|>", "<|pad|>"]), max_size=2, unique=True),
)


@examples(0.25)  # each example publishes a tokenizer directory (and draws its compression plot)
@given(
    specials=ITERATOR_SPECIALS,
    data=st.data(),
    how=engine_and_pattern(BUILTIN),
    merges=st.integers(0, 40),
    batch_size=st.integers(1, 4),
    limits=merge_limits,
)
def test_train_from_iterator_equals_the_reference(specials, data, how, merges, batch_size, limits):
    """``train_from_iterator``: the reference's merges and vocabulary over the documents, each alone."""
    engine, pattern = how
    docs = data.draw(st.lists(texts(specials, max_pieces=20), min_size=1, max_size=6), label="docs")
    vocab_size = 256 + len(specials) + merges
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "tokenizer")
        options = {"pattern": pattern, "batch_size": batch_size, "engine": engine}
        bpe_dask.train_from_iterator(iter(docs), vocab_size, out, specials, **options, **limits)
        got = bpe_dask.Tokenizer.load(out, engine="python")
    want = reference.train(docs, vocab_size, specials, regex_of(pattern), **limits)
    assert got.merges == want[1]
    assert got.vocab == want[0]


# --- encoding -----------------------------------------------------------------------------------------


@st.composite
def tokenizers(draw) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], list[str], str, str]:
    """A small vocabulary trained by the reference on random text, with its pattern and an engine."""
    specials = draw(training_special_tokens)
    engine, pattern = draw(engine_and_pattern())
    corpus = draw(st.lists(texts(specials, max_pieces=60), min_size=1, max_size=2))
    vocab_size = 256 + len(specials) + draw(st.integers(0, 80))
    vocab, merges = reference.train(corpus, vocab_size, specials, regex_of(pattern))
    return vocab, merges, specials, pattern, engine


@given(trained=tokenizers(), data=st.data())
def test_encode_equals_the_reference_and_decodes_back(trained, data):
    """``Tokenizer.encode`` gives the reference encoder's ids, ``encode_iterable`` of any split of the
    text the same, and ``decode`` gives the text back."""
    vocab, merges, specials, pattern, engine = trained
    text = data.draw(texts(specials), label="text")
    tokenizer = bpe_dask.Tokenizer(vocab, merges, specials, pattern, engine)
    want = reference.encode(text, vocab, merges, specials, regex_of(pattern))
    assert tokenizer.encode(text) == want
    splits = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6), label="splits"))
    split = [text[a:b] for a, b in zip([0, *splits], [*splits, len(text)], strict=True)]
    assert list(tokenizer.encode_iterable(split)) == want
    # Only a pattern whose pre-tokens cover all text gives every character back.
    if pattern != "[a-z]+":
        assert tokenizer.decode(want) == text


@pytest.mark.parametrize("engine", ENGINES)
def test_small_inputs_reach_the_engine_named(engine):
    """The properties' inputs are small: ``engine="numba"`` must still count, merge and encode them
    compiled (and ``"python"`` not), or the compiled engine would go untested."""
    compiled = engine == "numba"
    assert counts_compiled(CountSettings(engine=engine), 1) == compiled
    assert merge_engine(engine, 1) == engine
    tokenizer = bpe_dask.Tokenizer({i: bytes([i]) for i in range(256)}, [], [], "gpt2", engine)
    assert uses_compiled(tokenizer, 1) == compiled


# --- continued training ---------------------------------------------------------------------------


@examples(0.5)
@given(
    corpus=training_corpus(),
    data=st.data(),
    how=engine_and_pattern(),
    base_merges=st.integers(0, 40),
    merges=st.integers(0, 40),
    limits=merge_limits,
)
def test_the_merge_loop_from_a_base_equals_the_reference(corpus, data, how, base_merges, merges, limits):
    """The merge loop continued from a base (each word first split by the base's merges) learns the
    reference's merges, ids included, on either engine; and from a base the same corpus trained, it
    learns what training from the bytes to the same size learns."""
    from bpe_dask.rules.vocabulary import Vocabulary
    from bpe_dask.stages.merge import train_merges

    specials, docs = corpus
    engine, pattern = how
    same = data.draw(st.booleans(), label="base trained on the same corpus")
    base_docs = docs if same else data.draw(st.lists(texts(specials, max_pieces=60), min_size=1, max_size=2))
    base = reference.train(base_docs, 256 + len(specials) + base_merges, specials, regex_of(pattern))
    counts = reference.pretokenize(docs, specials, regex_of(pattern))
    vocab_size = len(base[0]) + merges
    want = reference.train_on_counts(counts, vocab_size, specials, base=base, **limits)
    got = train_merges(list(counts.items()), vocab_size, specials, engine=engine,
                       base=Vocabulary(*base, specials), **limits)  # fmt: skip
    assert got[1] == want[1]
    assert got[0] == want[0]
    assert got[1][: len(base[1])] == base[1]
    if same and not any(limits.values()) and len(base[0]) == 256 + len(specials) + base_merges:
        assert want == reference.train(docs, vocab_size, specials, regex_of(pattern))
