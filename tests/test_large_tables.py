"""Count tables past Arrow's int32 offsets (over 2 GiB of token bytes in one table: one task of a
large compressed file) hold their tokens as large_binary, and every reader takes both kinds. Tested
with the limit lowered, not with 2 GiB of data."""

from __future__ import annotations

import corpus
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bpe_dask.io import counts_table
from bpe_dask.io.counts_table import read_counts
from bpe_dask.io.inputs import expand_inputs
from bpe_dask.io.plan import plan_ranges
from bpe_dask.rules import reference
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.files import FilePart
from bpe_dask.stages.count import CountSettings, count_part_to_shard
from bpe_dask.stages.merge import train_merges
from bpe_dask.stages.reduce import combine, sum_sorted
from bpe_dask.stages.shards import shard_path
from conftest import sum_counts

EOT = "<|endoftext|>"
VOCAB_SIZE = 256 + 1 + 120


def token_type(table: pa.Table) -> pa.DataType:
    return table.schema.field("token").type


@pytest.mark.parametrize("engine", ["python", "numba"])
def test_tables_past_the_binary_limit_go_large_and_train_the_reference_merges(tmp_path, monkeypatch, engine):
    """Shards, partial sums and the counts file past the limit are large_binary; the reduce (binary
    and large runs mixed; the engine's), ``read_counts`` and both merge loops read them to the
    reference merges."""
    monkeypatch.setattr(counts_table, "BINARY_LIMIT", 500)
    text = corpus.mixed_corpus(5, 40)
    (tmp_path / "big.txt").write_bytes(text.encode())
    (tmp_path / "small.txt").write_bytes(b"a small file, under the limit")
    files = expand_inputs([str(tmp_path / "big.txt"), str(tmp_path / "small.txt")])
    ranges = plan_ranges(files, len(text.encode()) // 3, Pretokenizer([EOT]))
    settings = CountSettings((EOT,), engine=engine)
    parts = [FilePart(r, k) for k, r in enumerate(ranges)]
    folder = str(tmp_path / "shards")
    shards = [count_part_to_shard(p, settings, shard_path(folder, p, settings.key())) for p in parts]
    kinds = [token_type(read_counts(shard.path)) for shard in shards]
    assert pa.large_binary() in kinds and pa.binary() in kinds, kinds
    partial = combine(shards[:2], str(tmp_path / "partial.parquet"), engine=engine)
    counts = combine([partial, *shards[2:]], str(tmp_path / "counts.parquet"), engine=engine)
    table = read_counts(counts)
    assert token_type(read_counts(partial)) == token_type(table) == pa.large_binary()
    assert table.num_rows and table.column("token").to_pylist() == sorted(table.column("token").to_pylist())
    expected = reference.train([text, "a small file, under the limit"], VOCAB_SIZE, [EOT])[1]
    for merge_engine in ("python", "numba"):
        assert train_merges(table, VOCAB_SIZE, [EOT], engine=merge_engine)[1] == expected, merge_engine
    assert dict(zip(*sum_counts([table]).to_pydict().values(), strict=True)) == dict(
        zip(*table.to_pydict().values(), strict=True)
    )


def test_under_the_limit_tables_stay_binary_and_any_counts_file_of_either_kind_is_read(tmp_path):
    tokens = [b"a", b" b", b"cc"]
    small = sum_sorted([pa.table({"token": pa.array(tokens, pa.binary()), "count": [1, 2, 3]})])
    assert token_type(small) == pa.binary()
    for kind in (pa.large_binary(), pa.large_string(), pa.binary(), pa.string()):
        path = tmp_path / f"{kind}.parquet"
        pq.write_table(pa.table({"count": pa.array([3, 1, 2], pa.int64()),
                                 "token": pa.array(["x", "y", "z"], kind)}), path)  # fmt: skip
        table = read_counts(str(path))
        assert table.column("token").to_pylist() == [b"x", b"y", b"z"], kind
        assert table.column_names == ["token", "count"]
        assert token_type(table) == (pa.large_binary() if "large" in str(kind) else pa.binary()), kind
