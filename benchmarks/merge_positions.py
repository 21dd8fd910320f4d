"""Time the long-word merge loop (``compiled.merge_positions``) against the compiled words' loop
(``compiled.merge_loop``), one engine per process so that each has its own peak memory.

    python benchmarks/merge_positions.py counts numba|positions CORPUS [--vocab 32000]
    python benchmarks/merge_positions.py docs numba|positions CORPUS [--mb 16] [--vocab 8000]

``counts``: the GPT-2 pre-token counts of CORPUS (counted once, kept beside it in /tmp), merged to
``--vocab`` with ``<|endoftext|>`` as special token. ``docs``: the first ``--mb`` MB of CORPUS split
only at ``<|endoftext|>``, each document's UTF-8 bytes a word of count 1 (``--join K``: words of K
documents each, K times as long; ``--lines``: the lines are the words, counted), merged from the
256 bytes to ``--vocab``. Prints, as JSON lines, progress every 2048 merges (``merges``,
``seconds``, ``cpu_seconds``) and at the end: seconds (wall, and this process's CPU, which another
load on the machine hardly changes) setting up with the first 512 merges, and per merge after them;
the memory resident before and the peak (``ru_maxrss``) after, the peak's growth over it per input
token (byte, for ``docs``); and a digest of the merges (the engines must agree).
"""

from __future__ import annotations

import argparse
import collections
import gc
import hashlib
import json
import os
import resource
import sys
import time

import numpy as np
import pyarrow.parquet as pq


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def resident_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def say(**fields) -> None:
    print(json.dumps(fields), flush=True)


def counts_table(corpus: str):
    cached = f"/tmp/sk-counts-{os.path.basename(corpus)}.parquet"
    if not os.path.exists(cached):
        import bpe_dask

        table = bpe_dask.count_words(corpus, ["<|endoftext|>"], in_process=True).table()
        pq.write_table(table, cached + ".part")
        os.replace(cached + ".part", cached)
    return pq.read_table(cached)


def documents(corpus: str, mb: float, join: int = 1, lines: bool = False) -> tuple[np.ndarray, ...]:
    with open(corpus, "rb") as f:
        text = f.read(int(mb * 1_000_000))
    text = text[: len(text.decode("utf-8", "ignore").encode())]  # whole characters
    docs = [d for d in text.split(b"<|endoftext|>") if d]
    docs = [b"".join(docs[k : k + join]) for k in range(0, len(docs), join)]
    counts = [1] * len(docs)
    if lines:  # SuperBPE's stage-2 words: lines, each with its newline, counted
        counted = collections.Counter(line for d in docs for line in d.splitlines(keepends=True))
        docs, counts = list(counted), list(counted.values())
    data = np.frombuffer(b"".join(docs), np.uint8)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    return data, offsets, np.array(counts, np.int64)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("words", choices=["counts", "docs"])
    parser.add_argument("engine", choices=["numba", "positions"])
    parser.add_argument("corpus")
    parser.add_argument("--mb", type=float, default=16)
    parser.add_argument("--vocab", type=int, default=None)
    parser.add_argument("--lines", action="store_true", help="docs: words are lines, counted")
    parser.add_argument("--join", type=int, default=1, help="docs: words of this many documents each")
    args = parser.parse_args()
    from bpe_dask.compiled.merge_positions import learn_merges_long
    from bpe_dask.io.counts_table import as_arrays
    from bpe_dask.rules.vocabulary import start
    from bpe_dask.stages.merge import laid_out, train_merges

    if args.words == "counts":
        vocab_size, specials = args.vocab or 32000, ["<|endoftext|>"]
        table = counts_table(args.corpus)
        flat = as_arrays(table)
        words = table.num_rows
    else:
        vocab_size, specials = args.vocab or 8000, []
        flat = documents(args.corpus, args.mb, args.join, args.lines)
        words = len(flat[1]) - 1
        table = None
    tokens = len(flat[0])
    say(words=words, tokens=tokens, **{"input peak MB": round(peak_mb(), 1)})
    # Load (or compile) the engine's code first, on a few words: its peak is then the work's own.
    few = [(b"hello hello world " * (3 + k), 1 + k) for k in range(50)]
    if args.engine == "numba":
        train_merges(few, vocab_size, specials, engine="numba")
    else:
        list(learn_merges_long(few, start(specials)[0], vocab_size))
    say(**{"warmed peak MB": round(peak_mb(), 1)})
    gc.collect()
    before = resident_mb()  # not the peak so far: building the input held more than it keeps
    marks = []
    t0, c0 = time.perf_counter(), time.process_time()

    def progress(n: int) -> None:
        if n % 512 == 0:  # batches of 256 merges come out together in both engines
            marks.append((n, time.perf_counter(), time.process_time()))
            if n % 2048 == 0:
                say(merges=n, seconds=round(marks[-1][1] - t0, 2), cpu_seconds=round(marks[-1][2] - c0, 2))

    if args.engine == "numba":
        if table is None:
            import pyarrow as pa

            data, offsets, counts = flat
            tokens_column = pa.Array.from_buffers(
                pa.large_binary(), words, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
            )
            table = pa.table({"token": tokens_column, "count": counts})
        del flat
        laid = laid_out(table, vocab_size, "numba")
        del table
        _, merges = train_merges(laid, vocab_size, specials, progress, "numba")
    else:
        vocab, _ = start(specials)
        merges = []
        for a, b, _saved in learn_merges_long(flat, vocab, vocab_size):
            merges.append((vocab[a], vocab[b]))
            progress(len(merges))
    t2, c2 = time.perf_counter(), time.process_time()
    n = len(merges)
    after = peak_mb()
    # Setting up (laying out, counting and listing the first pairs) and the first 512 merges, which
    # touch the most words, then the mean of the rest.
    first = marks[0][1] - t0 if marks else t2 - t0
    rest = (t2 - marks[0][1]) / (n - 512) if marks and n > 512 else float("nan")
    cpu_first = marks[0][2] - c0 if marks else c2 - c0
    cpu_rest = (c2 - marks[0][2]) / (n - 512) if marks and n > 512 else float("nan")
    say(
        engine=args.engine, words=words, tokens=tokens, merges=n,
        **{
            "total s": round(t2 - t0, 2), "setup and first 512 merges s": round(first, 2),
            "ms per merge after 512": round(1000 * rest, 3),
            "ms per merge overall": round(1000 * (t2 - t0) / max(n, 1), 3),
            "cpu: total s": round(c2 - c0, 2), "cpu: setup and first 512 s": round(cpu_first, 2),
            "cpu: ms per merge after 512": round(1000 * cpu_rest, 3),
            "resident MB before": round(before, 1), "peak MB after": round(after, 1),
            "peak growth bytes per input token": round((after - before) * 2**20 / tokens, 1),
            "merges digest": hashlib.sha256(repr(merges).encode()).hexdigest()[:16],
        },
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
