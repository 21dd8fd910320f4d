"""min_frequency and max_token_length: the reference trainer's rule, held in every engine and the real job.

The rule: each step's candidates are the pairs whose merged token has at most ``max_token_length``
bytes (longer pairs stay in the words, never chosen); the most frequent candidate wins, ties to the
greater pair; training stops when none is left, or when the best occurs fewer than ``min_frequency``
times.
"""

from __future__ import annotations

import json
import logging
import random
import subprocess
from pathlib import Path

import commands
import pytest
from test_merge import ENGINES, NUMBA, random_words

from bpe_dask import BpeDaskError, train, train_bpe
from bpe_dask.rules import reference
from bpe_dask.stages.merge import train_merges
from conftest import CS336_DIR, read_reference_merges

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent
HANDOUT = {b"low": 5, b"lower": 2, b"widest": 3, b"newest": 6}
STORIES = (CS336_DIR / "tinystories_sample.txt").read_text(encoding="utf-8")
# On the stories, vocabulary 400: both options bite (see test_the_options_bite_on_the_stories).
STORY_VOCAB, STORY_OPTIONS = 400, {"min_frequency": 5, "max_token_length": 4}


def split(merges: str) -> list[tuple[bytes, bytes]]:
    return [tuple(m.encode() for m in pair.split(" ")) for pair in merges.split(", ")]


def test_the_reference_rule_on_the_handout_example():
    _, all_merges = reference.train_on_counts(HANDOUT, 256 + 12, [])
    # The first four merges occur 9, 9, 7 and 7 times; the fifth ("w est") 6.
    _, merges = reference.train_on_counts(HANDOUT, 256 + 12, [], min_frequency=7)
    assert merges == all_merges[:4]
    assert reference.train_on_counts(HANDOUT, 256 + 12, [], min_frequency=1) == (
        reference.train_on_counts(HANDOUT, 256 + 12, [])
    )
    # "w est" would be 4 bytes: passed over (it stays in the words), and so are "low e", "d est",
    # "new est" and "low er" later; the loop stops when only such pairs are left.
    _, merges = reference.train_on_counts(HANDOUT, 1000, [], max_token_length=3)
    assert merges == split("s t, e st, o w, l ow, n e, ne w, w i, wi d, e r")
    _, merges = reference.train_on_counts(HANDOUT, 1000, [], max_token_length=1)
    assert merges == []


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_follow_the_reference_on_random_tables(engine):
    bit = 0
    for seed in range(400):
        rng = random.Random(seed)
        words = random_words(rng)
        specials = rng.choice([[], ["<s>"], ["ab", "abc"]])
        vocab_size = 256 + len(specials) + rng.randint(0, 30)
        options = {
            "min_frequency": rng.choice([0, 2, 3, 5, 50]),
            "max_token_length": rng.choice([None, 2, 3, 5]),
        }
        want = reference.train_on_counts(words, vocab_size, specials, **options)
        got = train_merges(list(words.items()), vocab_size, specials, engine=engine, **options)
        assert got == want, (seed, words, options)
        bit += want != reference.train_on_counts(words, vocab_size, specials)
    assert bit > 100


@pytest.fixture(scope="module")
def corpus_counts() -> dict[bytes, int]:
    return reference.pretokenize([(CS336_DIR / "corpus.en").read_text(encoding="utf-8")], [EOT])


@pytest.fixture(scope="module")
def corpus_reference(corpus_counts):
    """corpus.en at vocabulary 500 with both options (the reference takes ~2 s)."""
    options = {"min_frequency": 60, "max_token_length": 4}
    return options, reference.train_on_counts(corpus_counts, 500, [EOT], **options)


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_follow_the_reference_on_a_real_corpus(
    corpus_counts, corpus_reference, cs336_reference_merges, engine
):
    options, (vocab, merges) = corpus_reference
    all_merges = cs336_reference_merges  # the same corpus and vocabulary, without the options
    assert len(merges) < len(all_merges)  # min_frequency bites
    assert max(len(a + b) for a, b in all_merges) > 4 >= max(len(a + b) for a, b in merges)
    stops: list[tuple[str, int]] = []
    got = train_merges(
        list(corpus_counts.items()),
        500,
        [EOT],
        engine=engine,
        stopped=lambda *why: stops.append(why),
        **options,
    )
    assert got == (vocab, merges)
    assert stops == [("min_frequency", stops[0][1])] and stops[0][1] < 60


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_both_engines_agree_over_many_compiled_batches(corpus_counts):
    """Past the compiled engine's batches of 256 merges (the python engine is held to the reference)."""
    words, options = list(corpus_counts.items()), {"min_frequency": 12, "max_token_length": 6}
    python_stops: list[tuple[str, int]] = []
    python = train_merges(
        words, 1500, [EOT], engine="python", stopped=lambda *why: python_stops.append(why), **options
    )
    numba_stops: list[tuple[str, int]] = []
    numba = train_merges(
        words, 1500, [EOT], engine="numba", stopped=lambda *why: numba_stops.append(why), **options
    )
    assert numba == python
    assert numba_stops == python_stops and python_stops[0][0] == "min_frequency"
    assert 3 * 256 < len(python[1]) < 1500 - 257
    assert max(len(a + b) for a, b in python[1]) == 6


def test_the_options_bite_on_the_stories():
    _, merges = reference.train([STORIES], STORY_VOCAB, [EOT], **STORY_OPTIONS)
    _, all_merges = reference.train([STORIES], STORY_VOCAB, [EOT])
    assert len(merges) < len(all_merges) == STORY_VOCAB - 257
    assert max(len(a + b) for a, b in all_merges) > 4 >= max(len(a + b) for a, b in merges)
    _, only_length = reference.train([STORIES], STORY_VOCAB, [EOT], max_token_length=4)
    assert only_length != all_merges[: len(only_length)]  # the length limit changes which pairs win


@pytest.mark.parametrize("chunk_size", [None, 257, 1000])
def test_the_job_on_a_cluster_follows_the_reference(client, tmp_path, chunk_size):
    path = tmp_path / "stories.txt"
    path.write_bytes(STORIES.encode("utf-8"))
    got = train_bpe(path, STORY_VOCAB, [EOT], client=client, chunk_size=chunk_size, **STORY_OPTIONS)
    assert got == reference.train([STORIES], STORY_VOCAB, [EOT], **STORY_OPTIONS)


def test_the_merge_on_a_worker_and_its_report(client, tmp_path):
    path = tmp_path / "stories.txt"
    path.write_bytes(STORIES.encode("utf-8"))
    report = train(path, STORY_VOCAB, str(tmp_path / "out"), [EOT], client=client, merge_on="worker",
                   chunk_size=700, **STORY_OPTIONS)  # fmt: skip
    _, want = reference.train([STORIES], STORY_VOCAB, [EOT], **STORY_OPTIONS)
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == want
    assert report["merge_ran_on"] == "worker"
    assert (report["min_frequency"], report["max_token_length"]) == (5, 4)
    assert report["stopped_by"] == "min_frequency" and report["num_merges"] == len(want)
    assert json.loads((tmp_path / "out" / "report.json").read_text())["stopped_by"] == "min_frequency"


def test_a_stop_by_max_token_length_is_said_without_alarm(tmp_path, caplog):
    path = tmp_path / "in.txt"
    path.write_text("low low low low low lower lower widest widest widest newest " * 6, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="bpe_dask"):
        _, merges = train_bpe(path, 1000, [], max_token_length=3)
    assert merges == reference.train([path.read_text(encoding="utf-8")], 1000, [], max_token_length=3)[1]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    said = f"stopped at {len(merges)} merges: every pair left would make a token longer than "
    assert f"{said}max_token_length=3" in caplog.text  # the Python API names its keyword
    flags = ("--vocab-size", "1000", "--max-token-length", "3", "--out", "o")
    done = run("train", "in.txt", *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{said}--max-token-length 3" in done.stderr  # the command line names its flag
    assert "WARNING" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_frequency": -1}, "min_frequency must be a whole number, 0 or more, got -1"),
        ({"min_frequency": 2.5}, "min_frequency must be a whole number"),
        ({"max_token_length": 0}, "max_token_length must be a positive whole number of bytes, got 0"),
        ({"max_token_length": True}, "max_token_length must be a positive whole number"),
    ],
)
def test_bad_values_are_refused_by_the_api(tmp_path, options, message):
    with pytest.raises(BpeDaskError, match=message):
        train_bpe(tmp_path / "never-read.txt", 300, [], **options)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd)


def test_the_command_line_flags_and_config_keys(tmp_path):
    (tmp_path / "stories.txt").write_bytes(STORIES.encode("utf-8"))
    (tmp_path / "job.toml").write_text("max-token-length = 4\n", encoding="utf-8")
    done = run("train", "stories.txt", "--vocab-size", str(STORY_VOCAB), "--special-token", EOT,
               "--min-frequency", "5", "--config", "job.toml", "--out", "out", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    _, want = reference.train([STORIES], STORY_VOCAB, [EOT], **STORY_OPTIONS)
    assert read_reference_merges(tmp_path / "out" / "merges.txt") == want
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (report["min_frequency"], report["max_token_length"], report["stopped_by"]) == (
        5,
        4,
        "min_frequency",
    )
    assert f"stopped at {len(want)} merges: the most frequent pair of at most 4 bytes occurs 4 times, " \
           "under --min-frequency 5" in done.stderr  # fmt: skip
    assert "hold pairs for only" not in done.stderr  # no warning: the user asked for it


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "in.txt", "--min-frequency", "lots"], "--min-frequency: not a whole number: 'lots'"),
        (
            ["merge", "counts.parquet", "--max-token-length", "0"],
            "--max-token-length: must be a positive number",
        ),
    ],
)
def test_a_bad_flag_is_one_line(tmp_path, args, message):
    done = run(*args, "--vocab-size", "300", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2  # a value not of its kind: a usage error, as argparse exits
    assert done.stderr.startswith(f"bpe-dask: error: {message}") and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "out").exists()
