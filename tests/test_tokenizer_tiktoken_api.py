"""tiktoken's encoding interface on ``Tokenizer``: ``encode_batch``, ``allowed_special`` and
``disallowed_special`` (with CS336's defaults), lone surrogates; and split patterns read from a file
run only when trusted, and under a time limit."""

from __future__ import annotations

import io
import itertools
import pickle
import time

import commands
import corpus
import dask.config
import numpy as np
import pytest

from bpe_dask import BpeDaskError, Tokenizer, encode, train_bpe
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.tokenizer import COMPILED_MIN_CHARS

tiktoken = pytest.importorskip("tiktoken")

EOT, PAD, FIM = "<|endoftext|>", "<|pad|>", "<|fim|>"
SPECIALS = [EOT, PAD, FIM]
ENGINES = ["python", "numba"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    training = tmp_path_factory.mktemp("api") / "train.txt"
    training.write_bytes(
        (corpus.words_corpus(41, 20_000) + corpus.multi_special_corpus(42, 30, SPECIALS)).encode()
    )
    return train_bpe(training, 256 + 3 + 400, SPECIALS, in_process=True)


@pytest.fixture(scope="module", params=ENGINES)
def ours(trained, request) -> Tokenizer:
    vocab, merges = trained
    return Tokenizer(vocab, merges, SPECIALS, engine=request.param)


@pytest.fixture(scope="module")
def theirs(trained):
    reference = Tokenizer(*trained, SPECIALS)
    return tiktoken.Encoding(
        "trained",
        pat_str=reference.pretokenizer.pattern.regex,
        mergeable_ranks=reference.tiktoken_ranks(),
        special_tokens=reference.special_ids,
    )


def documents(seed: int, count: int) -> list[str]:
    """Short and long documents, some empty, with special tokens inside and at their ends."""
    text = corpus.multi_special_corpus(seed, count * 3, SPECIALS) + corpus.nasty_string(seed, 5_000)
    cuts = sorted({0, len(text), *range(0, len(text), max(1, len(text) // count))})
    docs = [text[a:b] for a, b in itertools.pairwise(cuts)]
    return ["", *docs, EOT, f"{PAD}x{FIM}", ""]


# --- encode_batch ---------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("count", [3, 200])
def test_encode_batch_equals_encode_and_tiktoken(ours, theirs, threads, count):
    docs = documents(count, count)
    want = [ours.encode(doc) for doc in docs]
    assert want == theirs.encode_batch(docs, allowed_special="all")
    assert ours.encode_batch(docs, num_threads=threads) == want
    assert ours.encode_batch(iter(docs), num_threads=threads) == want  # any iterable, as a list
    assert_flat(ours.encode_batch_to_numpy(iter(docs), num_threads=threads), want)
    if count == 200:
        assert sum(map(len, docs)) > COMPILED_MIN_CHARS  # auto takes the compiled encoder here


def assert_flat(flat: tuple[np.ndarray, np.ndarray], want: list[list[int]]) -> None:
    """``encode_batch_to_numpy``'s arrays hold ``want``, the ids of each text: uint32 ids back to back,
    int64 offsets, one more than the texts."""
    ids, offsets = flat
    assert (ids.dtype, offsets.dtype, len(offsets)) == (np.uint32, np.int64, len(want) + 1)
    assert [ids[a:b].tolist() for a, b in itertools.pairwise(offsets)] == want
    assert offsets[0] == 0 and offsets[-1] == len(ids)


def test_encode_batch_of_nothing(ours):
    assert ours.encode_batch([]) == []
    assert ours.encode_batch([""]) == [[]]
    assert_flat(ours.encode_batch_to_numpy([]), [])
    assert_flat(ours.encode_batch_to_numpy(["", ""], num_threads=2), [[], []])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_encode_batch_to_numpy_joins_its_groups_in_order(ours, threads):
    """Many groups (each of ``COMPILED_MIN_CHARS`` characters at least, so over a megabyte of texts
    makes more groups than threads), empty texts between them: each text's ids where its offsets say."""
    docs = [text for doc in documents(5, 400) for text in (doc, "")] * 12
    assert sum(map(len, docs)) > 8 * COMPILED_MIN_CHARS
    assert_flat(ours.encode_batch_to_numpy(docs, num_threads=threads), ours.encode_batch(docs, num_threads=1))


# --- lone surrogates ------------------------------------------------------------------------------

SURROGATE_TEXTS = [
    "ok \ud800",
    "a\udc00b \udfff\ud800",
    "\ud83d\ude00 a pair is a character",
    "x\ud800" + EOT,
]


@pytest.mark.parametrize("text", SURROGATE_TEXTS)
@pytest.mark.parametrize("long", [False, True])
def test_lone_surrogates_encode_as_tiktoken_does_on_every_path(ours, theirs, text, long):
    if long:  # past COMPILED_MIN_CHARS: the compiled encoder under auto
        text = corpus.words_corpus(7, 20_000) + text + corpus.words_corpus(8, 100)
    want = theirs.encode(text, allowed_special="all")
    assert ours.encode(text) == want
    assert ours.encode_array(text).tolist() == want
    assert ours.encode_batch([text, "ok", text]) == [want, theirs.encode("ok"), want]
    assert list(ours.encode_iterable([text[: len(text) // 2], text[len(text) // 2 :]])) == want
    assert list(ours.encode_iterable(io.StringIO(text))) == want
    assert ours.encode_documents([text, "ok"]).tolist() == want + theirs.encode("ok")


# --- allowed_special and disallowed_special -------------------------------------------------------

CHOICES = [
    ("all", ()),  # ours by default: CS336's
    (set(), ()),  # every special token is text
    ({EOT}, ()),
    ({EOT, "not a special token"}, ()),
    ({EOT}, "all"),  # PAD and FIM refused
    (set(), "all"),  # tiktoken's default: every one refused
    ("all", "all"),  # "all" disallowed is every one not allowed: none (README said every one)
    ({PAD}, {EOT}),  # FIM neither: text
    ("all", {"Hello"}),  # any string may be refused, special or not
    ({EOT}, {EOT}),  # refused though allowed, as in tiktoken
]


def refused_everywhere(ours: Tokenizer, text: str, options: dict) -> None:
    for encoding in [
        lambda: ours.encode(text, **options),
        lambda: ours.encode_array(text, **options),
        lambda: ours.encode_batch(["x", text], **options),
        lambda: ours.encode_batch_to_numpy(["x", text], **options),
        lambda: list(ours.encode_iterable([text[:5], text[5:]], **options)),
    ]:
        with pytest.raises(BpeDaskError) as refused:
            encoding()
        assert isinstance(refused.value, ValueError)  # tiktoken's kind too
        assert "disallowed_special" in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(("allowed", "disallowed"), CHOICES)
def test_allowed_and_disallowed_special_as_in_tiktoken(ours, theirs, allowed, disallowed):
    options = {"allowed_special": allowed, "disallowed_special": disallowed}
    for text in [*documents(3, 4), f"Hello{EOT}{PAD}{FIM} x{FIM}", "nothing special"]:
        try:
            want = theirs.encode(text, **options)
        except ValueError:
            refused_everywhere(ours, text, options)
            continue
        assert ours.encode(text, **options) == want, text
        assert ours.encode_array(text, **options).tolist() == want
        assert ours.encode_batch([text, text], **options) == [want, want]
        assert_flat(ours.encode_batch_to_numpy([text, text], **options), [want, want])
        pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
        assert list(ours.encode_iterable(pieces, **options)) == want


def test_a_long_text_with_a_special_token_allowed_or_not(ours, theirs):
    text = corpus.multi_special_corpus(9, 600, SPECIALS)
    assert len(text) > COMPILED_MIN_CHARS
    for allowed in ["all", set(), {PAD}]:
        want = theirs.encode(text, allowed_special=allowed, disallowed_special=())
        assert ours.encode(text, allowed_special=allowed) == want
        assert list(ours.encode_iterable(io.StringIO(text), allowed_special=allowed)) == want
        assert ours.encode_batch([text[:5000], text], allowed_special=allowed)[1] == want


@pytest.mark.parametrize("bad", ["all!", EOT, [1]])
def test_a_special_token_choice_that_is_no_set_is_refused(ours, bad):
    with pytest.raises(BpeDaskError, match="must be"):
        ours.encode("x", allowed_special=bad)


def test_a_tokenizer_used_then_pickled_encodes_alike(ours):
    text = corpus.words_corpus(3, 20_000)
    want = ours.encode(text)
    assert pickle.loads(pickle.dumps(ours)).encode(text) == want


# --- split patterns from a file -------------------------------------------------------------------

CATASTROPHIC = r"(?:x|x)+y|\s+|."


@pytest.fixture(scope="module")
def catastrophic_dir(trained, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pattern") / "tok"
    Tokenizer(*trained, SPECIALS, CATASTROPHIC).save(folder)
    return folder


def test_a_pattern_that_is_not_built_in_is_refused_unless_trusted(catastrophic_dir, tmp_path):
    with pytest.raises(BpeDaskError, match="trust_pattern=True") as refused:
        Tokenizer.load(catastrophic_dir)
    assert "\n" not in str(refused.value) and repr(CATASTROPHIC) in str(refused.value)
    (tmp_path / "in.txt").write_text("x" * 40)
    with pytest.raises(BpeDaskError, match="trust_pattern=True"):
        encode([tmp_path / "in.txt"], str(catastrophic_dir), str(tmp_path / "out.bin"), in_process=True)
    assert Tokenizer.load(catastrophic_dir, trust_pattern=True).pretokenizer.pattern.regex == CATASTROPHIC


@pytest.mark.parametrize("engine", ["auto", "python"])
def test_a_trusted_pattern_that_backtracks_without_end_stops_at_the_time_limit(catastrophic_dir, engine):
    tokenizer = Tokenizer.load(catastrophic_dir, engine=engine, trust_pattern=True)
    assert tokenizer.decode(tokenizer.encode("xy x y")) == "xy x y"  # a pattern that works, quickly
    with dask.config.set({"bpe-dask.pattern-timeout": 0.5}):
        started = time.perf_counter()
        with pytest.raises(BpeDaskError, match=r"took over 0.5 s .*bpe-dask.pattern-timeout") as stopped:
            tokenizer.encode("x" * 40)
        assert time.perf_counter() - started < 5
        assert repr(CATASTROPHIC) in str(stopped.value) and "\n" not in str(stopped.value)
        with pytest.raises(BpeDaskError, match="took over"):  # counting runs the pattern too
            Pretokenizer(SPECIALS, CATASTROPHIC).count("a " + "x" * 40)


def test_the_built_in_patterns_load_from_a_file_untrusted(trained, tmp_path):
    for pattern in ("gpt2", "gpt4", "o200k"):
        Tokenizer(*trained, SPECIALS, pattern).save(tmp_path / pattern)
        assert Tokenizer.load(tmp_path / pattern).pretokenizer.pattern.name == pattern
    assert np.array_equal(Tokenizer.load(tmp_path / "gpt4").encode_array("Hello"),
                          Tokenizer(*trained, SPECIALS, "gpt4").encode_array("Hello"))  # fmt: skip


def test_bpe_dask_encode_runs_a_pattern_of_ones_own_only_with_trust_pattern(trained, tmp_path):
    Tokenizer(*trained, SPECIALS, r"\S+|\s+").save(tmp_path / "tok")
    (tmp_path / "in.txt").write_bytes(corpus.words_corpus(5, 2_000).encode())
    command = ["encode", "in.txt", "--tokenizer", "tok", "--out", "ids.bin", "--workers", "1", "-q"]
    refused = commands.bpe_dask(*command, cwd=tmp_path)
    assert refused.returncode == 1 and "--trust-pattern" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    commands.bpe_dask(*command, "--trust-pattern", cwd=tmp_path, check=True)
    trusted = Tokenizer.load(tmp_path / "tok", trust_pattern=True)
    want = trusted.encode((tmp_path / "in.txt").read_bytes().decode())
    assert np.fromfile(tmp_path / "ids.bin", np.uint16).tolist() == want


def test_the_tokenizers_public_face_is_what_users_call():
    """Tokenizer exposed the stages' internals (uses_compiled, pretoken_histogram,
    encode_utf8_documents, merged) beside what users call; the stages' are functions of
    ``bpe_dask.tokenizer`` now, taking a tokenizer, tested there."""
    from bpe_dask import Tokenizer

    methods = {name for name in dir(Tokenizer) if not name.startswith("_")}
    assert methods == {
        "decode", "encode", "encode_array", "encode_batch", "encode_batch_to_numpy", "encode_documents",
        "encode_iterable",
        "files", "from_files", "from_tokenizer_json", "load", "save", "tiktoken_ranks", "token_id",
        "truncated",
    }  # fmt: skip
    tokenizer = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    attributes = {name for name in vars(tokenizer) if not name.startswith("_")}
    held = {"engine", "vocabulary", "vocab", "merges", "special_tokens", "special_ids", "pretokenizer"}
    assert attributes == held
