"""Superword tokenizers (SuperBPE, issue 44): stage 2 is training continued from stage 1's merges with
the ``superbpe`` pattern, which splits only at numbers and special tokens, so every document is one
word. Held to the reference trainer (``rules.reference``) on long documents, digits and special tokens,
on both engines, every source kind and a real cluster; the one command against the two stages by
hand; the tokenizer it writes in Hugging Face ``tokenizers`` and tiktoken."""

from __future__ import annotations

import itertools
import json
import logging
import random

import commands
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from tiktoken.load import load_tiktoken_bpe
from tokenizers import Tokenizer as HFTokenizer

import bpe_dask
from bpe_dask import Tokenizer
from bpe_dask.rules import reference
from bpe_dask.rules.bpe import words_in
from bpe_dask.rules.patterns import GPT2, GPT4, SUPERBPE, SUPERBPE_LINES
from bpe_dask.rules.vocabulary import Vocabulary
from bpe_dask.stages.merge import laid_out, train_merges

EOT = "<|endoftext|>"
# Phrases that recur (what superwords are made of), numbers of every length, line ends, punctuation.
WORDS = [" the", " of", " the cat", " sat", " on", " mat", ",", ".", " and", " in", "\n", "\n\n", " I",
         " 1234567", " 2024", " 99", "½", " é", " 日本", " don't", ":", " ", "  ", "The", " a",
         " 12,345"]  # fmt: skip


def phrases(seed: int, n_docs: int, words: int = 120) -> list[str]:
    """Documents of Zipf-drawn phrases: the same few bridging words again and again, as in prose."""
    rng = random.Random(seed)
    weights = [1 / (k + 1) for k in range(len(WORDS))]
    return ["".join(rng.choices(WORDS, weights, k=rng.randint(1, words))) for _ in range(n_docs)]


def superwords_reference(docs: list[str], after: int, vocab_size: int, specials: list[str], pattern=GPT2):
    """The two stages by the reference: to ``after`` with ``pattern``, then on with ``superbpe``."""
    first = reference.train(docs, after, specials, pattern.regex)
    return reference.train(docs, vocab_size, specials, SUPERBPE.regex, base=first)


# --- the merge loop ------------------------------------------------------------------------------

document = st.lists(st.sampled_from([*WORDS, EOT, "<|pad|>"]), max_size=300).map("".join)


@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(
    docs=st.lists(document, min_size=1, max_size=5),
    first_merges=st.integers(0, 40),
    merges=st.integers(0, 60),
    engine=st.sampled_from(["python", "numba"]),
    pattern=st.sampled_from([GPT2, GPT4]),
    max_token_length=st.none() | st.integers(2, 12),
)
def test_stage_two_learns_the_reference_merges_on_either_engine(
    docs, first_merges, merges, engine, pattern, max_token_length
):
    """Each document (between special tokens, cut at numbers) is first split by stage 1's merges over
    its whole length, then the CS336 rule goes on: the reference's merges and ids."""
    specials = [EOT, "<|pad|>"]
    first = reference.train(docs, 258 + first_merges, specials, pattern.regex)
    counts = reference.pretokenize(docs, specials, SUPERBPE.regex)
    vocab_size = len(first[0]) + merges
    want = reference.train_on_counts(
        counts, vocab_size, specials, base=first, max_token_length=max_token_length
    )
    got = train_merges(list(counts.items()), vocab_size, specials, engine=engine,
                       base=Vocabulary(*first, specials), max_token_length=max_token_length)  # fmt: skip
    assert got == want


def test_long_words_take_the_loop_that_links_positions_and_learn_the_references_merges():
    from bpe_dask.compiled import LongWords, Words
    from bpe_dask.io.counts_table import counts_table
    from bpe_dask.stages.merge import merge_engine

    docs = phrases(1, 200, words=400)
    first = reference.train(docs[:40], 300, [EOT])
    base = Vocabulary(*first, [EOT])
    counts = reference.pretokenize(docs, [EOT], SUPERBPE.regex)
    table = counts_table({w.decode("utf-8"): c for w, c in counts.items()})
    assert isinstance(laid_out(table, 600, "numba", base), LongWords)
    assert isinstance(laid_out(reference.pretokenize(docs, [EOT]).items(), 600, "numba"), Words)
    assert train_merges(table, 600, [EOT], engine="numba", base=base) == reference.train_on_counts(
        counts, 600, [EOT], base=first
    )
    # A few long words are worth compiling for: the Python loop reads a word whole for each merge.
    assert merge_engine("auto", 200, 1 << 20) == "numba" and merge_engine("auto", 200, 1 << 19) == "python"


# --- the jobs ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("superwords") / "corpus.txt"
    path.write_text(EOT.join(phrases(2, 60)), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["text", "parquet", "jsonl"])
@pytest.mark.parametrize("place", [{"in_process": True}, {"workers": 2, "engine": "numba"}])
def test_one_call_trains_both_stages_exactly_from_every_source_kind(tmp_path, kind, place):
    docs = phrases(3, 40)
    if kind == "text":
        (tmp_path / "in.txt").write_text(EOT.join(docs), encoding="utf-8")
    elif kind == "parquet":
        pq.write_table(pa.table({"text": docs}), tmp_path / "in.parquet", row_group_size=7)
    else:
        (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    path = str(next(tmp_path.glob("in.*")))
    got = bpe_dask.train_bpe(path, 257 + 150, [EOT], superwords_after=257 + 60, **place)
    assert got == superwords_reference(docs, 257 + 60, 257 + 150, [EOT])
    assert any(b" " in token.strip(b" ") for token in got[0].values())  # a superword, bridging a space


def test_by_lines_no_token_crosses_a_line_end_as_in_the_authors_trainer(tmp_path):
    """``superwords_pattern="superbpe-lines"``: stage 2's pre-tokens end after each line end, so no
    token holds one but at its end; the reference's merges by that pattern, on a cluster too."""
    docs = [doc.replace(" I", "\n I") for doc in phrases(6, 40)]
    (tmp_path / "in.txt").write_text(EOT.join(docs), encoding="utf-8")
    for place in ({"in_process": True}, {"workers": 2, "engine": "numba"}):
        got = bpe_dask.train_bpe(str(tmp_path / "in.txt"), 600, [EOT], superwords_after=320,
                                 superwords_pattern="superbpe-lines", **place)  # fmt: skip
        first = reference.train(docs, 320, [EOT])
        assert got == reference.train(docs, 600, [EOT], SUPERBPE_LINES.regex, base=first)
        assert not any(b"\n" in token.rstrip(b"\n") for token in got[0].values())
        assert any(b" " in token.strip(b" ") for token in got[0].values())  # superwords all the same


def test_the_one_command_writes_the_files_of_the_two_stages_by_hand(tmp_path, corpus_file):
    args = ["--special-token", EOT, "--workers", "2"]
    commands.bpe_dask("train", str(corpus_file), "--vocab-size", "500", "--superwords-after", "330",
                      "--out", "one", *args, cwd=tmp_path, check=True)  # fmt: skip
    commands.bpe_dask(
        "train", str(corpus_file), "--vocab-size", "330", "--out", "s1", *args, cwd=tmp_path, check=True
    )
    by_hand = ["--init-from", "s1", "--pattern", "superbpe", "--out", "s2", *args]
    done = commands.bpe_dask(
        "train", str(corpus_file), "--vocab-size", "500", *by_hand, cwd=tmp_path, check=True
    )
    assert "not s1's own" not in done.stderr  # no warning that superbpe is not stage 1's pattern
    for name in ("merges.txt", "vocab.json", "tokenizer.json", "tokenizer.tiktoken"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "s2" / name).read_bytes(), name
    report = json.loads((tmp_path / "one" / "report.json").read_text())
    assert report["superwords_after"] == 330 and report["pattern"] == "superbpe"
    assert report["inherited_merges"] == 330 - 257 and report["timings"]["stage_1"] > 0
    want = superwords_reference([corpus_file.read_text(encoding="utf-8")], 330, 500, [EOT])
    assert Tokenizer.load(tmp_path / "one").merges == want[1]


def test_both_stages_counts_are_reused_from_a_work_dir_and_from_a_counts_table(tmp_path, corpus_file, caplog):
    """Run again with the same work directory, each stage's partitions are read back, not counted;
    stage 2's counts made once by ``count_words --pattern superbpe`` merge from any stage 1."""
    caplog.set_level(logging.INFO, logger="bpe_dask")
    place = {"work_dir": str(tmp_path / "work"), "workers": 2, "chunk_size": 4096}
    bpe_dask.train(str(corpus_file), 500, tmp_path / "one", [EOT], superwords_after=330, **place)
    caplog.clear()
    again = bpe_dask.train(str(corpus_file), 520, tmp_path / "again", [EOT], superwords_after=330, **place)
    counted = [r.getMessage() for r in caplog.records if "counted in" in r.getMessage()]
    partitions = again["partitions"]
    assert partitions > 1 and len(counted) == 2 and all(f"({partitions} reused)" in line for line in counted)
    bpe_dask.count_words(str(corpus_file), [EOT], out=str(tmp_path / "c.parquet"), pattern="superbpe",
                         in_process=True)  # fmt: skip
    bpe_dask.train(str(corpus_file), 330, tmp_path / "s1", [EOT], in_process=True)
    bpe_dask.merge(tmp_path / "c.parquet", 500, tmp_path / "merged", init_from=tmp_path / "s1")
    assert (tmp_path / "merged" / "merges.txt").read_bytes() == (tmp_path / "one" / "merges.txt").read_bytes()


def test_hugging_face_and_tiktoken_encode_as_the_tokenizer_does(tmp_path, corpus_file):
    bpe_dask.train(str(corpus_file), 600, tmp_path / "tok", [EOT], superwords_after=400, in_process=True)
    ours = Tokenizer.load(tmp_path / "tok")
    assert ours.pretokenizer.pattern is SUPERBPE
    config = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())
    assert config["pre_tokenizer"]["type"] == "Sequence"
    hf = HFTokenizer.from_file(str(tmp_path / "tok" / "tokenizer.json"))
    encoding = tiktoken.Encoding(
        "superwords", pat_str=SUPERBPE.regex, special_tokens=ours.special_ids,
        mergeable_ranks=load_tiktoken_bpe(str(tmp_path / "tok" / "tokenizer.tiktoken")),
    )  # fmt: skip
    held_out = [
        *phrases(50, 20),
        "By the way, in 2024 I paid $1234567 -- see: the cat.\n",
        "½½½ 1 22 333 4444",
    ]
    for text in held_out:
        ids = ours.encode(text)
        assert hf.encode(text).ids == ids
        assert encoding.encode(text, allowed_special="all") == ids
        assert ours.decode(ids) == text
    assert ours.encode(EOT.join(held_out), allowed_special="all") == hf.encode(EOT.join(held_out)).ids
    assert any(len(ours.vocab[i].split()) > 1 for i in ours.encode(held_out[0]))  # superwords in use


def test_the_papers_limits_on_superwords_hold_on_a_cluster(tmp_path, corpus_file):
    """``--max-words 2 --forbid ': '``: no new token spans three words or holds ": ", the
    reference's merges all the same, and the stop said when nothing is left to merge."""
    args = ["--vocab-size", "2000", "--superwords-after", "330", "--max-words", "2", "--forbid", ": "]
    done = commands.bpe_dask("train", str(corpus_file), *args, "--special-token", EOT, "--out", "out",
                             "--workers", "2", "--engine", "numba", cwd=tmp_path, check=True)  # fmt: skip
    got = Tokenizer.load(tmp_path / "out")
    first = reference.train([corpus_file.read_text(encoding="utf-8")], 330, [EOT])
    want = reference.train([corpus_file.read_text(encoding="utf-8")], 2000, [EOT], SUPERBPE.regex, base=first,
                           max_words=2, forbid=(": ",))  # fmt: skip
    assert got.merges == want[1]
    new = [a + b for a, b in got.merges[330 - 257 :]]
    assert max(map(words_in, new)) == 2 and not any(b": " in token for token in new)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (report["max_words"], report["forbid"]) == (2, [": "])
    if report["stopped_by"] == "token_limits":
        assert "of more than --max-words 2 words or holding one of --forbid" in done.stderr


def test_stage_two_too_large_for_the_merge_node_is_one_line_before_it_starts(
    tmp_path, corpus_file, monkeypatch
):
    """The merge loop of long words needs memory in proportion to its tokens: with less free than
    that, the job stops before the loop, says how much, and publishes nothing."""
    from bpe_dask.compiled import merge_positions

    monkeypatch.setattr(merge_positions, "memory_free", lambda: 100_000)
    with pytest.raises(bpe_dask.BpeDaskError) as caught:
        bpe_dask.train(str(corpus_file), 600, tmp_path / "out", [EOT], superwords_after=400, engine="numba",
                       in_process=True)  # fmt: skip
    message = str(caught.value)
    assert "\n" not in message and "and this process has 97.66 kiB free: merge on a machine" in message
    assert "the merge loop needs about" in message and "words of" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--vocab-size", "400", "--superwords-after", "400"],
            "--superwords-after 400 must be below the vocab size",
        ),
        (
            ["--vocab-size", "400", "--superwords-after", "100"],
            "--superwords-after 100 is below the 257 tokens",
        ),
        (["--vocab-size", "400", "--superwords-after", "300", "--pattern", "superbpe"], "not superbpe"),
        (["--vocab-size", "400", "--superwords-after", "300", "--init-from", "super"], "not superbpe"),
        (
            ["--vocab-size", "400", "--superwords-after", "300", "--superwords-pattern", "gpt2"],
            "--superwords-pattern must be superbpe or superbpe-lines, got 'gpt2'",
        ),
    ],
)
def test_bad_superword_settings_are_one_line_and_nothing_written(tmp_path, corpus_file, args, says):
    bpe_dask.train(str(corpus_file), 300, tmp_path / "super", [EOT], pattern="superbpe", in_process=True)
    done = commands.bpe_dask(
        "train", str(corpus_file), *args, "--special-token", EOT, "--out", "out", cwd=tmp_path
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and says in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_long_pretokens_merge_in_segments_exactly_as_whole():
    """Stage 2's layout merges each document in segments, cut where no merge joins two bytes: the
    same ids as merging it whole, with a base that cuts at every word and with one that cuts nowhere."""
    from bpe_dask.compiled import Encoder

    docs = [doc.encode("utf-8") for doc in phrases(4, 60, words=300)]
    offsets = np.cumsum([0, *map(len, docs)])
    for pattern in (GPT2, SUPERBPE):  # SuperBPE's merges join bytes across spaces too
        base = Vocabulary(*reference.train(phrases(5, 30), 600, [EOT], pattern.regex), [EOT])
        encoder = Encoder(base.byte_ids, base.merge_ranks)
        junctions, limit = encoder.split  # a superword tokenizer's first bridging merge is its limit
        assert not junctions[ord("e") << 8 | ord(" ")] and (limit < 1 << 62) == (pattern is SUPERBPE)
        ids, ends = encoder.pretoken_ids(b"".join(docs), offsets)
        assert [tuple(ids[a:b]) for a, b in itertools.pairwise(ends)] == [base.merged(d) for d in docs]


@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(docs=st.lists(document, min_size=1, max_size=4), texts=st.lists(document, min_size=1, max_size=3),
       after=st.integers(0, 40), merges=st.integers(1, 60))  # fmt: skip
def test_a_superword_tokenizer_encodes_as_the_reference_on_either_engine(docs, texts, after, merges):
    """Long pre-tokens are merged by stage 1's merges in segments, then by the rest over their ids
    (docs/exactness.md#encoding-in-segments): the reference encoder's ids all the same."""
    specials = [EOT, "<|pad|>"]
    first = reference.train(docs, 258 + after, specials)
    vocab, learned = reference.train(docs, len(first[0]) + merges, specials, SUPERBPE.regex, base=first)
    for engine in ("python", "numba"):
        tokenizer = Tokenizer(vocab, learned, specials, pattern="superbpe", engine=engine)
        for text in texts:
            assert tokenizer.encode(text, allowed_special="all") == reference.encode(
                text, vocab, learned, specials, SUPERBPE.regex
            )


def test_on_separate_machines_a_corpus_in_s3_trains_superwords_into_s3(tmp_path, corpus_file, s3, endpoint):
    """Corpus and output in S3, two workers on machines of their own: both stages count there and
    merge on a worker, and the tokenizer appears whole in S3 with the reference's merges."""
    import servers

    bucket = "superwords"
    s3.mkdir(bucket)
    s3.put(str(corpus_file), f"{bucket}/in.txt")
    want = superwords_reference([corpus_file.read_text(encoding="utf-8")], 330, 500, [EOT])
    client = tmp_path / "client"
    client.mkdir()
    env = {**servers.env_without_aws(), **servers.S3_ENV, "AWS_ENDPOINT_URL": endpoint}
    with servers.separate_machines(
        [tmp_path], 2, nthreads=2, worker_env_extra=servers.WORKER_CREDENTIALS
    ) as cluster:
        args = ["train", f"s3://{bucket}/in.txt", "--vocab-size", "500", "--superwords-after", "330",
                "--special-token", EOT, "--out", f"s3://{bucket}/tok", "--scheduler", cluster.address,
                "--chunk-size", "8KiB"]  # fmt: skip
        done = commands.bpe_dask(*args, cwd=client, environment=env, check=True)
        assert not any(cluster.files().values()), cluster.files()  # nothing on the workers' disks
    s3.invalidate_cache()
    assert sorted(s3.ls(bucket)) == [f"{bucket}/in.txt", f"{bucket}/tok"]
    s3.get(f"{bucket}/tok", str(tmp_path / "tok"), recursive=True)
    report = json.loads((tmp_path / "tok" / "report.json").read_text())
    assert report["merge_ran_on"] == "worker" and report["partitions"] > 1, done.stderr
    assert Tokenizer.load(tmp_path / "tok").merges == want[1]
    assert not list(client.iterdir())
