"""Object storage and a real cluster: S3 (moto) and `dask scheduler` / `dask worker` subprocesses."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import commands
import corpus
import pytest
import servers

from bpe_dask import train_bpe
from conftest import gpt2_decode

pytest.importorskip("s3fs")
pytest.importorskip("moto")

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent
VOCAB_SIZE = 256 + 1 + 120


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory) -> str:
    with servers.dask_cluster(2, cwd=str(tmp_path_factory.mktemp("cluster"))) as address:
        yield address


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {
        "a.txt": corpus.words_corpus(31, 8000),
        "b.txt.gz": corpus.mixed_corpus(32, 15),
        "c.txt": corpus.words_corpus(33, 3000, special=None) + "tail without newline",
    }


@pytest.fixture(scope="module")
def bucket(s3, texts) -> str:
    s3.mkdir("corpus")
    for name, text in texts.items():
        data = text.encode()
        s3.pipe_file(f"corpus/in/{name}", gzip.compress(data) if name.endswith(".gz") else data)
    return "corpus"


@pytest.fixture(scope="module")
def local_merges(texts, tmp_path_factory) -> list[tuple[bytes, bytes]]:
    """The same text as local files, trained in-process: what every remote run must reproduce."""
    folder = tmp_path_factory.mktemp("local")
    paths = []
    for name, text in sorted(texts.items()):
        path = folder / name.removesuffix(".gz")
        path.write_bytes(text.encode())
        paths.append(path)
    return train_bpe(paths, VOCAB_SIZE, [EOT])[1]


def run_cli(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd, environment=env)


def client_env(endpoint: str | None = None) -> dict[str, str]:
    env = {**servers.env_without_aws(), **servers.S3_ENV}
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def s3_merges(s3, prefix: str) -> list[tuple[bytes, bytes]]:
    s3.invalidate_cache()
    lines = s3.cat_file(f"{prefix}/merges.txt").decode().splitlines()
    return [tuple(gpt2_decode(t) for t in line.split(" ")) for line in lines]


def test_s3_inputs_and_outputs_on_a_subprocess_cluster(
    s3, bucket, endpoint, scheduler, local_merges, tmp_path
):
    done = run_cli(
        "train", f"s3://{bucket}/in/*", "--vocab-size", str(VOCAB_SIZE), "--special-token", EOT,
        "--out", f"s3://{bucket}/out", "--work-dir", f"s3://{bucket}/work", "--chunk-size", "16KiB",
        "--scheduler", scheduler,
        env=client_env(endpoint), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert s3_merges(s3, f"{bucket}/out") == local_merges
    assert sorted(p.rsplit("/", 1)[-1] for p in s3.ls(f"{bucket}/out")) == [
        "_SUCCESS", "compression.csv", "compression.png", "merges.txt", "report.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer.tiktoken", "tokenizer_config.json",
        "vocab.json",
    ]  # fmt: skip
    report = json.loads(s3.cat_file(f"{bucket}/out/report.json"))
    assert report["merge_ran_on"] == "worker"
    assert report["partitions"] > 3
    assert len(report["inputs"]) == 3
    assert s3.ls(f"{bucket}/work/shards")  # the shards stay in the work directory for a re-run


def test_storage_options_flag_instead_of_the_environment(
    s3, bucket, endpoint, scheduler, local_merges, tmp_path
):
    options = json.dumps({"endpoint_url": endpoint})
    done = run_cli(
        "train", f"s3://{bucket}/in/a.txt", f"s3://{bucket}/in/b.txt.gz", f"s3://{bucket}/in/c.txt",
        "--vocab-size", str(VOCAB_SIZE), "--special-token", EOT, "--out", str(tmp_path / "out"),
        "--storage-options", options, "--scheduler", scheduler, "--merge-on", "client", "-q",
        env=client_env(), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "out" / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert [tuple(gpt2_decode(t) for t in line.split(" ")) for line in lines] == local_merges
    assert json.loads((tmp_path / "out" / "report.json").read_text())["merge_ran_on"] == "client"


def test_count_to_s3_then_merge_from_s3(s3, bucket, endpoint, scheduler, local_merges, tmp_path):
    env = client_env(endpoint)
    counted = run_cli(
        "count", f"s3://{bucket}/in/", "--special-token", EOT, "--out", f"s3://{bucket}/counts.parquet",
        "--scheduler", scheduler, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert counted.returncode == 0, counted.stderr
    merged = run_cli(
        "merge", f"s3://{bucket}/counts.parquet", "--vocab-size", str(VOCAB_SIZE), "--special-token", EOT,
        "--out", f"s3://{bucket}/merged", env=env, cwd=tmp_path,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    assert s3_merges(s3, f"{bucket}/merged") == local_merges


def test_python_api_reads_s3_on_a_remote_cluster(bucket, endpoint, scheduler, local_merges, monkeypatch):
    from distributed import Client

    for name, value in servers.S3_ENV.items():
        monkeypatch.setenv(name, value)
    with Client(scheduler) as client:
        _, merges = train_bpe(
            f"s3://{bucket}/in/*", VOCAB_SIZE, [EOT], client=client, chunk_size=50_000,
            storage_options={"endpoint_url": endpoint},
        )  # fmt: skip
    assert merges == local_merges


# --- failures: one clear line ------------------------------------------------------------------


def assert_one_line_error(done: subprocess.CompletedProcess, *fragments: str) -> str:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpe-dask: error: "), done.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def test_encode_s3_inputs_to_s3_shards_on_a_subprocess_cluster(
    s3, bucket, endpoint, scheduler, texts, tmp_path
):
    import io

    import numpy as np

    from bpe_dask import Tokenizer

    vocab, merges = train_bpe([tmp_path_file(tmp_path, texts["a.txt"])], VOCAB_SIZE, [EOT])
    files = Tokenizer(vocab, merges, [EOT]).files()
    for name, text in files.items():
        s3.pipe_file(f"corpus/tok/{name}", text.encode())
    done = run_cli(
        "encode", "s3://corpus/in/*", "--tokenizer", "s3://corpus/tok", "--out", "s3://corpus/ids",
        "--scheduler", scheduler, "--chunk-size", "8KiB", "-q", env=client_env(endpoint), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    s3.invalidate_cache()
    index = json.loads(s3.cat_file("corpus/ids/index.json"))
    assert s3.exists("corpus/ids/_SUCCESS") and len(index["shards"]) > 3
    shards = [s3.cat_file(f"corpus/ids/{entry['shard']}") for entry in index["shards"]]
    ids = np.concatenate([np.load(io.BytesIO(data)) for data in shards])
    tokenizer = Tokenizer(vocab, merges, [EOT])
    want = [i for name in sorted(texts) for i in tokenizer.encode(texts[name])]
    assert ids.tolist() == want
    assert tokenizer.decode(ids.tolist()) == "".join(texts[name] for name in sorted(texts))

    # One flat .bin streamed into the store by the cluster; a second run reuses the shards.
    reports = []
    for out in ("s3://corpus/ids.bin", "s3://corpus/again.bin"):
        done = run_cli(
            "encode", "s3://corpus/in/*", "--tokenizer", "s3://corpus/tok", "--out", out,
            "--work-dir", "s3://corpus/work", "--scheduler", scheduler, "--chunk-size", "8KiB", "-q",
            env=client_env(endpoint), cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        s3.invalidate_cache()
        reports.append(json.loads(s3.cat_file(out.removeprefix("s3://") + ".json")))
        assert np.frombuffer(s3.cat_file(out.removeprefix("s3://")), dtype=np.uint16).tolist() == want
    assert reports[0]["shards_computed"] == reports[1]["shards_reused"] == reports[1]["shards"] > 3
    assert reports[1]["dtype"] == "uint16" and reports[1]["tokens"] == len(want)


def tmp_path_file(folder: Path, text: str) -> Path:
    path = folder / "train.txt"
    path.write_bytes(text.encode())
    return path


def test_wrong_endpoint_is_one_line(tmp_path):
    port = servers.free_port()  # nothing listens there
    # botocore tries a refused connection 5 times, backing off at random: 4-13 s. Twice here.
    env = {**client_env(f"http://127.0.0.1:{port}"), "AWS_MAX_ATTEMPTS": "2"}
    done = run_cli(
        "train", "s3://corpus/in/*", "--vocab-size", "300", "--out", str(tmp_path / "out"), "-q",
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(done, "s3://corpus/in/*")
    assert not (tmp_path / "out").exists()


def test_missing_bucket_is_one_line(endpoint, bucket, tmp_path):
    done = run_cli(
        "train", "s3://no-such-bucket/x.txt", "--vocab-size", "300", "--out", str(tmp_path / "out"), "-q",
        env=client_env(endpoint), cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(done, "s3://no-such-bucket/x.txt")


def test_bad_credentials_are_one_line(tmp_path):
    with servers.s3_server(enforce_auth=True) as strict_endpoint:  # rejects the "testing" keys
        done = run_cli(
            "train", "s3://corpus/in/a.txt", "--vocab-size", "300", "--out", str(tmp_path / "out"), "-q",
            env=client_env(strict_endpoint), cwd=tmp_path,
        )  # fmt: skip
    assert_one_line_error(done, "s3://corpus/in/a.txt")
    assert not (tmp_path / "out").exists()


def test_unreachable_scheduler_is_one_line(tmp_path):
    (tmp_path / "in.txt").write_text("some text")
    address = f"tcp://127.0.0.1:{servers.free_port()}"
    done = run_cli(
        "train", "in.txt", "--vocab-size", "300", "--out", "out", "--scheduler", address, "-q",
        env=client_env(), cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(done, "cannot reach the Dask scheduler", address)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_a_worker_without_s3fs_is_named(bucket, endpoint, tmp_path):
    with servers.dask_cluster(1, cwd=str(tmp_path), without="s3fs") as address:
        done = run_cli(
            "train", f"s3://{bucket}/in/*", "--vocab-size", "300", "--out", str(tmp_path / "out"),
            "--scheduler", address, "-q", env=client_env(endpoint), cwd=tmp_path,
        )  # fmt: skip
    line = assert_one_line_error(done, "1 of 1 workers cannot run this job", "lacks s3fs", "install")
    assert "tcp://127.0.0.1:" in line
    assert not (tmp_path / "out").exists()


def test_a_worker_without_bpe_dask_is_named_and_ship_package_fixes_it(tmp_path):
    (tmp_path / "in.txt").write_text(corpus.words_corpus(7, 2000))
    with servers.dask_cluster(1, cwd=str(tmp_path), without_bpe_dask=True) as address:
        args = ["train", "in.txt", "--vocab-size", "300", "--out", "out", "--scheduler", address, "-q"]
        done = run_cli(*args, env=client_env(), cwd=tmp_path)
        assert_one_line_error(done, "lacks bpe_dask", "--ship-package")
        shipped = run_cli(*args, "--ship-package", env=client_env(), cwd=tmp_path)
    assert shipped.returncode == 0, shipped.stderr
    _, want = train_bpe(tmp_path / "in.txt", 300)
    lines = (tmp_path / "out" / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert [tuple(gpt2_decode(t) for t in line.split(" ")) for line in lines] == want


def test_an_unwritable_s3_out_is_one_line_before_any_work(endpoint, bucket, tmp_path):
    (tmp_path / "in.txt").write_text(corpus.words_corpus(8, 2000))
    for command in (["train", "in.txt", "--vocab-size", "300"], ["count", "in.txt"]):
        done = run_cli(
            *command, "--out", "s3://no-such-bucket/result", "--workers", "1",
            env=client_env(endpoint), cwd=tmp_path,
        )  # fmt: skip
        assert_one_line_error(done, "cannot write the output s3://no-such-bucket/result")
        assert "LocalCluster" not in done.stderr  # found before any work


def test_credentials_from_the_environment_stay_out_of_reprs_and_reports(s3, bucket, endpoint, monkeypatch):
    from bpe_dask import count_words

    secret = "not-a-secret-but-treated-as-one"
    for name, value in {**servers.S3_ENV, "AWS_SECRET_ACCESS_KEY": secret}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(
        Exception
    ) as refused:  # moto takes any key id but checks nothing: use a wrong endpoint
        count_words(f"s3://{bucket}/in/a.txt", storage_options={"endpoint_url": "http://127.0.0.1:9"})
    assert secret not in str(refused.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    result = count_words(f"s3://{bucket}/in/a.txt", storage_options={"endpoint_url": endpoint})
    assert "secret" not in result.store.options  # not shipped to tasks unless asked for
    shipped = count_words(f"s3://{bucket}/in/a.txt", storage_options={"endpoint_url": endpoint},
                          ship_credentials=True)  # fmt: skip
    assert shipped.store.options["secret"] == "testing"  # the job did take the environment's secret
    assert "testing" not in repr(shipped).replace("pytest", "")


def test_parquet_and_json_lines_on_s3_train_as_the_joined_text(s3, endpoint, scheduler, tmp_path):
    """Documents in Parquet and JSON Lines (plain, cut into ranges, and zstd) read from S3 by a
    subprocess cluster give the merges of their text joined by the special token."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    docs = [*corpus.mixed_corpus(41, 60).split(EOT), "ab<|endof", "text|>cd", ""]
    parts = [docs[:25], docs[25:45], docs[45:]]
    s3.mkdir("records")
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": range(len(parts[0])), "text": parts[0]}), buffer, row_group_size=4)
    s3.pipe_file("records/in/a.parquet", buffer.getvalue())
    lines = ["".join(json.dumps({"text": d}) + "\n" for d in part).encode() for part in parts[1:]]
    s3.pipe_file("records/in/b.jsonl", lines[0])
    s3.pipe_file("records/in/c.jsonl.zst", zstandard.ZstdCompressor().compress(lines[1]))
    done = run_cli(
        "train", "s3://records/in/", "--vocab-size", str(VOCAB_SIZE), "--special-token", EOT,
        "--out", "s3://records/out", "--chunk-size", "2KiB", "--scheduler", scheduler, "-q",
        env=client_env(endpoint), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = train_bpe_reference(EOT.join(docs))
    assert s3_merges(s3, "records/out") == expected
    report = json.loads(s3.cat_file("records/out/report.json"))
    assert report["partitions"] > 5 and len(report["inputs"]) == 3


def train_bpe_reference(text: str) -> list[tuple[bytes, bytes]]:
    from bpe_dask.rules import reference

    return reference.train([text], VOCAB_SIZE, [EOT])[1]


def test_workers_without_credentials_are_named_and_ship_credentials_sends_the_clients(
    s3, bucket, endpoint, local_merges, tmp_path
):
    """The client's credentials stay on the client unless asked for: workers that have none of
    their own are named before any work, and --ship-credentials sends the client's."""
    args = ("train", f"s3://{bucket}/in/*", "--vocab-size", str(VOCAB_SIZE), "--special-token", EOT,
            "--out", str(tmp_path / "tok"), "--work-dir", f"s3://{bucket}/work-nocreds", "-q")  # fmt: skip
    (tmp_path / "cluster").mkdir()
    with servers.dask_cluster(1, cwd=str(tmp_path / "cluster"), credentials=False) as address:
        refused = run_cli(*args, "--scheduler", address, env=client_env(endpoint), cwd=tmp_path)
        shipped = run_cli(*args, "--scheduler", address, "--ship-credentials", env=client_env(endpoint),
                          cwd=tmp_path)  # fmt: skip
    line = assert_one_line_error(refused, "cannot see the input s3://", "--ship-credentials")
    assert "testing" not in line
    assert shipped.returncode == 0, shipped.stderr
    lines = (tmp_path / "tok" / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert [tuple(gpt2_decode(t) for t in line.split(" ")) for line in lines] == local_merges
