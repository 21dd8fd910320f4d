"""Manners on a shared cluster and with secrets: a job leaves nothing registered on workers that
outlive it, and no option value that may be a secret comes back in a message."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import cloudpickle
import corpus
import pytest
import servers
import timing

from bpe_dask import BpeDaskError, count_words, train_bpe

REPO = Path(__file__).resolve().parent.parent
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # worker_state runs on workers of elsewhere
SECRET = "s3cr3t-value-never-shown"


def worker_state(dask_worker) -> dict:
    return {
        "plugins": sorted(dask_worker.plugins),
        "filters": len(logging.getLogger("distributed.worker").filters),
    }


def test_a_job_leaves_no_plugin_on_a_cluster_that_outlives_it(tmp_path):
    from distributed import Client

    (tmp_path / "in.txt").write_text(corpus.words_corpus(41, 3_000), encoding="utf-8")
    (tmp_path / "cluster").mkdir()
    with servers.dask_cluster(1, cwd=str(tmp_path / "cluster")) as address, Client(address) as client:
        before = client.run(worker_state)
        _, merges = train_bpe(tmp_path / "in.txt", 300, client=client, work_dir=str(tmp_path / "work"))
        after = client.run(worker_state)
        # and the same through --scheduler, in another process
        done = subprocess.run(
            [sys.executable, "-m", "bpe_dask", "count", "in.txt", "--out", "c.parquet", "--scheduler",
             address],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
            timeout=timing.seconds(300),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        after_cli = client.run(worker_state)
    assert len(merges) == 300 - 256
    assert not any("bpe-dask" in name for state in before.values() for name in state["plugins"])
    assert after == before, after
    assert after_cli == before, after_cli


def test_a_job_on_our_own_local_cluster_does_register_its_plugin():
    """The check above can fail: during a job the plugin is there."""
    from distributed import Client, LocalCluster

    from bpe_dask.cluster.preflight import check_workers

    with (
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address="127.0.0.1:0") as cluster,
        Client(cluster) as client,
    ):
        names = check_workers(client)
        state = client.run(worker_state)
    [name] = names
    assert name.startswith("bpe-dask-quiet-user-errors-")
    assert all(name in s["plugins"] and s["filters"] >= 1 for s in state.values())


def test_two_jobs_on_one_cluster_each_take_their_own_plugin_off(caplog):
    """Both jobs' plugins had one name: the first job to end took off the one the second still ran
    with, and the second's, taking it off in turn, made the scheduler log a ValueError."""
    from distributed import Client, LocalCluster

    from bpe_dask.cluster.preflight import check_workers, unregister_plugins

    with (
        LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address="127.0.0.1:0") as cluster,
        Client(cluster) as client,
        caplog.at_level(logging.ERROR),
    ):
        first, second = check_workers(client), check_workers(client)
        unregister_plugins(client, first)  # the first job ends
        [state] = client.run(worker_state).values()
        assert set(second) <= set(state["plugins"]) and not set(first) & set(state["plugins"])
        assert state["filters"] >= 1  # the second job's workers still keep user errors quiet
        unregister_plugins(client, second)
        [state] = client.run(worker_state).values()
    assert not [name for name in state["plugins"] if name.startswith("bpe-dask")]
    # Errors only: Dask's own INFO line on registering a plugin reaches caplog wherever an earlier
    # test of the process left Dask's loggers at INFO.
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and "plugin" in r.getMessage().lower()]
    assert not errors, errors


@pytest.mark.parametrize(
    "storage_options",
    [[SECRET], SECRET, (("secret", SECRET),), 12345],
    ids=["list", "string", "tuple", "number"],
)
def test_storage_options_of_the_wrong_type_are_not_printed_back(storage_options, tmp_path):
    (tmp_path / "in.txt").write_text("text")
    with pytest.raises(BpeDaskError) as refused:
        count_words(tmp_path / "in.txt", storage_options=storage_options)
    assert SECRET not in str(refused.value) and "storage options must be a dict" in str(refused.value)


@pytest.mark.parametrize(
    "given",
    [json.dumps([SECRET]), json.dumps(SECRET), f'{{"secret": "{SECRET}"', SECRET],
    ids=["json-list", "json-string", "broken-json", "not-json"],
)
def test_a_bad_storage_options_flag_or_config_is_not_printed_back(given, tmp_path):
    (tmp_path / "in.txt").write_text("text")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    flag = subprocess.run(
        [sys.executable, "-m", "bpe_dask", "count", "in.txt", "--out", "c.parquet", "--storage-options",
         given],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timing.seconds(120),
    )  # fmt: skip
    (tmp_path / "job.toml").write_text(f"storage_options = {json.dumps(given)}\n")
    config = subprocess.run(
        [sys.executable, "-m", "bpe_dask", "count", "in.txt", "--out", "c.parquet", "--config", "job.toml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timing.seconds(120),
    )  # fmt: skip
    for done in (flag, config):
        assert done.returncode == 2, done.stderr  # an option not of its kind: a usage error
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert SECRET not in done.stderr and "storage" in done.stderr, done.stderr
