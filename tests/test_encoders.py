"""Every encoder held to the reference encoder (``bpe_dask.rules.reference.encode``): the Tokenizer's
Python and compiled engines, through each of its encoding methods, for every built-in pattern, on
multilingual text with special tokens, random text and the CS336 fixture texts. The reference itself
is held to tiktoken first."""

from __future__ import annotations

import functools
import random

import corpus
import pytest

from bpe_dask import Tokenizer, train_bpe
from bpe_dask.rules import reference
from bpe_dask.rules.patterns import split_pattern
from conftest import CS336_DIR

EOT = corpus.EOT
FIXTURE_TEXTS = ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en"]
# What GPT-4's and o200k's patterns tell apart besides the nasty alphabet: case changes inside words,
# upper-case contractions, marks, runs of digits, "/" after punctuation, line ends after punctuation.
PATTERN_ALPHABET = [*corpus.NASTY_ALPHABET, "A", "E", "'RE", "'ll", "x'rE", "123", "4567", "./", "\u0301",
                    "\u0903", "日本", "ǅ", "camelCase", ".\n", "a\r\n", EOT, EOT + EOT]  # fmt: skip


def random_text(seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choices(PATTERN_ALPHABET, k=3000))


TEXTS = {
    "multilingual": lambda: corpus.mixed_corpus(7, 12) + corpus.nasty_string(7, 2000) + EOT * 3,
    "random": lambda: random_text(1) + random_text(2),
    **{name: lambda name=name: (CS336_DIR / name).read_text(encoding="utf-8") for name in FIXTURE_TEXTS},
}

# GPT-2's own vocabulary (50,000 merges, ranks learned elsewhere), and one trained here per pattern
# with special tokens that overlap ("<|endoftext|><|endoftext|>" holds "<|endoftext|>").
VOCABULARIES = ["gpt2-openai", "gpt2", "gpt4", "o200k"]


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory) -> dict:
    training = tmp_path_factory.mktemp("encoders") / "train.txt"
    training.write_bytes((corpus.mixed_corpus(400, 40) + corpus.words_corpus(401, 2000)).encode())
    specials = [EOT, EOT + EOT]
    found = {"gpt2-openai": (*_gpt2_files(), [EOT], "gpt2")}
    for pattern in ("gpt2", "gpt4", "o200k"):
        vocab, merges = train_bpe(training, 256 + 2 + 400, specials, pattern=pattern)
        found[pattern] = (vocab, merges, specials, pattern)
    return found


@functools.cache
def _gpt2_files():
    gpt2 = Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt", [EOT])
    return gpt2.vocab, gpt2.merges


_expected: dict[tuple[str, str], list[int]] = {}


def expected(vocabularies: dict, vocabulary: str, text_name: str) -> list[int]:
    """The reference encoder's ids (computed once per vocabulary and text)."""
    key = (vocabulary, text_name)
    if key not in _expected:
        vocab, merges, specials, pattern = vocabularies[vocabulary]
        text = TEXTS[text_name]()
        _expected[key] = reference.encode(text, vocab, merges, specials, split_pattern(pattern).regex)
    return _expected[key]


def pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        n = rng.choice([1, 2, 3, 7, 50, 400])
        out.append(text[i : i + n])
        i += n
    return out


METHODS = {
    "encode": lambda tokenizer, text: tokenizer.encode(text),
    "encode_array": lambda tokenizer, text: tokenizer.encode_array(text).tolist(),
    "encode_batch": lambda tokenizer, text: tokenizer.encode_batch([text, "", text], num_threads=2)[2],
    "encode_batch_to_numpy": lambda tokenizer, text: (
        lambda ids, offsets: ids[offsets[2] : offsets[3]].tolist()
    )(*tokenizer.encode_batch_to_numpy([text, "", text], num_threads=2)),
    "encode_iterable": lambda tokenizer, text: list(tokenizer.encode_iterable(pieces(text, len(text)))),
}


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("text_name", list(TEXTS))
@pytest.mark.parametrize("vocabulary", VOCABULARIES)
@pytest.mark.parametrize("engine", ["python", "numba"])
def test_every_encoder_equals_the_reference_encoder(vocabularies, engine, vocabulary, text_name, method):
    if engine == "numba":
        pytest.importorskip("numba")
    vocab, merges, specials, pattern = vocabularies[vocabulary]
    tokenizer = Tokenizer(vocab, merges, specials, pattern, engine=engine)
    want = expected(vocabularies, vocabulary, text_name)
    assert METHODS[method](tokenizer, TEXTS[text_name]()) == want
    assert tokenizer.decode(want) == TEXTS[text_name]()


@pytest.mark.parametrize("name", ["german.txt", "tinystories_sample.txt", "corpus.en"])
def test_the_reference_encoder_equals_tiktoken_on_gpt2(name):
    tiktoken = pytest.importorskip("tiktoken")
    vocab, merges = _gpt2_files()
    special_id = {token: i for i, token in vocab.items()}[EOT.encode()]
    ranks = {token: i for i, token in vocab.items() if i != special_id}  # GPT-2's ids are its ranks
    encoding = tiktoken.Encoding("gpt2-from-fixtures", pat_str=split_pattern("gpt2").regex,
                                 mergeable_ranks=ranks, special_tokens={EOT: special_id})  # fmt: skip
    text = (CS336_DIR / name).read_text(encoding="utf-8")
    assert reference.encode(text, vocab, merges, [EOT]) == encoding.encode(text, allowed_special="all")


def test_the_reference_encoder_splits_special_tokens_longest_first():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"<s>", 257: b"<s><s>", 258: b"\n"}
    ids = reference.encode("a<s><s><s>\n", vocab, [], ["<s>", "<s><s>", "\n"])
    assert ids == [97, 257, 256, 258]  # a special token "\n" is its own id, not byte 10


@pytest.mark.parametrize(("first", "most"), [(16, 1024), (1 << 12, 1 << 19)])
def test_the_compiled_encoder_keeps_apart_words_alike_in_their_first_eight_bytes_and_length(
    monkeypatch, first, most
):
    """The encoder's cache finds a word by its first eight bytes (zeros after a shorter word), length
    and hash, then its bytes: runs of NUL bytes all have the key 0, and long words alike in both
    differ only past their eighth byte; in a cache that grows and is emptied, and in one that grows."""
    from bpe_dask.compiled import Encoder

    monkeypatch.setattr(Encoder, "first_entries", first)
    monkeypatch.setattr(Encoder, "cache_entries", most)
    rng = random.Random(0)
    words = [
        *("\x00" * rng.randint(1, 20) for _ in range(300)),  # one key (0), many lengths
        *("abcdefgh" + "".join(rng.choices("xyz", k=4)) for _ in range(300)),  # one key, one length
        *(" abcdefg" + "".join(rng.choices("xyz", k=rng.randint(0, 3))) for _ in range(300)),
        *(" " + "".join(rng.choices("the cat sat", k=rng.randint(1, 12))) for _ in range(300)),
    ]
    text = " ".join(rng.sample(words, len(words)) * 2)
    vocab, merges = _gpt2_files()
    tokenizer = Tokenizer(vocab, merges, [EOT], "gpt2", engine="numba")
    want = reference.encode(text, vocab, merges, [EOT])
    assert tokenizer.encode(text) == want
    assert tokenizer.encode_batch([text, text], num_threads=2) == [want, want]


def test_a_cache_size_that_is_no_power_of_two_is_rounded_up(monkeypatch):
    """The cache's table finds a slot by a mask, which reaches every slot only in a table of a power
    of two: 200 slots would give 32 reachable ones, and the encoder would search them for ever."""
    from bpe_dask.compiled import Encoder
    from bpe_dask.compiled.word_table import RECORD, table

    assert len(table(200)) == 256 * RECORD and len(table(1)) == RECORD
    monkeypatch.setattr(Encoder, "first_entries", 24)
    monkeypatch.setattr(Encoder, "cache_entries", 100)
    vocab, merges = _gpt2_files()
    text = " ".join(f"w{i}" for i in range(600))
    tokenizer = Tokenizer(vocab, merges, [EOT], "gpt2", engine="numba")
    assert tokenizer.encode(text) == reference.encode(text, vocab, merges, [EOT])


def test_the_compiled_engines_lists_share_one_int_per_id():
    """``encode`` and ``encode_batch`` give lists of the encoder's own ints, not an int made per token:
    8 bytes a token rather than 40, and less time under the GIL."""
    vocab, merges = _gpt2_files()
    tokenizer = Tokenizer(vocab, merges, [EOT], "gpt2", engine="numba")
    text = "a tokenizer encodes a tokenizer" + EOT
    ids, (batched,) = tokenizer.encode(text), tokenizer.encode_batch([text])
    assert ids == batched == reference.encode(text, vocab, merges, [EOT])
    assert max(ids) > 256  # Python shares its small ints (to 256) itself
    assert all(a is b for a, b in zip(ids, batched, strict=True))
    first = {}
    assert all(first.setdefault(i, i) is i for i in ids)  # " tokenizer"'s ids, twice


def test_a_full_cache_keeps_the_words_found_again(monkeypatch):
    """A cache full at its largest keeps only the pre-tokens found again since they were cached: the
    words that recur keep their ids (several for most here, and bytes past the eighth) through each
    such sweep, and the words met once make room."""
    from bpe_dask.compiled import Encoder, encoder

    monkeypatch.setattr(Encoder, "first_entries", 16)
    monkeypatch.setattr(Encoder, "cache_entries", 256)
    sweeps = []
    keep_found = encoder.keep_found

    def counted(records, arena, ids_arena, used, *kept):
        keep_found(records, arena, ids_arena, used, *kept)
        sweeps.append(int(used[2]))

    monkeypatch.setattr(encoder, "keep_found", counted)
    rng = random.Random(0)
    recurring = [" tokenizationally", " zqxjkv", " encodings", " Übersetzung", " 東京タワー", " a"]
    once = [" " + "".join(rng.choices("bcdfghjklmnpqrstvwxz", k=rng.randint(3, 14))) for _ in range(3000)]
    text = "".join(word + "".join(rng.choices(recurring, k=2)) for word in once)
    vocab, merges = _gpt2_files()
    tokenizer = Tokenizer(vocab, merges, [EOT], "gpt2", engine="numba")
    assert tokenizer.encode(text) == reference.encode(text, vocab, merges, [EOT])
    assert len(sweeps) > 5 and all(0 < kept <= 3 * 256 // 4 for kept in sweeps), sweeps
    # Each kept word is found again where it was kept, not cached a second time.
    from bpe_dask.compiled.word_table import KEY, META, RECORD

    ((records, *_),) = tokenizer._compiled._idle
    held = records.reshape(-1, RECORD)[records[META::RECORD] != 0]
    assert len({(key, meta) for key, meta in held[:, [KEY, META]].tolist()}) == len(held)


def test_a_full_cache_whose_words_all_recur_is_emptied(monkeypatch):
    """Where the pre-tokens found again would fill more than three quarters of a cache full at its
    largest, keeping them would leave too little room: the cache is emptied instead, and encodes on
    from nothing, exactly."""
    from bpe_dask.compiled import Encoder, encoder

    monkeypatch.setattr(Encoder, "first_entries", 16)
    monkeypatch.setattr(Encoder, "cache_entries", 16)
    sweeps = []
    keep_found = encoder.keep_found

    def counted(records, arena, ids_arena, used, *kept):
        keep_found(records, arena, ids_arena, used, *kept)
        sweeps.append(int(used[2]))

    monkeypatch.setattr(encoder, "keep_found", counted)
    recurring = [f" word{i}ation" for i in range(14)]  # 14 of 16: past three quarters
    text = "".join(w + f" once{i}x" for i in range(300) for w in recurring[:: 1 if i % 2 else -1])
    vocab, merges = _gpt2_files()
    tokenizer = Tokenizer(vocab, merges, [EOT], "gpt2", engine="numba")
    assert tokenizer.encode(text) == reference.encode(text, vocab, merges, [EOT])
    assert len(sweeps) > 5 and all(kept > 3 * 16 // 4 for kept in sweeps), sweeps
    from bpe_dask.compiled.word_table import META, RECORD

    ((records, _, _, used, _),) = tokenizer._compiled._idle
    assert used[2] == int((records[META::RECORD] != 0).sum()) < 16  # what it holds, counted as it holds it
