"""How much two threads give over one on this machine: a bound on every two-worker figure.

    python benchmarks/cores.py [--corpus bench-data/openwebtext-65MB-seed0.txt] [--repeat 3]

Three loops, each run by one thread alone and then by two threads at once (each on its own copy of
the work), in this one process; they release the GIL, so two threads can use two cores. The speed-up
is ``2 * one / two`` (2.0: two cores' worth):

- ``arithmetic``: a register-only integer loop (no memory traffic): what the cores themselves give;
- ``random reads``: dependent-free reads at random places of a 512 MiB table (as a hash table's
  lookups are): what the memory system gives two cores at once;
- ``counting``: bpe-dask's compiled counter (``CompiledCounter.add_utf8``) on the first 32 MB of
  the corpus, each thread with its own counter, as two map tasks in one worker's threads are;
- ``encoding``: ``Tokenizer.encode_array`` with GPT-2's vocabulary on the same 32 MB, the threads
  sharing one tokenizer (each call borrows a cache of pre-tokens of its own, warm from an earlier
  call): the compiled encoding of ``encode_batch`` and ``bpe-dask encode`` without their lists or
  files.

A speed-up well under 2.0 for ``arithmetic`` means the two virtual CPUs are not two free cores (the
host shares them), and no two-worker job here can scale better than that.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def arithmetic(n: int) -> int:
    x = np.uint64(88172645463325252)
    for _ in range(n):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
    return int(x & np.uint64(0xFFFF))


@njit(nogil=True, cache=True)
def random_reads(table: np.ndarray, n: int) -> int:
    x = np.uint64(88172645463325252)
    mask = np.uint64(len(table) - 1)
    total = 0
    for _ in range(n):
        x ^= x << np.uint64(13)
        x ^= x >> np.uint64(7)
        x ^= x << np.uint64(17)
        total += table[x & mask]
    return total


def timed(work, threads: int) -> float:
    with ThreadPoolExecutor(threads) as pool:
        started = time.perf_counter()
        list(pool.map(lambda _: work(), range(threads)))
        return time.perf_counter() - started


def build_parser() -> argparse.ArgumentParser:
    """Its options (tests/test_performance_page.py parses the page's commands with it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="bench-data/openwebtext-65MB-seed0.txt")
    parser.add_argument("--repeat", type=int, default=3)
    return parser


def main() -> None:
    args = build_parser().parse_args()

    from bpe_dask import Tokenizer
    from bpe_dask.stages.count import CountSettings, new_counter

    table = np.arange(1 << 26, dtype=np.int64)  # 512 MiB
    with open(args.corpus, "rb") as f:
        data = f.read(32_000_000)
    data = data[: len(data.decode("utf-8", "ignore").encode("utf-8"))]  # whole characters
    settings = CountSettings(("<|endoftext|>",), "strict", "gpt2", "numba")

    def count() -> None:
        counter = new_counter(settings, len(data))
        counter.add_utf8(data)

    gpt2 = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cs336"
    tokenizer = Tokenizer.from_files(gpt2 / "gpt2_vocab.json", gpt2 / "gpt2_merges.txt", ["<|endoftext|>"])
    text = data.decode("utf-8")

    loops = {
        "arithmetic": lambda: arithmetic(300_000_000),
        "random reads": lambda: random_reads(table, 30_000_000),
        "counting": count,
        "encoding": lambda: tokenizer.encode_array(text),
    }
    print("| loop | one thread | two threads at once | speed-up (2.0: two cores) |")
    print("| --- | --- | --- | --- |")
    for name, work in loops.items():
        timed(work, 2)  # compiled or loaded, the table paged in, and each thread's cache warm
        one = min(timed(work, 1) for _ in range(args.repeat))
        two = min(timed(work, 2) for _ in range(args.repeat))
        print(f"| {name} | {one:.2f} s | {two:.2f} s | {2 * one / two:.2f} |")


if __name__ == "__main__":
    main()
