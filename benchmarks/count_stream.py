"""Where a count job's threads spend their time: Dask's task stream, summed by task kind.

    python benchmarks/count_stream.py bench-data/openwebtext-12GB-seed0.txt [--threads 2]

Runs ``count_words`` on a ``Client`` of ``--threads`` threads in this process (what the embedded
cluster is for the compiled counter), with ``<|endoftext|>`` as the special token and the counts
written to a temporary file, under ``distributed.get_task_stream``; prints the whole time, then for
each kind of task (``count``: a map task, counting a part, sorting its words and writing its shard;
``combine``: a reduce task) how many ran, their thread time, and when the first started and the
last ended, and the last three combines (the final one runs alone once the map tasks are done).
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time

from distributed import Client, get_task_stream

from bpe_dask import count_words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    shape = {"processes": False, "threads_per_worker": args.threads, "dashboard_address": None}
    with (
        Client(n_workers=1, **shape) as client,
        tempfile.TemporaryDirectory() as tmp,
        get_task_stream(client) as stream,
    ):
        started = time.time()
        counted = count_words(args.corpus, ["<|endoftext|>"], client=client, out=f"{tmp}/counts.parquet")
        ended = time.time()
    print(f"count_words: {ended - started:.1f} s, {counted.partitions} partitions")
    spans = collections.defaultdict(list)
    for task in stream.data:
        key = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
        for part in task["startstops"]:
            if part["action"] == "compute":
                spans[str(key).split("-")[0]].append((part["start"] - started, part["stop"] - started))
    for kind, times in spans.items():
        took = [b - a for a, b in times]
        first, last = min(a for a, _ in times), max(b for _, b in times)
        print(
            f"{kind}: {len(times)} tasks, {sum(took):.1f} s of thread time "
            f"({min(took):.2f}-{max(took):.2f} s a task), from {first:.1f} s to {last:.1f} s"
        )
    last = sorted(spans.get("combine", []), key=lambda span: span[1])[-3:]
    print("the last combines:", ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in last))


if __name__ == "__main__":
    main()
