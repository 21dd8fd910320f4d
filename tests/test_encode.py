"""Distributed encoding: `.npy` shards that concatenate to `Tokenizer.encode` of the whole input."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import commands
import corpus
import numpy as np
import pytest
import timing

from bpe_dask import Tokenizer, encode, train_bpe

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parent.parent


def write_tokenizer(folder: Path, vocab, merges, special_tokens) -> Path:
    Tokenizer(vocab, merges, special_tokens).save(folder)
    return folder


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    training = folder / "train.txt"
    training.write_bytes((corpus.words_corpus(1, 20_000) + corpus.mixed_corpus(2, 20)).encode())
    vocab, merges = train_bpe(training, 256 + 1 + 400, [EOT])
    return write_tokenizer(folder / "tokenizer", vocab, merges, [EOT])


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {
        "a.txt": corpus.words_corpus(11, 15_000),
        "b.txt.gz": corpus.mixed_corpus(12, 15),
        "c.txt": corpus.nasty_string(13, 20_000) + "no newline at the end",
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, texts) -> list[Path]:
    folder = tmp_path_factory.mktemp("in")
    paths = []
    for name, text in texts.items():
        data = text.encode()
        (folder / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        paths.append(folder / name)
    return paths


def load_shards(out: Path) -> tuple[np.ndarray, dict]:
    index = json.loads((out / "index.json").read_text())
    names = sorted(p.name for p in out.glob("*.npy"))
    assert names == [entry["shard"] for entry in index["shards"]]  # sorted names follow the input order
    arrays = [np.load(out / name) for name in names]
    assert all(a.dtype == np.dtype(index["dtype"]) for a in arrays)
    assert [len(a) for a in arrays] == [entry["tokens"] for entry in index["shards"]]
    return np.concatenate(arrays), index


def whole_encoding(tokenizer_dir: Path, texts: dict[str, str]) -> list[int]:
    """Each file encoded whole (a file boundary ends a document), in input order, by the readable
    encoder."""
    vocab, merges = tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt"
    tokenizer = Tokenizer.from_files(vocab, merges, [EOT], engine="python")
    return [i for text in texts.values() for i in tokenizer.encode(text)]


@pytest.mark.parametrize("engine", ["python", "numba"])
def test_each_engine_gives_the_readable_encoders_ids(client, tokenizer_dir, inputs, texts, tmp_path, engine):
    out = tmp_path / "ids.bin"
    report = encode(inputs, str(tokenizer_dir), str(out), client=client, chunk_size=4096, engine=engine)
    assert report["format"] == "bin" and report["shards"] > 3
    assert np.fromfile(out, dtype=report["dtype"]).tolist() == whole_encoding(tokenizer_dir, texts)


@pytest.mark.parametrize("chunk_size", [700, 4096, 1 << 20])
def test_shards_concatenate_to_the_encoding_of_the_whole_input(
    client, tokenizer_dir, inputs, texts, tmp_path, chunk_size
):
    out = tmp_path / "ids"
    report = encode(inputs, str(tokenizer_dir), str(out), client=client, chunk_size=chunk_size)
    ids, index = load_shards(out)
    assert ids.tolist() == whole_encoding(tokenizer_dir, texts)
    tokenizer = Tokenizer.from_files(tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt", [EOT])
    assert tokenizer.decode(ids.tolist()) == "".join(texts.values())
    assert index["dtype"] == "uint16"
    assert report["tokens"] == len(ids) and report["shards"] == len(index["shards"])
    assert report["special_tokens"] == [EOT]  # read from the tokenizer's tokenizer.json
    assert report["text_bytes"] == sum(len(text.encode()) for text in texts.values())  # b.txt.gz unzipped
    assert report["text_bytes"] / report["tokens"] == pytest.approx(report["bytes_per_token"])
    if chunk_size == 700:
        assert report["shards"] > 20
    assert (out / "_SUCCESS").exists()


def test_ids_beyond_65535_are_written_as_uint32(client, tmp_path):
    vocab = {i: bytes([i]) for i in range(256)}
    vocab.update({256 + i: f"filler{i}".encode() for i in range(70_000)})  # never produced by a merge
    folder = write_tokenizer(tmp_path / "big", vocab, [(b"a", b"b")], [])
    text = "ab <|x|> abc " * 100
    (tmp_path / "in.txt").write_text(text)
    out = tmp_path / "ids"
    encode([tmp_path / "in.txt"], str(folder), str(out), ["<|x|>"], client=client, chunk_size=256)
    ids, index = load_shards(tmp_path / "ids")
    assert index["dtype"] == "uint32"
    special = max(vocab) + 1  # missing from the vocabulary, so appended
    assert ids.tolist().count(special) == 100
    assert Tokenizer(vocab, [(b"a", b"b")], ["<|x|>"]).encode(text) == ids.tolist()


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return commands.bpe_dask(*args, cwd=cwd)


def test_train_then_encode_on_the_command_line(tmp_path, texts, inputs):
    sample = tmp_path / "sample.txt"
    sample.write_bytes(texts["a.txt"].encode())
    done = run("train", "sample.txt", "--vocab-size", "400", "--special-token", EOT, "--out", "tok",
               "--workers", "1", "-q", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    args = ["encode", *map(str, inputs), "--tokenizer", "tok", "--out", "ids", "--workers", "2",
            "--chunk-size", "8KiB", "-q"]  # fmt: skip
    done = run(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ids, _ = load_shards(tmp_path / "ids")
    assert ids.tolist() == whole_encoding(tmp_path / "tok", texts)
    shards_before = len(list((tmp_path / "ids").glob("*.npy")))

    again = run(*args, cwd=tmp_path)
    assert again.returncode == 1 and "--overwrite" in again.stderr and len(again.stderr.splitlines()) == 1

    args[args.index("8KiB")] = "64MiB"  # fewer, bigger shards: none of the old ones may remain
    args.remove("-q")
    done = run(*args, "--overwrite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"writing a directory of .npy shards of uint16 token ids: {tmp_path}/ids\n" in done.stderr
    ids, index = load_shards(tmp_path / "ids")
    assert ids.tolist() == whole_encoding(tmp_path / "tok", texts)
    assert len(index["shards"]) == 3 < shards_before


def test_an_output_name_that_says_no_format_is_refused(tmp_path, inputs):
    """``--out x.ids`` used to become a directory of .npy shards without a word."""
    done = run("encode", str(inputs[0]), "--tokenizer", "nowhere", "--out", "x.ids", "-q", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "bpe-dask: error: cannot tell the output format from the name 'x.ids': give --format bin (one flat "
        "file of ids) or --format npy (a directory of .npy shards), or name it .bin"
    ]
    assert not (tmp_path / "x.ids").exists()


@pytest.mark.parametrize(
    ("out", "fmt", "said"),
    [
        ("j9.bin", "npy", "--format npy writes a directory of .npy shards, but --out {out} is named as one "
                          "flat file of ids: drop the .bin, or give --format bin"),
        ("j9.npy", "bin", "--format bin writes one flat file of ids, which np.load cannot read, but --out "
                          "{out} is named as a .npy array: name it .bin, or give --format npy (a directory "
                          "of .npy shards)"),
    ],
)  # fmt: skip
def test_a_format_the_output_name_contradicts_is_refused(tmp_path, tokenizer_dir, inputs, out, fmt, said):
    """``--format npy --out j9.bin`` silently made a directory named j9.bin."""
    done = run("encode", str(inputs[0]), "--tokenizer", str(tokenizer_dir), "--out", out, "--format", fmt,
               "-q", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [f"bpe-dask: error: {said.format(out=tmp_path / out)}"]
    assert list(tmp_path.iterdir()) == []


def test_a_tokenizer_json_is_taken_as_evaluate_takes_it(client, tokenizer_dir, inputs, texts, tmp_path):
    """``encode --tokenizer DIR/tokenizer.json`` failed with ``Not a directory`` while ``evaluate``
    took that file: both find a tokenizer the same way."""
    done = run("encode", *map(str, inputs), "--tokenizer", str(tokenizer_dir / "tokenizer.json"),
               "--out", "ids.bin", "--workers", "1", "-q", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert np.fromfile(tmp_path / "ids.bin", np.uint16).tolist() == whole_encoding(tokenizer_dir, texts)
    sidecar = json.loads((tmp_path / "ids.bin.json").read_text())
    assert sidecar["tokenizer"] == str(tokenizer_dir / "tokenizer.json")
    # Other special tokens for the file's tokenizer, as for its directory's.
    pad = ["<|pad|>"]
    by_file = encode(inputs, tokenizer_dir / "tokenizer.json", tmp_path / "file.bin", pad, client=client)
    by_directory = encode(inputs, tokenizer_dir, tmp_path / "dir.bin", pad, client=client)
    assert by_file["special_tokens"] == by_directory["special_tokens"] == ["<|pad|>"]
    file_ids, directory_ids = (np.fromfile(tmp_path / name, np.uint16) for name in ("file.bin", "dir.bin"))
    assert file_ids.tolist() == directory_ids.tolist() != whole_encoding(tokenizer_dir, texts)


def test_a_missing_tokenizer_is_one_line(tmp_path, inputs):
    done = run("encode", str(inputs[0]), "--tokenizer", "nowhere", "--out", "ids", "-q", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bpe-dask: error: tokenizer {tmp_path}/nowhere: no such directory (a directory `bpe-dask train` "
        "wrote)"  # made absolute here, as every path a task may touch
    ]
    assert not (tmp_path / "ids").exists()


# --- one flat .bin file, as model trainers np.memmap it --------------------------------------------


def test_bin_output_reads_back_with_memmap(client, tokenizer_dir, inputs, texts, tmp_path):
    out = tmp_path / "data" / "train.bin"
    report = encode(inputs, str(tokenizer_dir), str(out), client=client, chunk_size=700)
    sidecar = json.loads((tmp_path / "data" / "train.bin.json").read_text())
    ids = np.memmap(out, dtype=sidecar["dtype"], mode="r")
    assert sidecar["dtype"] == "uint16" and len(ids) == sidecar["tokens"] == report["tokens"]
    assert ids.tolist() == whole_encoding(tokenizer_dir, texts)
    assert report["shards"] > 20 and report["format"] == "bin"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["train.bin", "train.bin.json"]


def test_bin_output_needs_overwrite_and_leaves_other_files_alone(
    client, tokenizer_dir, inputs, texts, tmp_path
):
    (tmp_path / "val.bin").write_bytes(b"someone else's")
    out = tmp_path / "train.bin"
    encode(inputs[:1], str(tokenizer_dir), str(out), client=client)
    with pytest.raises(Exception, match="already exists; pass overwrite=True"):
        encode(inputs[:1], str(tokenizer_dir), str(out), client=client)
    encode(inputs, str(tokenizer_dir), str(out), client=client, overwrite=True)
    assert np.memmap(out, dtype=np.uint16, mode="r").tolist() == whole_encoding(tokenizer_dir, texts)
    assert (tmp_path / "val.bin").read_bytes() == b"someone else's"


# --- resuming: a re-run with the same --work-dir reuses the finished shards ------------------------


def test_a_killed_encode_resumes_from_its_finished_shards(tmp_path, tokenizer_dir):
    import signal

    corpus_path = tmp_path / "corpus.txt"
    corpus_path.write_bytes(corpus.words_corpus(71, 400_000, vocab_words=3000).encode())
    args = ["encode", str(corpus_path), "--tokenizer", str(tokenizer_dir), "--out", "ids.bin",
            "--work-dir", "work", "--chunk-size", "16KiB", "--workers", "2", "-q"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    job = subprocess.Popen([sys.executable, "-m", "bpe_dask", *args], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           start_new_session=True)  # fmt: skip
    shards = lambda: sorted((tmp_path / "work" / "encoded").glob("[!.]*.npy"))  # noqa: E731

    def ten_shards_or_an_exit() -> bool:
        assert job.poll() is None, job.stderr.read()
        return len(shards()) >= 10

    timing.wait_until(ten_shards_or_an_exit, 120, "10 shards", poll=0.02)
    os.killpg(job.pid, signal.SIGKILL)  # the client and its LocalCluster, mid-run
    job.wait()
    finished = len(shards())
    assert not (tmp_path / "ids.bin").exists()

    done = run(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "ids.bin.json").read_text())
    assert (
        report["shards_reused"] >= finished
        and report["shards_computed"] == report["shards"] - report["shards_reused"] > 0
    )
    tokenizer = Tokenizer.load(tokenizer_dir)
    ids = np.memmap(tmp_path / "ids.bin", dtype=np.uint16, mode="r")
    assert ids.tolist() == tokenizer.encode(corpus_path.read_bytes().decode())

    again = run(*[a if a != "ids.bin" else "again.bin" for a in args], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again.bin.json").read_text())["shards_computed"] == 0
    assert (tmp_path / "again.bin").read_bytes() == (tmp_path / "ids.bin").read_bytes()


def test_encoding_progress_reaches_a_log(tmp_path, tokenizer_dir, inputs):
    done = run("encode", *map(str, inputs), "--tokenizer", str(tokenizer_dir), "--out", "ids.bin",
               "--workers", "1", "--chunk-size", "4KiB", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    last = r"encode: 100%, [^\[]*B \[[^\]]*B/s, (\d+)/\1 partitions, ([\d,]+) tokens\]"
    ended = re.search(last, done.stderr)
    assert ended, done.stderr
    assert int(ended[2].replace(",", "")) == json.loads((tmp_path / "ids.bin.json").read_text())["tokens"]
