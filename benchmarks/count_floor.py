"""How fast one core can count pre-tokens on this text, and where today's counter spends its time.

    python benchmarks/count_floor.py [--corpus bench-data/openwebtext-65MB-seed0.txt] [--repeat 3]

Each loop runs in this one process on one thread, over the same UTF-8 text (documents separated by
``<|endoftext|>``, cut into its pieces between special tokens first), and prints its rate in MiB/s:

- ``bytes``: one pass over the bytes, looking each code point's class up (ASCII directly, the rest
  decoded first): the least any scanner does;
- ``scan, reference-counted``: the GPT-2 scanner alone (``compiled.scan_gpt2``), counting
  pre-tokens, compiled as numba compiles by default: with its reference counts on the arrays the
  inlined scanner takes (two atomic increments and decrements per pre-token);
- ``scan``: the same loop without them (``_nrt=False``, as the counting loop is compiled);
- ``scan + hash``: the scanner, then the counter's hash of each pre-token's bytes (``word_hash``,
  eight bytes at a time), a second pass over them;
- ``scan + hash + table``: that, and each hash probed into an open-addressing table of hashes (no
  byte comparison, no arena, no reading ahead): a counter's floor without its memory tricks;
- ``counter``: bpe-dask's compiled counter (``compiled.Counter.add``), exact;
- ``map task``: the counting of a whole part as a map task does it (``stages.count.count_part``:
  reading, checking UTF-8, finding the special tokens, counting, the Arrow table), without the
  shard's write.

Then the profile of the map task (``--profile``): where its time goes, by function (the compiled
loops are one call each).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import numpy as np
from numba import njit

from bpe_dask.compiled.code_points import class_table, decode
from bpe_dask.compiled.hashing import word_hash
from bpe_dask.compiled.scan_gpt2 import next_token_gpt2

EOT = "<|endoftext|>"


@njit(nogil=True, cache=True, _nrt=False)
def class_pass(data, table):
    total, i, n = 0, 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            total += table[b]
            i += 1
        else:
            cp, width = decode(data, i)
            total += table[cp]
            i += width
    return total


def scan_pass(data, bounds, table):
    tokens = 0
    for piece in range(len(bounds) // 2):
        i, hi = bounds[2 * piece], bounds[2 * piece + 1]
        while i < hi:
            i = next_token_gpt2(data, i, hi, table)
            tokens += 1
    return tokens


counted_scan_pass = njit(nogil=True)(scan_pass)  # not cached: its cache would be the other's
scan_pass = njit(nogil=True, cache=True, _nrt=False)(scan_pass)


@njit(nogil=True, cache=True, _nrt=False)
def scan_hash_pass(data, bounds, table):
    total = np.uint64(0)
    for piece in range(len(bounds) // 2):
        i, hi = bounds[2 * piece], bounds[2 * piece + 1]
        while i < hi:
            end = next_token_gpt2(data, i, hi, table)
            total ^= word_hash(data, i, end)[0]
            i = end
    return total


@njit(nogil=True, cache=True, _nrt=False)
def scan_hash_table_pass(data, bounds, table, slots):
    mask = len(slots) - 1
    distinct = 0
    for piece in range(len(bounds) // 2):
        i, hi = bounds[2 * piece], bounds[2 * piece + 1]
        while i < hi:
            end = next_token_gpt2(data, i, hi, table)
            h = word_hash(data, i, end)[0] | np.uint64(1)
            slot = np.int64(h) & mask
            while slots[slot] != 0 and slots[slot] != h:
                slot = (slot + 1) & mask
            if slots[slot] == 0:
                slots[slot] = h
                distinct += 1
            i = end
    return distinct


def build_parser() -> argparse.ArgumentParser:
    """Its options (tests/test_performance_page.py parses the page's commands with it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="bench-data/openwebtext-65MB-seed0.txt")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="then profile the map task by function")
    return parser


def main() -> None:
    args = build_parser().parse_args()

    from bpe_dask.compiled import Counter
    from bpe_dask.io.inputs import Reading
    from bpe_dask.io.storage import LOCAL
    from bpe_dask.sources.source import source_of
    from bpe_dask.stages.count import CountSettings, count_part

    data = Path(args.corpus).read_bytes()
    settings = CountSettings((EOT,), "strict", "gpt2", "numba")
    view = np.frombuffer(data, np.uint8)
    bounds = settings.pretokenizer().piece_bounds(data)
    table = class_table()
    mib = len(data) / 2**20
    parts = source_of(args.corpus, LOCAL, Reading()).plan(settings.pretokenizer(), chunk_size=len(data) + 1)

    def counter() -> None:
        Counter("gpt2").add(data, bounds)

    def map_task() -> None:
        count_part(parts[0], settings).table()

    slots = np.zeros(1 << 21, np.uint64)  # 16 MiB: the size a counter of these words has
    loops = {
        "bytes": lambda: class_pass(view, table),
        "scan, reference-counted": lambda: counted_scan_pass(view, bounds, table),
        "scan": lambda: scan_pass(view, bounds, table),
        "scan + hash": lambda: scan_hash_pass(view, bounds, table),
        "scan + hash + table": lambda: scan_hash_table_pass(view, bounds, table, slots.fill(0) or slots),
        "counter": counter,
        "map task": map_task,
    }
    print(f"{args.corpus}: {mib:.1f} MiB, {scan_pass(view, bounds, table):,} pre-tokens")
    print("| loop | one core | time |")
    print("| --- | --- | --- |")
    for name, work in loops.items():
        work()  # compiled or loaded from the cache, the text paged in
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            work()
            best = min(best, time.perf_counter() - started)
        print(f"| {name} | {mib / best:.1f} MiB/s | {best:.2f} s |")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(map_task)
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
