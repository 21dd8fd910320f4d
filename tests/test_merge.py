"""The merge loop against the reference trainer on random word tables built to provoke ties and repeats."""

from __future__ import annotations

import os
import random
import weakref

import corpus
import numpy as np
import pyarrow as pa
import pytest
import timing

from bpe_dask.rules.reference import train_on_counts
from bpe_dask.stages.merge import train_merges

try:
    import numba  # noqa: F401

    NUMBA = True
except ImportError:
    NUMBA = False

# Few symbols, some of them prefixes of each other's merges: many equal counts, so the
# tie-break decides; runs like b"aaaa" test overlapping pairs.
ALPHABET = [b"a", b"b", b"\x00", b"\xff"]


def random_words(rng: random.Random) -> dict[bytes, int]:
    symbols = rng.sample(ALPHABET, rng.randint(1, 4))
    words: dict[bytes, int] = {}
    for _ in range(rng.randint(1, 12)):
        word = b"".join(rng.choice(symbols) for _ in range(rng.randint(1, 9)))
        words[word] = words.get(word, 0) + rng.choice([1, 1, 2, 3, 5, 100])
    return words


ENGINES = ["python", pytest.param("numba", marks=pytest.mark.skipif(not NUMBA, reason="numba not installed"))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("block", range(10))
def test_random_tables_merge_like_the_oracle(block, engine):
    for seed in range(block * 300, (block + 1) * 300):
        rng = random.Random(seed)
        words = random_words(rng)
        specials = rng.choice([[], ["<s>"], ["ab", "abc"]])
        vocab_size = 256 + len(specials) + rng.randint(0, 30)
        got = train_merges(list(words.items()), vocab_size, specials, engine=engine)
        assert got == train_on_counts(words, vocab_size, specials), (seed, words)


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_both_engines_agree_on_a_real_corpus(tmp_path):
    from bpe_dask import count_words

    path = tmp_path / "in.txt"
    path.write_text(
        corpus.words_corpus(41, 40_000, vocab_words=3000) + corpus.mixed_corpus(42, 30), encoding="utf-8"
    )
    table = count_words(path, ["<|endoftext|>"]).table()
    words = list(zip(table.column("token").to_pylist(), table.column("count").to_pylist(), strict=True))
    python = train_merges(words, 1500, ["<|endoftext|>"], engine="python")
    assert train_merges(words, 1500, ["<|endoftext|>"], engine="numba") == python
    assert len(python[1]) == 1500 - 257


def test_progress_reports_every_merge():
    seen: list[int] = []
    _, merges = train_merges([(b"abcabc", 3), (b"abd", 1)], 256 + 4, progress=seen.append)
    assert seen == list(range(1, len(merges) + 1))


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_vocabularies_past_65535_tokens_hold_ids_as_int32_and_merge_like_the_python_loop():
    """The compiled loop's records hold token ids as uint16 up to 65,535 tokens (0xFFFF ends a
    word) and as int32 beyond: across the boundary, both learn what the Python loop learns."""
    from bpe_dask.stages.merge import laid_out

    rng = random.Random(7)
    words: dict[bytes, int] = {}
    for _ in range(3000):  # random bytes: few repeated pairs, so ties all the way, and 88K merges to make
        word = bytes(rng.randrange(256) for _ in range(rng.randint(2, 60)))
        words[word] = rng.choice([1, 1, 2, 3, 7])
    python = train_merges(list(words.items()), 65_800, engine="python")
    assert len(python[0]) == 65_800
    assert laid_out(list(words.items()), 65_536, "numba").records.dtype == np.int32
    for vocab_size, kind in ((65_535, np.uint16), (65_800, np.int32)):
        laid = laid_out(list(words.items()), vocab_size, "numba")
        assert laid.records.dtype == kind
        vocab, merges = train_merges(laid, vocab_size, engine="numba")
        assert merges == python[1][: vocab_size - 256], vocab_size
        assert vocab == {i: token for i, token in python[0].items() if i < vocab_size}


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_words_laid_out_serve_one_merge_at_the_size_they_were_laid_out_for():
    """A merge takes the records it is given and merges them in place; records of uint16 ids cannot
    hold a larger vocabulary's. Either misuse is refused, rather than reading what is not there."""
    from bpe_dask.stages.merge import laid_out

    pairs = [(b"low", 5), (b"lower", 2), (b"newest", 6)]
    laid = laid_out(pairs, 300, "numba")
    with pytest.raises(ValueError, match="another vocabulary size"):
        train_merges(laid, 70_000, engine="numba")
    assert train_merges(laid, 300, engine="numba") == train_on_counts(dict(pairs), 300, [])
    with pytest.raises(ValueError, match="merged already"):
        train_merges(laid, 300, engine="numba")


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_a_table_read_for_the_compiled_loop_is_let_go_before_it_merges():
    """``merge_table`` given what reads the counts holds the table only until its words are laid
    out: the loop's memory is the table's, the 100-million-word merge node's whole point."""
    from bpe_dask.jobs.merging import Goal, merge_table

    words = random_words(random.Random(3)) | {b"low lower lowest": 5}
    read: list[weakref.ref] = []

    def reading() -> pa.Table:
        table = pa.table({"token": pa.array(list(words), pa.binary()), "count": list(words.values())})
        read.append(weakref.ref(table))
        return table

    alive: list[bool] = []
    watch = lambda _: alive.append(read[0]() is not None)  # noqa: E731
    merged = merge_table(reading, Goal(256 + 12, engine="numba"), watch)
    assert alive and not any(alive)
    assert (merged.vocab, merged.merges) == train_on_counts(words, 256 + 12, [])


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_long_words_over_few_letters_squeeze_and_grow_the_holder_pool_and_merge_like_the_oracle(monkeypatch):
    """Words of up to 30 letters over two to six: many pairs held by many words, so the compiled
    loop's pool of holder lists fills, is squeezed and outgrows its room, which small tables of
    short words never make it do."""
    from bpe_dask.compiled import merge_loop
    from bpe_dask.compiled.merge_state import BATCH_TAKES, POOL_USED

    seen = {"squeezed": 0, "grown": 0}
    merge_batch = merge_loop._merge_batch
    takes = BATCH_TAKES.split()

    def watched(*args):
        pool, uses = args[takes.index("pool")], args[takes.index("uses")]
        used = int(uses[POOL_USED])  # the batch updates ``uses`` in place
        done = merge_batch(*args)
        seen["grown"] += done[2] is not pool  # a new pool
        seen["squeezed"] += uses[POOL_USED] < used  # its use fell: a squeeze
        return done

    monkeypatch.setattr(merge_loop, "_merge_batch", watched)
    for seed in range(40):
        rng = random.Random(seed)
        letters = [bytes([c]) for c in rng.sample(range(97, 123), rng.randint(2, 6))]
        words: dict[bytes, int] = {}
        for _ in range(rng.randint(5, 60)):
            word = b"".join(rng.choice(letters) for _ in range(rng.randint(2, 30)))
            words[word] = words.get(word, 0) + rng.choice([1, 2, 3, 50])
        vocab_size = 256 + rng.randint(10, 200)
        got = train_merges(list(words.items()), vocab_size, engine="numba")
        assert got == train_on_counts(words, vocab_size, []), seed
    assert seen["squeezed"] and seen["grown"], seen


def test_a_training_job_warms_the_merge_loop_for_its_own_records_only():
    """Each record width (uint16 ids, int32 past 65,535 tokens) is a version of the loop that takes
    seconds to compile: ``train`` warms the one its vocabulary size merges with."""
    import subprocess
    import sys

    script = (
        "from bpe_dask.stages.compile_ahead import compile_merge_loop_in_background\n"
        "from bpe_dask.compiled.merge_loop import _merge_batch\n"
        "compile_merge_loop_in_background('numba', None, {size}).join()\n"
        "print([str(sig[0].dtype) for sig in _merge_batch.signatures])\n"
    )
    for size, width in ((1000, "uint16"), (70_000, "int32")):
        command = [sys.executable, "-c", script.format(size=size)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timing.seconds(300))
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [f"['{width}']"], (size, done.stdout, done.stderr)


def test_a_training_job_compiles_its_merge_loop_in_a_process_of_its_own(tmp_path):
    """numba compiles one function at a time in a process, and the embedded cluster's workers compile
    their counting loop in the job's: the merge loop is compiled by a second process, on another core,
    into numba's cache, and the job's process loads it from there, compiling none of it itself. The
    second process imports the job's own bpe_dask, whatever folder the job runs in (here one with
    another ``bpe_dask`` in it, as a source checkout beside an installed package), and ends well."""
    import json
    import subprocess
    import sys

    job = tmp_path / "job.py"
    job.write_text(
        "import json, logging\n"
        "logging.basicConfig()\n"
        "logging.getLogger('bpe_dask.stages.compile_ahead').setLevel(logging.DEBUG)  # says if it failed\n"
        "from bpe_dask.stages.compile_ahead import compile_merge_loop_in_background\n"
        "from bpe_dask.compiled.cache import cache_use, cached_versions\n"
        "from bpe_dask.compiled.merge_loop import _merge_batch\n"
        "from bpe_dask.compiled.sum_sorted import _merge_two\n"
        "compile_merge_loop_in_background('numba', None, 1000).join()\n"
        "use = cache_use()\n"
        "widths = [str(sig[0].dtype) for sig in _merge_batch.signatures]\n"
        "reduce = len(cached_versions(_merge_two))\n"
        "use = {'compiled': use.compiled, 'loaded': use.loaded, 'widths': widths, 'reduce': reduce}\n"
        "print(json.dumps(use))\n"
    )
    elsewhere = tmp_path / "checkout"
    (elsewhere / "bpe_dask").mkdir(parents=True)
    (elsewhere / "bpe_dask" / "__init__.py").write_text("raise ImportError('another bpe_dask')\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}  # empty: nothing to load yet
    done = subprocess.run(
        [sys.executable, str(job)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=env,
        timeout=timing.seconds(300),
    )
    assert done.returncode == 0, done.stderr
    assert "failed" not in done.stderr, done.stderr
    use = json.loads(done.stdout)
    assert use["compiled"] == [], use
    assert "bpe_dask.compiled.merge_loop._merge_batch" in use["loaded"], use
    assert use["reduce"] > 0, use  # the reduce's sum is in the cache too, for the job's reduce tasks
    assert use["widths"] == ["uint16"], use


def test_the_process_compiling_ahead_ends_with_the_job(tmp_path):
    """Whatever ends the job's process (here SIGKILL, which runs no handler of its), the process
    compiling ahead for it ends too, rather than compiling on for a job that is gone."""
    import signal
    import subprocess
    import sys

    import psutil

    script = (
        "import time, psutil\n"
        "from bpe_dask.stages.compile_ahead import compile_merge_loop_in_background\n"
        "compile_merge_loop_in_background('numba', None, 1000)\n"
        "while not psutil.Process().children():\n"
        "    time.sleep(0.05)\n"
        "print(psutil.Process().children()[0].pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    job = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        compiling = psutil.Process(int(job.stdout.readline()))
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()
    compiling.wait(timeout=timing.seconds(120))  # raises psutil.TimeoutExpired if it compiles on
    # Ended with the job, seconds before it could have saved the merge loop, which it compiles last.
    assert not list((tmp_path / "numba").rglob("merge_loop._merge_batch-*.nbi"))


@pytest.mark.skipif(not NUMBA, reason="numba not installed")
def test_train_lets_the_reduced_table_go_before_its_merge_loop_runs(tmp_path, monkeypatch):
    """``train`` merging here hands the reduce's table to the merge rather than keeping it for the
    whole loop: at 100 million words the table is gigabytes the loop's own records replace."""
    from bpe_dask.jobs import counting as counting_stage
    from bpe_dask.jobs import merging, train

    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("low lower lowest newest widest<|endoftext|>the cat sat on the mat" * 40)
    counted: list[weakref.ref] = []
    count_on_cluster, merge_table = counting_stage.count_on_cluster, merging.merge_table

    def counting(*args, **kwargs):
        result = count_on_cluster(*args, **kwargs)
        counted.append(weakref.ref(result.table()))
        return result

    alive: list[bool] = []

    def merging_with_a_watch(counts, goal, report):
        watch = lambda _: alive.append(counted[0]() is not None)  # noqa: E731
        return merge_table(counts, goal, watch)

    monkeypatch.setattr(counting_stage, "count_on_cluster", counting)
    monkeypatch.setattr(merging, "merge_table", merging_with_a_watch)
    train.train(str(corpus_file), 270, str(tmp_path / "tok"), ["<|endoftext|>"], workers=1, engine="numba",
                show_progress=False)  # fmt: skip
    assert counted and alive and not any(alive)
