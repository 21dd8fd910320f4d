"""docs/performance.md's format, for `bench.py --markdown`: the line that says where, when and with what a
table was measured, and the rows of the tables one bench.py command writes whole (training against the
peers: a row per input size; the merge node: a row per table size). Other suites print their own
three-column rows (what, time, ratio), which the page's other tables use as they are.

    python benchmarks/bench.py --markdown peers --size 65MB --peers rustbpe,hf,bpeasy
    python benchmarks/bench.py --markdown merge --unique 20000000

Takes: the results bench.py's contenders return. Gives: Markdown lines. Promises: the headers here are
the page's own (tests/test_performance_page.py holds them to it), so a row printed here pastes into it.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import shlex
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

# The packages whose versions a measurement names, when installed: bpe-dask's own stack, then the peers.
PACKAGES = ("dask", "distributed", "numba", "pyarrow",
            "rustbpe", "tokenizers", "bpeasy", "gigabpe", "ffbpe",
            "tiktoken", "riptoken", "toktok-rs", "quicktok-v1", "bpe-openai")  # fmt: skip


# The training table's peer columns (``not run`` where one did not run): these three, and issue 43's two
# as well when either of them ran, so that rows of runs with and without one of them share a table.
PEER_COLUMNS = ("rustbpe", "HF tokenizers", "bpeasy")
LATER_PEERS = ("gigabpe", "ffbpe")


def peer_columns(peers: dict[str, dict]) -> tuple[str, ...]:
    return PEER_COLUMNS + LATER_PEERS if any(label in peers for label in LATER_PEERS) else PEER_COLUMNS


def peers_header(vocab_size: int, workers: int, labels: tuple[str, ...] = PEER_COLUMNS) -> tuple[str, ...]:
    return (f"input, to {vocab_size // 1000}K", f"`bpe-dask train --workers {workers}`", *labels,
            "bpe-dask / rustbpe", "the peers leave the exact merges at", "measured")  # fmt: skip


def merge_header(vocab_size: int) -> tuple[str, ...]:
    return ("unique words", f"`bpe-dask merge` to {vocab_size // 1000}K, whole process", "per million words",
            "peak, whole process", "bytes per word", "measured")  # fmt: skip


class LoadWatch:
    """The machine's 1-minute load average, sampled every few seconds while a suite runs: its range is
    the figure that says how busy the machine was (other work on the cores makes times longer)."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(every,), daemon=True)

    def _watch(self, every: float) -> None:
        while not self._stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def range(self) -> str:
        return f"{min(self.samples):.1f}-{max(self.samples):.1f}"


def machine() -> str:
    """``2 cores (AMD EPYC), 23 GiB``: what /proc says (Linux), or what platform knows."""
    cpu = platform.processor() or platform.machine()
    memory = ""
    with contextlib.suppress(OSError, StopIteration):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        total = next(line for line in meminfo if line.startswith("MemTotal"))
        memory = f", {int(total.split()[1]) / 2**20:.0f} GiB"
    return f"{os.cpu_count()} cores ({cpu}){memory}"


def commit() -> str:
    """The checkout's commit, ``+`` when its tracked files differ from it; ``unknown`` outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD"]).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def versions() -> str:
    found = []
    for name in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{name} {metadata.version(name)}")
    return ", ".join([f"Python {platform.python_version()}", *found])


def measured_line(load: LoadWatch) -> str:
    """The page's line above a table: date, machine, load, and the code and versions measured."""
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    return (f"Measured {today} on {machine()}, load {load.range()}; bpe-dask {commit()}, {versions()}. "
            f"Command: `python benchmarks/bench.py {shlex.join(sys.argv[1:])}`.")  # fmt: skip


def header(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |\n|" + " --- |" * len(cells)


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def timed(result: dict) -> str:
    """The fastest run, and the range of the runs when there were several: ``3.10 s (3.10-3.28)``."""
    runs = result.get("all_seconds", [result["seconds"]])
    spread = f" ({seconds(min(runs))[:-2]}-{seconds(max(runs))[:-2]})" if len(runs) > 1 else ""
    return seconds(result["seconds"]) + spread


def size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"


def input_label(size_option: str) -> str:
    """``65MB`` as the page writes it: ``65 MB``."""
    digits = size_option.rstrip("BbKkMmGgTtiI")
    return f"{digits} {size_option[len(digits) :]}".strip()


def first_difference(ours: list[str], theirs: list[str]) -> int | None:
    """The merge (1-based) at which a peer's learned tokens first differ from bpe-dask's exact ones."""
    for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return i + 1
    return None if len(ours) == len(theirs) else min(len(ours), len(theirs)) + 1


def peers_row(size_option: str, ours: dict, peers: dict[str, dict], load: LoadWatch,
              labels: tuple[str, ...] = PEER_COLUMNS) -> str:  # fmt: skip
    """One row of the training table: bpe-dask and each peer of ``labels`` (``not run`` for those that
    did not run)."""
    base = peers["rustbpe"]["seconds"]
    t = ours["timings"]
    cells = [input_label(size_option),
             f"**{timed(ours)}** (count {t['count']:.1f} s, merge {t['merge']:.1f} s), peak "
             f"{size(ours['peak_rss_bytes'] + ours['workers_peak_rss_bytes'])}"]  # fmt: skip
    for label in labels:
        result = peers.get(label)
        if result is None:
            cells.append("not run")
            continue
        ratio = "" if label == "rustbpe" else f" ({result['seconds'] / base:.2f}x rustbpe's)"
        cells.append(f"{timed(result)}{ratio}, peak {size(result['peak_rss_bytes'])}")
    cells.append(f"**{ours['seconds'] / base:.2f}**")
    where = {label: first_difference(ours["tokens"], r["tokens"]) for label, r in peers.items()}
    if len(set(where.values())) == 1:
        (merge,) = set(where.values())
        cells.append("never" if merge is None else f"merge {merge:,}")
    else:
        each = [f"{label} merge {m:,}" if m else f"{label} never" for label, m in where.items()]
        cells.append(", ".join(each))
    cells.append(f"{datetime.datetime.now(datetime.UTC).date().isoformat()}, load {load.range()}")
    return row(cells)


def merge_row(result: dict, load: LoadWatch) -> str:
    """One row of the merge node's table, from `bench.py merge`'s `bpe_dask_merge` result."""
    words, peak = result["unique_words"], result["process_peak_rss_bytes"]
    millions = f"{words / 1e6:g} million" if words >= 1e6 else f"{words:,}"
    return row([
        millions,
        f"{timed(result)} (merge loop {result['merge_seconds']:.1f} s)",
        f"{result['seconds'] / words * 1e6:.1f} s",
        size(peak),
        f"{peak / words:,.0f}",
        f"{datetime.datetime.now(datetime.UTC).date().isoformat()}, load {load.range()}",
    ])  # fmt: skip
