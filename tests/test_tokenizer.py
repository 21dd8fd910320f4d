"""The tokenizer: parity with tiktoken's GPT-2 and with Hugging Face on our own vocabularies."""

from __future__ import annotations

import io
import json
import random
import re

import corpus
import pytest

from bpe_dask import Tokenizer, train_bpe
from bpe_dask.io import tokenizer_formats
from bpe_dask.tokenizer import COMPILED_MIN_CHARS, LOADED_MIN_CHARS, uses_compiled
from conftest import CS336_DIR

EOT = "<|endoftext|>"
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TEXTS = ["address.txt", "german.txt", "tinystories_sample.txt", "corpus.en"]


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt", [EOT])


@pytest.fixture(scope="module")
def tiktoken_gpt2():
    """tiktoken's GPT-2 encoding built from the fixture files: tiktoken would download its own."""
    tiktoken = pytest.importorskip("tiktoken")
    decoder = {c: b for b, c in tokenizer_formats.bytes_to_unicode().items()}
    vocab = json.loads((CS336_DIR / "gpt2_vocab.json").read_text(encoding="utf-8"))
    # GPT-2's ids are its BPE ranks: bytes first, then one per merge in order (tiktoken checks this).
    ranks = {bytes(decoder[c] for c in token): i for token, i in vocab.items() if token != EOT}
    return tiktoken.Encoding("gpt2-from-fixtures", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={EOT: vocab[EOT]})  # fmt: skip


def multilingual_text(seed: int) -> str:
    return corpus.mixed_corpus(seed, 12) + corpus.nasty_string(seed, 3000)


@pytest.mark.parametrize("name", TEXTS)
def test_gpt2_encoding_equals_tiktoken_on_the_fixture_texts(gpt2, tiktoken_gpt2, name):
    text = (CS336_DIR / name).read_text(encoding="utf-8")
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special={EOT})
    assert gpt2.decode(ids) == text


@pytest.mark.parametrize("seed", range(6))
def test_gpt2_encoding_equals_tiktoken_on_generated_multilingual_text(gpt2, tiktoken_gpt2, seed):
    text = multilingual_text(seed)
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special={EOT})
    assert gpt2.decode(ids) == text


@pytest.mark.parametrize("seed", range(6))
def test_encode_iterable_equals_encoding_the_whole_text(gpt2, seed):
    rng = random.Random(seed)
    text = multilingual_text(seed) + "a\n  b\n\n\n  \n c " + EOT + " \n" + EOT + EOT + "\r\n\t x"
    chunks, i = [], 0
    while i < len(text):
        n = rng.choice([1, 2, 3, 7, 50, 400])
        chunks.append(text[i : i + n])
        i += n
    want = gpt2.encode(text)
    assert list(gpt2.encode_iterable(chunks)) == want
    assert list(gpt2.encode_iterable(io.StringIO(text, newline=""))) == want  # a file's lines


def test_encode_iterable_reads_a_bounded_stretch_ahead(gpt2):
    read = 0

    def lines():  # 16 MB in all
        nonlocal read
        for i in range(1_000_000):
            line = f"line {i:09d}\n"
            read += len(line)
            yield line

    ids = gpt2.encode_iterable(lines())
    assert gpt2.decode([next(ids)]) == "line"
    assert read <= COMPILED_MIN_CHARS + 64  # a batch and the line after it, not the input


def test_overlapping_special_tokens_match_longest_first(gpt2):
    double = EOT + EOT
    tokenizer = Tokenizer(gpt2.vocab, [], [EOT, double])
    ids = tokenizer.encode(f"Hello{EOT}{EOT}world{EOT}")
    double_id = tokenizer.token_id(double)
    assert double_id == 50257  # missing from the vocabulary: appended after its last id
    assert ids.count(double_id) == 1 and ids.count(tokenizer.token_id(EOT)) == 1
    assert tokenizer.decode(ids) == f"Hello{EOT}{EOT}world{EOT}"


def test_without_special_tokens_their_text_is_ordinary_text(gpt2):
    plain = Tokenizer(gpt2.vocab, [], None)
    assert 50256 not in plain.encode(f"a{EOT}b")


def test_malformed_bytes_decode_to_the_replacement_character(gpt2):
    ids = gpt2.encode("é")
    assert len(ids) == 1
    lone_lead_byte = gpt2.token_id(b"\xc3")
    assert gpt2.decode([lone_lead_byte, *gpt2.encode("x")]) == "\ufffdx"


@pytest.mark.parametrize("seed", range(3))
def test_a_trained_vocabulary_encodes_like_hugging_face_loading_our_tokenizer_json(tmp_path, seed):
    tokenizers = pytest.importorskip("tokenizers")
    training = tmp_path / "train.txt"
    training.write_bytes(corpus.mixed_corpus(100 + seed, 40).encode())
    vocab, merges = train_bpe(training, 256 + 1 + 300, [EOT])
    Tokenizer(vocab, merges, [EOT]).save(tmp_path / "tok")
    tmp_path = tmp_path / "tok"
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ours = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [EOT])
    assert ours.vocab == Tokenizer(vocab, merges, [EOT]).vocab
    text = multilingual_text(200 + seed)
    assert ours.encode(text) == theirs.encode(text).ids
    assert ours.decode(ours.encode(text)) == text


def test_a_non_ascii_special_token_keeps_its_trained_id_through_the_files(tmp_path):
    special = "<|fin|é>"  # every character is also a byte name in vocab.json's GPT-2 form
    training = tmp_path / "train.txt"
    training.write_bytes(corpus.multi_special_corpus(7, 20, [special]).encode())
    vocab, merges = train_bpe(training, 256 + 1 + 50, [special])
    Tokenizer(vocab, merges, [special]).save(tmp_path / "tok")
    tmp_path = tmp_path / "tok"
    loaded = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [special])
    assert loaded.vocab == vocab
    assert loaded.encode(f"a{special}b")[1] == 256


def test_a_special_token_that_is_also_a_byte_keeps_its_own_id(tmp_path):
    text = "one\ntwo<|eot|>three\nfour<|eot|>" * 50
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    vocab, merges = train_bpe(tmp_path / "in.txt", 256 + 2 + 20, ["\n", "<|eot|>"])
    tokenizer = Tokenizer(vocab, merges, ["\n", "<|eot|>"])
    assert tokenizer.encode("a\nb<|eot|>") == [97, 256, 98, 257]
    assert tokenizer.token_id(b"\n") == 10 and tokenizer.token_id("\n") == 256
    tokenizer.save(tmp_path / "tok")
    written = json.loads((tmp_path / "tok" / "vocab.json").read_text(encoding="utf-8"))
    assert written["\n"] == 256 and written["Ċ"] == 10  # the byte keeps its GPT-2 name
    assert Tokenizer.load(tmp_path / "tok").encode("a\nb<|eot|>") == [97, 256, 98, 257]


def test_special_tokens_given_as_one_string_are_refused_everywhere(tmp_path):
    from bpe_dask import BpeDaskError

    vocab = {i: bytes([i]) for i in range(256)}
    Tokenizer(vocab, [], []).save(tmp_path / "tok")
    with pytest.raises(BpeDaskError, match="list of strings, not one string"):
        Tokenizer.from_files(tmp_path / "tok" / "vocab.json", tmp_path / "tok" / "merges.txt", "<eot>")
    with pytest.raises(BpeDaskError, match="list of strings, not one string"):
        Tokenizer.load(tmp_path / "tok", "<eot>")


def test_save_replaces_a_saved_tokenizer_but_not_other_files(tmp_path):
    from bpe_dask import BpeDaskError

    vocab = {i: bytes([i]) for i in range(256)}
    Tokenizer(vocab, [], ["<a>"]).save(tmp_path / "tok")
    Tokenizer(vocab, [], ["<b>"]).save(tmp_path / "tok")  # a tokenizer saved there before is replaced
    assert Tokenizer.load(tmp_path / "tok").special_tokens == ["<b>"]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("keep me")
    with pytest.raises(BpeDaskError, match="holds other files"):
        Tokenizer(vocab, [], []).save(tmp_path / "notes")
    assert (tmp_path / "notes" / "notes.txt").read_text() == "keep me"


# --- split patterns in the tokenizer's files, and tiktoken's rank file ----------------------------

OWN_PATTERN = r"""'[a-z]+|\p{L}+|\p{N}{1,2}|[^\s\p{L}\p{N}]|\s"""


@pytest.fixture(scope="module")
def trained_dirs(tmp_path_factory) -> dict:
    """A tokenizer directory per built-in pattern, each written by the training job (counting here:
    the files are what these tests read, and a cluster's job writes the same ones)."""
    from bpe_dask import train

    root = tmp_path_factory.mktemp("trained")
    training = root / "train.txt"
    training.write_bytes((corpus.mixed_corpus(400, 40) + corpus.words_corpus(401, 2000)).encode())
    for pattern in ("gpt2", "gpt4", "o200k"):
        train(
            training,
            256 + 1 + 300,
            str(root / pattern),
            [EOT],
            pattern=pattern,
            in_process=True,
        )
    return {pattern: root / pattern for pattern in ("gpt2", "gpt4", "o200k")}


def tiktoken_encoding(tokenizer: Tokenizer, rank_file):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    return tiktoken.Encoding(
        "trained",
        pat_str=tokenizer.pretokenizer.pattern.regex,
        mergeable_ranks=load_tiktoken_bpe(str(rank_file)),
        special_tokens=tokenizer.special_ids,
    )


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "o200k"])
def test_a_trained_tokenizer_keeps_its_pattern_and_encodes_like_hugging_face(trained_dirs, pattern):
    tokenizers = pytest.importorskip("tokenizers")
    folder = trained_dirs[pattern]
    assert json.loads((folder / "report.json").read_text())["pattern"] == pattern
    ours = Tokenizer.load(folder)
    assert ours.pretokenizer.pattern.name == pattern and ours.special_tokens == [EOT]
    theirs = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    for seed in range(2):
        text = multilingual_text(500 + seed) + " camelCase ÉCOLE x'rE 1234567 a./\n.\r\n"
        ids = ours.encode(text)
        assert ids == theirs.encode(text).ids
        assert ours.decode(ids) == text


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "o200k"])
def test_tiktoken_built_from_the_rank_file_encodes_like_the_tokenizer(trained_dirs, pattern):
    folder = trained_dirs[pattern]
    ours = Tokenizer.load(folder)
    encoding = tiktoken_encoding(ours, folder / "tokenizer.tiktoken")
    assert encoding.n_vocab == len(ours.vocab)
    for seed in range(3):
        text = multilingual_text(600 + seed) + f"{EOT}Don'T 'RE 12345{EOT}{EOT}\u00a0\u3000x"
        ids = ours.encode(text)
        assert encoding.encode(text, allowed_special="all") == ids
        assert encoding.decode(ids) == ours.decode(ids)


def test_a_pattern_of_ones_own_goes_through_the_files_to_hugging_face_and_tiktoken(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    training = tmp_path / "train.txt"
    training.write_bytes(corpus.mixed_corpus(700, 30).encode())
    vocab, merges = train_bpe(training, 256 + 1 + 200, [EOT], pattern=OWN_PATTERN)
    Tokenizer(vocab, merges, [EOT], OWN_PATTERN).save(tmp_path / "tok")
    ours = Tokenizer.load(tmp_path / "tok", trust_pattern=True)  # not built in: trusted by name
    assert ours.pretokenizer.pattern.regex == OWN_PATTERN and ours.pretokenizer.pattern.cut_rule is None
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    encoding = tiktoken_encoding(ours, tmp_path / "tok" / "tokenizer.tiktoken")
    text = multilingual_text(701)
    ids = ours.encode(text)
    assert ids == theirs.encode(text).ids == encoding.encode(text, allowed_special="all")
    assert list(ours.encode_iterable([text[i : i + 100] for i in range(0, len(text), 100)])) == ids


def test_the_numba_engine_is_refused_for_a_pattern_of_ones_own_and_auto_falls_back(trained_dirs):
    from bpe_dask import BpeDaskError

    ours = Tokenizer.load(trained_dirs["gpt4"], engine="python")
    with pytest.raises(BpeDaskError, match=r"patterns only \(pattern= names one\), not \\S\+\|"):
        Tokenizer(ours.vocab, ours.merges, [EOT], r"\S+|\s+", engine="numba")
    text = multilingual_text(800) * (COMPILED_MIN_CHARS // 4000 + 1)
    assert len(text) > COMPILED_MIN_CHARS
    assert not uses_compiled(Tokenizer(ours.vocab, ours.merges, [EOT], r"\S+|\s+"), len(text))
    assert Tokenizer.load(trained_dirs["gpt4"]).encode(text) == ours.encode(text)  # auto: compiled
    assert Tokenizer.load(trained_dirs["o200k"], engine="numba").encode(text) == (
        Tokenizer.load(trained_dirs["o200k"], engine="python").encode(text)
    )


def test_once_loaded_the_compiled_encoder_takes_texts_of_a_few_hundred_characters(gpt2, monkeypatch):
    """``auto`` loads the compiled encoder for a long text only; loaded, it also takes texts from
    ``LOADED_MIN_CHARS`` on (``encode_iterable``'s last piece), with the same ids; shorter ones stay
    on the Python loop, whose cache answers them faster than a compiled call."""
    fresh = Tokenizer(gpt2.vocab, gpt2.merges, [EOT])
    medium, tiny = "Hello, world! 12345 héllo. " * 12, "Hello, world!"
    assert len(medium) >= LOADED_MIN_CHARS > len(tiny)
    assert not uses_compiled(fresh, len(medium))
    python_ids = fresh.encode(medium)
    assert python_ids == gpt2.encode(medium)
    fresh.encode(multilingual_text(800) * (COMPILED_MIN_CHARS // 4000 + 1))  # long: loads it
    assert uses_compiled(fresh, len(medium)) and not uses_compiled(fresh, len(tiny))
    monkeypatch.setattr(Tokenizer, "_encode_python", lambda *args: pytest.fail("the Python loop ran"))
    assert fresh.encode(medium) == python_ids


def test_a_vocabulary_tiktoken_would_merge_otherwise_gets_no_rank_file(caplog):
    from bpe_dask import BpeDaskError

    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(b"a", b"b"), (b"ab", b"c"), (b"b", b"c")]
    good = Tokenizer({**vocab, 256: b"ab", 257: b"abc", 258: b"bc"}, merges)
    assert good.tiktoken_ranks() == {**{t: i for i, t in vocab.items()}, b"ab": 256, b"abc": 257, b"bc": 258}
    for bad_vocab, bad_merges, why in [
        ({**vocab, 256: b"ab", 257: b"abc"}, [], "not, in id order, what its merges make"),
        ({**vocab, 256: b"ab", 257: b"ab"}, [(b"a", b"b")], "hold the same bytes"),
        ({**vocab, 256: b"bc", 257: b"ab"}, [(b"a", b"b"), (b"b", b"c")], "not, in id order"),
        # "abc" is learned from "a" "bc", but "ab" comes first: merging "abc" ends in "ab" "c".
        ({**vocab, 256: b"ab", 257: b"bc", 258: b"abc"}, [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")],
         "do not make b'abc' from its own bytes"),
    ]:  # fmt: skip
        bad = Tokenizer(bad_vocab, bad_merges)
        with pytest.raises(BpeDaskError, match=re.escape(why)):
            bad.tiktoken_ranks()
        if "same bytes" not in why:  # vocab.json cannot hold that one either
            with caplog.at_level("WARNING"):
                assert "tokenizer.tiktoken" not in bad.files()
            assert why in caplog.text


@pytest.mark.parametrize("alphabet", ["ab", "abc", "aab", "abcd"])
def test_ranks_merge_as_merges_do_on_every_vocabulary_training_makes(alphabet):
    """The argument above ``Tokenizer.tiktoken_ranks``, tried: vocabularies trained on random words
    over tiny alphabets (runs like "aaaa" make overlapping merges) meet its conditions, and
    tiktoken's rank-based merge of random words equals ``merged``."""
    tiktoken = pytest.importorskip("tiktoken")
    from bpe_dask.rules import reference

    for seed in range(8):
        rng = random.Random(f"{alphabet}{seed}")
        words = {
            "".join(rng.choices(alphabet, k=rng.randint(1, 12))).encode(): rng.randint(1, 50)
            for _ in range(60)
        }
        vocab, merges = reference.train_on_counts(words, 256 + 60, [])
        tokenizer = Tokenizer(vocab, merges)
        encoding = tiktoken.Encoding(
            "t", pat_str=r"\S+", mergeable_ranks=tokenizer.tiktoken_ranks(), special_tokens={}
        )
        for _ in range(200):
            word = "".join(rng.choices(alphabet, k=rng.randint(1, 20))).encode()
            merged = tokenizer.vocabulary.merged(word)
            assert encoding._encode_single_piece(word) == list(merged), (seed, word)


# --- the compiled encoder (encode_numba) against the pure-Python reference -----------------------

pytest.importorskip("numba")


def both_engines(vocab, merges, specials):
    return Tokenizer(vocab, merges, specials, engine="python"), Tokenizer(
        vocab, merges, specials, engine="numba"
    )


@pytest.mark.parametrize("name", TEXTS)
def test_the_compiled_encoder_equals_the_reference_and_tiktoken_on_gpt2(gpt2, tiktoken_gpt2, name):
    text = (CS336_DIR / name).read_text(encoding="utf-8")
    reference, compiled = both_engines(gpt2.vocab, gpt2.merges, [EOT])
    ids = compiled.encode(text)
    assert ids == reference.encode(text) == tiktoken_gpt2.encode(text, allowed_special={EOT})
    assert compiled.encode_array(text).tolist() == ids


@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_encoder_equals_the_reference_on_trained_vocabularies(tmp_path, seed):
    training = tmp_path / "train.txt"
    training.write_bytes((corpus.mixed_corpus(300 + seed, 30) + corpus.words_corpus(seed, 3000)).encode())
    specials = [[EOT], [EOT, EOT + EOT], corpus.WEIRD_SPECIALS, []][seed]
    vocab, merges = train_bpe(training, 256 + len(specials) + 400, specials, engine="python")
    reference, compiled = both_engines(vocab, merges, specials)
    rng = random.Random(seed)
    for _ in range(30):
        text = "".join(rng.choices([multilingual_text(seed), *specials, " ", "\n", "aaaa", "'s"], k=20))
        assert compiled.encode(text) == reference.encode(text)


@pytest.mark.parametrize("run", ["a", "=", " ", "1", "ab", "日", "é", "\n"])
def test_long_runs_encode_alike_and_fast(gpt2, run):
    reference, compiled = both_engines(gpt2.vocab, gpt2.merges, [EOT])
    for n in (23, 24, 25, 300, 3000):
        text = "x " + run * n + f" y{EOT}" + run * n
        assert compiled.encode(text) == reference.encode(text)


def test_a_batch_whose_long_run_starts_right_after_an_empty_text_keeps_the_texts_apart(gpt2):
    """The compiled loop stops before a long pre-token to get room for merging it, and comes back to
    it: coming back to the first byte of a document that follows an empty one, it must not mark the
    end of a document a second time."""
    reference, compiled = both_engines(gpt2.vocab, gpt2.merges, [EOT])
    texts = ["", "a" * 3000, "b", "", "=" * 500 + " c"]
    assert compiled.encode_batch(texts, num_threads=1) == [reference.encode(text) for text in texts]


@pytest.mark.parametrize("run", ["a", "=", "日"])
def test_a_long_run_of_one_character_encodes_as_tiktoken_does(gpt2, tiktoken_gpt2, run):
    """The default engine hands a long pre-token to the O(n log n) merge (the reference's O(n²) would
    take about a minute on these): the ids are still GPT-2's."""
    text = f"{run * 100_000} and {run * 40_000}"
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text)
    assert gpt2.decode(ids) == text


def test_a_special_token_that_is_a_byte_s_name_in_gpt2_files():
    """GPT-2's vocab.json names byte 0xE9 "é"; a special token "é" must not take that key over."""
    gpt2 = Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt", ["é"])
    plain = Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt")
    byte_id = plain.token_id(b"\xe9")
    assert byte_id < 256 and gpt2.vocab[byte_id] == b"\xe9"  # the key "é" stays byte 0xE9
    ids = gpt2.encode("café é")
    assert gpt2.decode(ids) == "café é" and ids.count(gpt2.special_ids["é"]) == 2


def test_gpt2_files_without_special_tokens_named_keep_their_special_token_and_say_so(caplog):
    """GPT-2's vocab.json holds <|endoftext|> (50256), which no merge makes: read without special
    tokens named it was ordinary text, encoded as 12 tokens without a word."""
    with caplog.at_level("WARNING"):
        gpt2 = Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt")
    assert gpt2.special_ids == {EOT: 50256}
    assert gpt2.encode(f"a{EOT}b") == [64, 50256, 65]
    assert [r.getMessage() for r in caplog.records if "taken as special" in r.getMessage()] == [
        f"{CS336_DIR / 'gpt2_vocab.json'}: an entry neither a byte nor a merge's result, so taken as "
        f"special: {EOT} (name them with special_tokens to choose)"
    ]
    none = Tokenizer.from_files(CS336_DIR / "gpt2_vocab.json", CS336_DIR / "gpt2_merges.txt", [])
    assert none.special_ids == {} and 50256 not in none.encode(f"a{EOT}b")  # [] says: none


def test_a_cs336_reference_vocabulary_keeps_its_special_token_at_id_0(tmp_path):
    """CS336's reference vocab.json puts <|endoftext|> at id 0, the bytes at 1-256: the token keeps
    id 0, whether named or found, and is not given a new id past the vocabulary."""
    vocab, merges = CS336_DIR / "train-bpe-reference-vocab.json", CS336_DIR / "train-bpe-reference-merges.txt"
    for special_tokens in (None, [EOT]):
        tokenizer = Tokenizer.from_files(vocab, merges, special_tokens)
        assert tokenizer.special_ids == {EOT: 0} and len(tokenizer.vocab) == 500
        ids = tokenizer.encode(f"the cat{EOT}")
        assert ids[-1] == 0 and tokenizer.decode(ids) == f"the cat{EOT}"


def test_a_directory_of_vocab_json_and_merges_txt_only_keeps_its_special_tokens(tmp_path):
    """A CS336-format directory (no tokenizer.json): `bpe-dask encode` and Tokenizer.load took it for
    a tokenizer without special tokens."""
    trained = Tokenizer(*train_bpe(CS336_DIR / "corpus.en", 300, [EOT, "<|pad|>"]), [EOT, "<|pad|>"])
    trained.save(tmp_path / "tok")
    (tmp_path / "tok" / "tokenizer.json").unlink()
    loaded = Tokenizer.load(tmp_path / "tok")
    assert loaded.special_ids == trained.special_ids == {EOT: 256, "<|pad|>": 257}
    assert loaded.encode(f"hi{EOT}<|pad|>") == trained.encode(f"hi{EOT}<|pad|>")


@pytest.mark.parametrize(
    ("vocab", "merges", "message"),
    [
        ("gpt2_merges.txt", "gpt2_vocab.json", "gpt2_merges.txt is not a GPT-2-style vocab.json"),
        ("gpt2_vocab.json", "corpus.en", "corpus.en is not a GPT-2-style merges.txt"),
        ("corpus.en", "gpt2_merges.txt", "corpus.en is not a GPT-2-style vocab.json"),
    ],
)  # fmt: skip
def test_files_not_of_their_kind_are_one_line_naming_the_file(vocab, merges, message):
    """Swapped, they failed with a bare JSONDecodeError that named no file."""
    from bpe_dask.errors import BpeDaskError

    with pytest.raises(BpeDaskError) as raised:
        Tokenizer.from_files(CS336_DIR / vocab, CS336_DIR / merges)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_tokenizer_that_is_not_there_is_said_to_be_missing_not_to_lack_a_file(tmp_path):
    from bpe_dask.errors import BpeDaskError

    with pytest.raises(BpeDaskError, match=r"nosuch/tokenizer\.json: no such directory"):
        Tokenizer.load(tmp_path / "nosuch" / "tokenizer.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BpeDaskError, match=r"empty: no vocab\.json there"):
        Tokenizer.load(tmp_path / "empty")
