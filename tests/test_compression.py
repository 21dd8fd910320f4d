"""The compression curve (``compression.csv``, ``compression.png``): the training data's tokens at every
vocabulary size, held to what ``Tokenizer.encode`` gives on the training text with the first merges,
for every engine and pattern, for text files and for records, through ``train`` and ``merge``."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import timing

from bpe_dask import Tokenizer, count_words, merge, train
from bpe_dask.io.counts_table import SETTINGS_KEY

EOT, PAD = "<|endoftext|>", "<|pad|>"
# Overlapping repeats (``a a a``: the pair counts twice, one merge saves one token), specials next to
# each other and inside words, digits, CJK, whitespace runs, and a file that starts with a special.
TEXTS = [
    f"{EOT}low lower lowest aaaaaaa bbbbbbbbbb  \n\n newest{PAD}{EOT}widest 12345678 日本語日本語 "
    "camelCase HTTPServer don't won'T '''' ===== aaaa aaaaa" * 3,
    f"the cat sat{EOT}on the mat aaaaaaaaaaa{EOT}{EOT}\r\n\tand the hat\n" * 5,
]


def curve_of(directory) -> list[tuple[int, int, float]]:
    rows = list(csv.DictReader(io.StringIO((directory / "compression.csv").read_text())))
    return [(int(r["vocab_size"]), int(r["tokens"]), float(r["bytes_per_token"])) for r in rows]


def tokens_with_prefix(directory, size: int, texts: list[str]) -> int:
    """The tokens ``Tokenizer.encode`` gives the texts with the vocabulary cut to its first ``size`` ids."""
    whole = Tokenizer.load(directory)
    first = 256 + len(whole.special_tokens)
    vocab = {i: token for i, token in whole.vocab.items() if i < size}
    merges, pattern = whole.merges[: size - first], whole.pretokenizer.pattern
    tokenizer = Tokenizer(vocab, merges, whole.special_tokens, pattern)
    return sum(len(tokenizer.encode(text)) for text in texts)


def text_files(folder) -> list[str]:
    paths = []
    for k, text in enumerate(TEXTS):
        paths.append(folder / f"part{k}.txt")
        paths[-1].write_bytes(text.encode("utf-8"))  # newlines as they are
    return [str(p) for p in paths]


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "o200k"])
@pytest.mark.parametrize("engine", ["python", "numba"])
def test_the_curve_is_what_encode_gives_at_every_vocabulary_size(tmp_path, engine, pattern):
    """Counted here: the curve comes from the counts, wherever they were made (next test)."""
    out = tmp_path / "tok"
    report = train(text_files(tmp_path), 330, str(out), [EOT, PAD], pattern=pattern, engine=engine,
                   in_process=True)  # fmt: skip
    assert_the_curve_is_encodes(out, report)


def test_the_curve_of_a_job_on_a_cluster_sums_its_partitions(tmp_path, client):
    """Tiny partitions on worker processes: the special tokens seen, and the counts, summed."""
    out = tmp_path / "tok"
    report = train(text_files(tmp_path), 330, str(out), [EOT, PAD], client=client, chunk_size=64)
    assert report["partitions"] > 10
    assert_the_curve_is_encodes(out, report)


def assert_the_curve_is_encodes(out, report: dict) -> None:
    rows = curve_of(out)
    assert [v for v, _, _ in rows] == list(range(258, 331))
    text_bytes = sum(len(t.encode("utf-8")) for t in TEXTS)
    for size, tokens, bytes_per_token in rows:
        assert tokens == tokens_with_prefix(out, size, TEXTS), size
        assert bytes_per_token == pytest.approx(text_bytes / tokens, abs=1e-4)
    assert rows[0][1] == text_bytes - sum(t.count(EOT) * (len(EOT) - 1) + t.count(PAD) * (len(PAD) - 1)
                                          for t in TEXTS)  # fmt: skip
    assert report["compression"]["tokens"] == rows[-1][1]
    assert report["compression"]["special_tokens_seen"] == sum(t.count(EOT) + t.count(PAD) for t in TEXTS)
    assert (out / "compression.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_records_count_each_document_on_its_own(tmp_path):
    documents = [text[k::3] for text in TEXTS for k in range(3)] + [f"{EOT}", "aaaa", ""]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    out = tmp_path / "tok"
    train(str(path), 300, str(out), [EOT, PAD], in_process=True)
    rows = curve_of(out)
    for size, tokens, _ in rows[:: len(rows) // 5] + rows[-1:]:
        assert tokens == tokens_with_prefix(out, size, documents), size


def test_merge_draws_the_same_curve_from_a_counts_file_and_none_from_an_older_one(tmp_path, client, caplog):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXTS[0] + TEXTS[1])
    train(str(path), 320, str(tmp_path / "trained"), [EOT, PAD], client=client)
    counts = tmp_path / "counts.parquet"
    count_words(str(path), [EOT, PAD], out=str(counts), client=client)
    merge(str(counts), 320, str(tmp_path / "merged"))
    assert (tmp_path / "merged" / "compression.csv").read_text() == (
        tmp_path / "trained" / "compression.csv"
    ).read_text()

    # Counts an older bpe-dask wrote record no special tokens seen: no curve, and a line says why.
    table = pq.read_table(counts)
    settings = json.loads(table.schema.metadata[SETTINGS_KEY])
    del settings["special_tokens_seen"]
    pq.write_table(table.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)}), counts)
    with caplog.at_level("INFO", logger="bpe_dask"):
        report = merge(str(counts), 320, str(tmp_path / "older"))
    assert "compression" not in report
    assert not (tmp_path / "older" / "compression.csv").exists()
    assert "no compression curve" in caplog.text
    assert (tmp_path / "older" / "merges.txt").read_text() == (tmp_path / "merged" / "merges.txt").read_text()


BACKGROUND = r"""
import sys
import bpe_dask
from distributed import Client
from bpe_dask.jobs import tokenizer_output as publishing, train

imported = []
def tokenizer_files(*args, **kwargs):  # what train runs in its background thread
    before = set(sys.modules)
    files = publishing.tokenizer_files(*args, **kwargs)
    imported.extend(sorted(set(sys.modules) - before))
    assert "compression.png" in files
    return files
train.tokenizer_files = tokenizer_files

if __name__ == "__main__":
    open("in.txt", "w").write("hello world, the cat sat " * 50)
    with Client(processes=False, n_workers=1, dashboard_address=None) as client:
        bpe_dask.train("in.txt", 270, "tok", client=client)
    print(imported)
"""


def test_the_background_thread_that_draws_imports_nothing(tmp_path):
    """A job draws compression.png in a thread while its cluster closes, and Dask's scheduler takes its
    directory out of ``sys.path`` then: an import in that thread can miss a module (seen in CI: ``No
    module named 'six'``, through matplotlib and dateutil). So everything is imported before, here in
    a fresh process where nothing was."""
    (tmp_path / "job.py").write_text(BACKGROUND)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timing.seconds(300), check=True)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_the_knee_is_the_first_size_from_which_a_step_more_saves_under_the_gain():
    """``Curve.knee`` (and so ``compression.png`` and ``report.json``) by the definition, read off
    every size, now that ``evaluate``'s held-out points share it (``compression.knee_of``)."""
    import random

    from bpe_dask.stages.compression import Curve

    rng = random.Random(31)
    for _ in range(300):
        savings = [rng.choice([0, 0, 1, 2, 5, 50]) for _ in range(rng.randrange(0, 60))]
        text = rng.randrange(200, 3000)
        curve = Curve(257, text, text, rng.randrange(0, 3), 13, savings)
        step, gain = rng.choice([1, 3, 10, 1000]), rng.choice([0.001, 0.01, 0.05])
        tokens = curve.tokens()
        first = [k for k in range(len(tokens) - step) if tokens[k] - tokens[k + step] < gain * tokens[k]]
        assert curve.knee(step, gain) == (257 + first[0] if first else None), (savings, step, gain)
