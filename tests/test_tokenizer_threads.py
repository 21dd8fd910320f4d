"""One ``Tokenizer`` shared by many threads (a thread pool, Dask worker threads) gives the ids one thread
gives: its merge tables are shared and read-only, its caches are the calling thread's own."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import corpus
import numpy as np
import pytest

from bpe_dask import Tokenizer, encode, train_bpe
from bpe_dask import tokenizer as tokenizer_module
from bpe_dask.compiled import Encoder

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    """A vocabulary per pattern, trained in process on words and multilingual text."""
    root = tmp_path_factory.mktemp("threads")
    training = root / "train.txt"
    training.write_bytes((corpus.words_corpus(31, 20_000) + corpus.mixed_corpus(32, 30)).encode())
    return {pattern: train_bpe(training, 256 + 1 + 500, [EOT], pattern=pattern, in_process=True)
            for pattern in ("gpt2", "gpt4")}  # fmt: skip


def varied_texts(count: int) -> list[str]:
    """Texts that differ from each other (so each thread keeps meeting pre-tokens another has not),
    with long runs (the compiled merge of long pre-tokens) and special tokens."""
    rng = random.Random(5)
    texts = []
    for k in range(count):
        text = corpus.words_corpus(100 + k, 6_000, vocab_words=2_000) + corpus.mixed_corpus(200 + k, 8)
        text += " " + rng.choice("ab=-") * rng.randint(300, 3000) + corpus.nasty_string(k, 2000)
        texts.append(text)
    return texts


@pytest.fixture
def small_caches(monkeypatch):
    """Caches small enough to grow and be emptied many times in a text, so threads do both under each
    other."""
    monkeypatch.setattr(Encoder, "first_entries", 16)
    monkeypatch.setattr(Encoder, "cache_entries", 64)
    monkeypatch.setattr(tokenizer_module, "CACHE_LIMIT", 64)


def _small_caches() -> None:
    """``small_caches``, in a worker's process."""
    from bpe_dask.compiled import Encoder

    Encoder.first_entries, Encoder.cache_entries = 16, 64


@pytest.mark.parametrize("engine", ["numba", "python"])
@pytest.mark.parametrize("pattern", ["gpt2", "gpt4"])
def test_threads_sharing_one_tokenizer_get_one_threads_ids(trained, small_caches, pattern, engine):
    vocab, merges = trained[pattern]
    # The Python engine compiles nothing to race to, only its caches are shared: fewer rounds suffice.
    texts, rounds = (varied_texts(24), 3) if engine == "numba" else (varied_texts(12), 2)
    alone = Tokenizer(vocab, merges, [EOT], pattern, engine)
    want = [alone.encode(text) for text in texts]
    with ThreadPoolExecutor(6) as pool:
        for _ in range(rounds):  # each time a new tokenizer, nothing compiled or cached: threads race
            shared = Tokenizer(vocab, merges, [EOT], pattern, engine)
            got = list(pool.map(shared.encode, texts))
            assert sum(a != b for a, b in zip(got, want, strict=True)) == 0
            arrays = list(pool.map(shared.encode_array, texts))
            assert all(a.tolist() == b for a, b in zip(arrays, want, strict=True))


def test_encode_on_worker_threads_writes_the_ids_of_one_thread(trained, tmp_path, small_caches):
    from distributed import Client, LocalCluster

    vocab, merges = trained["gpt2"]
    Tokenizer(vocab, merges, [EOT]).save(tmp_path / "tok")
    words = [corpus.words_corpus(300 + k, 30_000, vocab_words=8_000) for k in range(16)]
    texts = [a + b for a, b in zip(words, varied_texts(16), strict=True)]
    inputs = []
    for k, text in enumerate(texts):
        inputs.append(tmp_path / f"in{k}.txt")
        inputs[-1].write_text(text, encoding="utf-8", newline="")
    alone = Tokenizer.load(tmp_path / "tok", engine="numba")
    want = [i for text in texts for i in alone.encode(text)]  # a file's end ends a document
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address="127.0.0.1:0") as cluster,
        Client(cluster) as client,
    ):
        client.run(_small_caches)
        for run in range(2):  # each job sends the tokenizer afresh: nothing compiled or cached
            out = tmp_path / f"train{run}.bin"
            report = encode(inputs, str(tmp_path / "tok"), str(out), client=client, chunk_size=1 << 16,
                            engine="numba")  # fmt: skip
            assert report["shards"] > 8
            assert np.fromfile(out, dtype=report["dtype"]).tolist() == want


def test_shards_are_assembled_without_the_python_parser(trained, tmp_path, monkeypatch):
    """CPython 3.11's ``ast`` is not safe in two threads at once (python/cpython#106905): ``np.load``
    parses a ``.npy`` header with ``ast.literal_eval``, and two worker threads assembling a ``.bin``
    failed with "AST constructor recursion depth mismatch". The tasks must not parse Python at all."""
    import ast

    from distributed import Client, LocalCluster

    vocab, merges = trained["gpt2"]
    Tokenizer(vocab, merges, [EOT]).save(tmp_path / "tok")
    texts = varied_texts(4)
    inputs = []
    for k, text in enumerate(texts):
        inputs.append(tmp_path / f"in{k}.txt")
        inputs[-1].write_text(text, encoding="utf-8", newline="")
    want = [i for text in texts for i in Tokenizer.load(tmp_path / "tok").encode(text)]

    def refused(*args, **kwargs):
        raise AssertionError("ast.literal_eval called in a task")

    monkeypatch.setattr(ast, "literal_eval", refused)
    with (  # threads of this process: the refusal reaches the tasks
        LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        for run in range(2):  # the second run reuses the shards the first left in the work directory
            out = tmp_path / f"train{run}.bin"
            report = encode(inputs, str(tmp_path / "tok"), str(out), client=client, chunk_size=1 << 15,
                            work_dir=str(tmp_path / "work"))  # fmt: skip
            assert report["shards"] >= 4 and report["shards_reused"] == (report["shards"] if run else 0)
            assert np.fromfile(out, dtype=report["dtype"]).tolist() == want
