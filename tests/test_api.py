"""The Python API's contract beyond CS336's: option checks, and jobs sharing one cluster."""

from __future__ import annotations

import threading

import corpus
import pytest
from distributed import Client, LocalCluster

from bpe_dask import BpeDaskError, count_words, formats, train_bpe

EOT = "<|endoftext|>"


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(corpus.words_corpus(9, 3000), encoding="utf-8")
    return path


def test_a_bare_string_of_special_tokens_is_refused(text_file):
    with pytest.raises(BpeDaskError, match="list of strings"):
        train_bpe(text_file, 300, EOT)


def test_in_process_cannot_also_take_a_cluster(text_file):
    with pytest.raises(BpeDaskError, match="in_process=True"):
        count_words(text_file, [EOT], in_process=True, workers=2)


def test_a_special_token_that_reads_as_a_learned_token_is_caught_before_writing():
    vocab = {i: bytes([i]) for i in range(256)} | {256: "Ġthe".encode(), 257: b" the"}
    with pytest.raises(BpeDaskError, match="rename the special token"):
        formats.vocab_json(vocab, ["Ġthe"])


def test_concurrent_jobs_on_one_cluster_keep_their_own_shards(text_file, tmp_path):
    results: dict[str, object] = {}

    def job(name: str, client: Client) -> None:
        work = tmp_path / name
        results[name] = count_words(text_file, [EOT], client=client, chunk_size=4096, work_dir=str(work))

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as c,
    ):
        threads = [threading.Thread(target=job, args=(name, c)) for name in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    a, b = results["a"], results["b"]
    assert a.table().sort_by("token").equals(b.table().sort_by("token"))
    for name in ("a", "b"):
        shards = sorted(p.name for p in (tmp_path / name / "shards").iterdir())
        assert len(shards) == a.partitions  # each work directory holds its own complete set


def test_memory_urls_train_in_process_and_are_refused_by_worker_processes():
    import fsspec

    from bpe_dask import train_bpe

    text = corpus.words_corpus(12, 2000)
    fsspec.filesystem("memory").pipe("/bpe-dask-test/a.txt", text.encode())
    local = fsspec.filesystem("memory")
    assert local.cat("/bpe-dask-test/a.txt") == text.encode()
    _, merges = train_bpe("memory://bpe-dask-test/a.txt", 300, [EOT])
    assert len(merges) == 300 - 257
    with pytest.raises(BpeDaskError, match="cannot see the input memory://"):
        train_bpe("memory://bpe-dask-test/*.txt", 300, [EOT], workers=1)
