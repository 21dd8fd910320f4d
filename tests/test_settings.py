"""Settings: the ``bpe-dask`` namespace of ``dask.config`` changes what it says it changes, from
``dask.config.set``, the environment, or a job's client (the tasks take the client's values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import corpus
import dask.config
import pytest
import timing

from bpe_dask import BpeDaskError, count_words
from bpe_dask.io.inputs import expand_inputs
from bpe_dask.io.plan import plan_ranges
from bpe_dask.io.storage import Store
from bpe_dask.io.text import iter_texts
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.files import partition_size

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def text_file(tmp_path) -> Path:
    path = tmp_path / "in.txt"
    path.write_bytes(corpus.words_corpus(11, 20_000).encode())
    return path


def blocks(path: Path, store: Store | None = None) -> list[str]:
    (byte_range,) = plan_ranges(expand_inputs([str(path)]), 1 << 40, Pretokenizer([EOT]))
    return list(iter_texts(byte_range, Pretokenizer([EOT]), *([store] if store else [])))


def test_the_defaults_are_registered():
    assert dask.config.get("bpe-dask.block-size") == "8MiB"
    assert dask.config.get("bpe-dask.retries") == 2
    assert set(dask.config.get("bpe-dask")) >= {"uncut-limit", "partition-min", "partition-max",
                                                "retry-pause", "pattern-timeout"}  # fmt: skip


def test_a_smaller_block_size_gives_more_blocks_and_the_same_text(text_file):
    whole = blocks(text_file)
    with dask.config.set({"bpe-dask.block-size": "4KiB"}):
        small = blocks(text_file)
    assert len(whole) <= 2 and len(small) > 10
    assert "".join(small) == "".join(whole) == text_file.read_bytes().decode("utf-8")
    assert max(len(block.encode()) for block in small) < 2 * 4096


def test_a_store_keeps_the_settings_it_was_made_with(text_file):
    """A job's ``Store`` takes the settings on the client, once: later changes, or another process's
    config, do not reach its tasks."""
    with dask.config.set({"bpe-dask.block-size": "4KiB"}):
        store = Store.for_job({}, [str(text_file)])
    assert len(blocks(text_file, store)) > 10
    assert store.settings["block-size"] == "4KiB" and "4KiB" not in repr(store)


def test_the_uncut_limit_stops_a_giant_pre_token(tmp_path):
    path = tmp_path / "letters.txt"
    path.write_text("a" * 50_000, encoding="utf-8")
    assert len("".join(blocks(path))) == 50_000
    limits = {"bpe-dask.uncut-limit": 10_000, "bpe-dask.block-size": 4096}
    with (
        dask.config.set(limits),
        pytest.raises(BpeDaskError, match="split the text in the 10,000 characters"),
    ):
        blocks(path)


def test_partition_bounds_and_tasks_per_thread():
    assert partition_size(100 * 2**20, 4) == 100 * 2**20 // 8
    with dask.config.set({"bpe-dask.partitions-per-thread": 1}):
        assert partition_size(100 * 2**20, 4) == 25 * 2**20
    with dask.config.set({"bpe-dask.partition-max": "2MiB"}):
        assert partition_size(100 * 2**20, 4) == 2 * 2**20
        assert partition_size(100 * 2**20, None) == 2 * 2**20
    with dask.config.set({"bpe-dask.partition-min": "64MiB"}):
        assert partition_size(2**20, 4) == 64 * 2**20


def test_the_in_process_limit_decides_where_a_small_input_is_counted(text_file, monkeypatch):
    """Below the limit the Python API counts in this process, with no cluster; above it, on one."""
    from bpe_dask.jobs import context

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(context, "dask_client", no_cluster)
    assert count_words(text_file, [EOT]).partitions == 1
    with (
        dask.config.set({"bpe-dask.in-process-limit": "1KiB"}),
        pytest.raises(AssertionError, match="cluster"),
    ):
        count_words(text_file, [EOT])


@pytest.mark.parametrize(
    ("name", "value"),
    [("block-size", "lots"), ("block-size", 0), ("retries", -1), ("retry-pause", "soon")],
)
def test_a_bad_setting_is_one_line_naming_it(text_file, name, value):
    with dask.config.set({f"bpe-dask.{name}": value}), pytest.raises(BpeDaskError, match=f"bpe-dask.{name}"):
        count_words(text_file, [EOT], in_process=True)


def test_the_environment_sets_them_as_dask_does():
    code = "import bpe_dask, dask.config; print(dask.config.get('bpe-dask.block-size'))"
    env = {**os.environ, "DASK_BPE_DASK__BLOCK_SIZE": "1MiB", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=timing.seconds(120))  # fmt: skip
    assert done.stdout.strip() == "1MiB"
