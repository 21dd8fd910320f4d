"""Whether two checkouts of bpe-dask write the same tokenizers: every source kind and split pattern on
the bundled sample and the CS336 corpus, each trained by each checkout in a process of its own.

    python benchmarks/same_outputs.py /path/to/old/checkout /path/to/new/checkout

Every file of every tokenizer directory (vocab, merges, ``tokenizer.json``, ``tokenizer.tiktoken``,
``compression.csv`` and ``.png``) must be byte-identical; ``report.json``'s keys are compared, and
its values but for timings, memory and the inputs' names. Exits 1 on any difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "cs336"
VARYING = {"timings", "peak_rss_bytes", "workers_peak_rss_bytes", "inputs", "version"}

TRAIN = r"""
import json, sys, warnings
from pathlib import Path
warnings.filterwarnings("ignore")
import dask, dask.bag as db, pandas as pd, pyarrow as pa, pyarrow.parquet as pq
dask.config.set({"dataframe.convert-string": False})
import dask.dataframe as dd
from distributed import Client
import bpe_dask
out, fixtures = Path(sys.argv[1]), Path(sys.argv[2])
EOT = "<|endoftext|>"
with Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
    for name in ("tinystories_sample.txt", "corpus.en"):
        path = fixtures / name
        docs = path.read_text(encoding="utf-8").split(EOT)
        jsonl, parquet = out / f"{name}.jsonl", out / f"{name}.parquet"
        jsonl.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        pq.write_table(pa.table({"text": docs}), parquet, row_group_size=50)
        for pattern in ("gpt2", "gpt4", "o200k"):
            inputs = {
                "file": str(path), "jsonl": str(jsonl), "parquet": str(parquet),
                "bag": db.from_sequence(docs, npartitions=3),
                "series": dd.from_pandas(pd.DataFrame({"text": docs}), npartitions=3)["text"],
                "arrow": pa.table({"text": docs}),
            }
            for kind, given in inputs.items():
                where = {} if kind == "arrow" else {"client": client}
                target = str(out / f"{name}-{pattern}-{kind}")
                bpe_dask.train(given, 500, target, [EOT], pattern=pattern, **where)
            bpe_dask.train_from_iterator(iter(docs), 500, str(out / f"{name}-{pattern}-iterable"), [EOT],
                                         pattern=pattern)
"""


def train_all(checkout: Path, out: Path) -> None:
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run([sys.executable, "-c", TRAIN, str(out), str(FIXTURES)], env=env, check=True)


def differences(old: Path, new: Path) -> list[str]:
    found = []
    for directory in sorted(p for p in old.iterdir() if p.is_dir()):
        for file in sorted(directory.iterdir()):
            other = new / directory.name / file.name
            if file.name == "report.json":
                a, b = json.loads(file.read_text()), json.loads(other.read_text())
                changed = sorted(k for k in a.keys() | b.keys() if k not in VARYING and a.get(k) != b.get(k))
                found += [f"{directory.name}/report.json: {k}: {a.get(k)!r} -> {b.get(k)!r}" for k in changed]
            elif not other.exists() or other.read_bytes() != file.read_bytes():
                found.append(f"{directory.name}/{file.name} differs")
    return found


def main() -> int:
    old, new = (Path(arg).resolve() for arg in sys.argv[1:3])
    with tempfile.TemporaryDirectory() as scratch:
        train_all(old, Path(scratch) / "old")
        train_all(new, Path(scratch) / "new")
        found = differences(Path(scratch) / "old", Path(scratch) / "new")
        compared = sum(1 for _ in (Path(scratch) / "old").glob("*/*"))
    print("\n".join(found) or f"the same: {compared} files of 42 tokenizers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
