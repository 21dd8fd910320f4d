"""The compression curve (``compression.csv``, ``compression.png``): the training data's tokens at every
vocabulary size, held to what ``Tokenizer.encode`` gives on the training text with the first merges,
for every engine and pattern, for text files and for records, through ``train`` and ``merge``."""

from __future__ import annotations

import csv
import io
import json

import pyarrow.parquet as pq
import pytest

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


@pytest.mark.parametrize("pattern", ["gpt2", "gpt4", "o200k"])
@pytest.mark.parametrize("engine", ["python", "numba"])
def test_the_curve_is_what_encode_gives_at_every_vocabulary_size(tmp_path, client, engine, pattern):
    paths = []
    for k, text in enumerate(TEXTS):
        paths.append(tmp_path / f"part{k}.txt")
        paths[-1].write_bytes(text.encode("utf-8"))  # newlines as they are
    out = tmp_path / "tok"
    report = train([str(p) for p in paths], 330, str(out), [EOT, PAD], pattern=pattern, engine=engine,
                   client=client, chunk_size=64)  # fmt: skip
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


def test_records_count_each_document_on_its_own(tmp_path, client):
    documents = [text[k::3] for text in TEXTS for k in range(3)] + [f"{EOT}", "aaaa", ""]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    out = tmp_path / "tok"
    train(str(path), 300, str(out), [EOT, PAD], client=client)
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
