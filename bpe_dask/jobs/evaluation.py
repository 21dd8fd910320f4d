"""The evaluate job's report: what was read and each tokenizer's tokens in; ``evaluation.json``, the
table the command line prints, and ``evaluation.png`` out.

``evaluation_report`` is a row per tokenizer and vocabulary size (tokens, bytes per token, and
for inputs of records tokens per document; ``base`` for the size of the base a tokenizer was
continued from, which ``base_size`` reads from its ``report.json``), and each tokenizer's knee on
the held-out text (as ``compression.png`` marks the training data's: ``compression.knee_of``);
``table`` lays the rows out, numbers aligned right, a base's row named ``NAME (base)``;
``evaluation_figure`` draws bytes per token against vocabulary size on a log axis, a line per
tokenizer with its knee and its base marked, and dashed, each one's training data's curve where its
directory holds one (``compression.csv``), in the frame ``compression.png`` is drawn in.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from bpe_dask.io.documents import BadRecords
from bpe_dask.io.storage import Store
from bpe_dask.jobs.context import Job, report_bad_records
from bpe_dask.jobs.report import input_bytes
from bpe_dask.sources.files import FileSource
from bpe_dask.stages.compression import knee_of, mark_knee, new_axes
from bpe_dask.stages.count import CountSettings
from bpe_dask.stages.evaluate import Measure, Measured
from bpe_dask.tokenizer import Tokenizer
from bpe_dask.version import __version__
from bpe_dask.wording import format_bytes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Row:
    """One tokenizer at one vocabulary size, to measure."""

    name: str
    vocab_size: int
    tokenizer: Tokenizer  # whole: cut to ``vocab_size`` where it is measured (``_groups``)
    source: str | None  # the tokenizer's directory or file, absolute; None for a ``Tokenizer`` given
    base: bool = False  # the size is that of the base the tokenizer was continued from, as kept


Group = tuple[CountSettings, list[Measure], list[int]]  # what counting takes; measures; rows in order


def evaluation_report(
    job: Job,
    source: FileSource,
    rows: list[Row],
    groups: list[Group],
    measured: list[list[Measured]],
    started: float,
) -> dict:
    """The report: what was read, and a row per tokenizer and size."""
    first = measured[0]  # every group reads the same text
    text_bytes, documents = sum(m.text_bytes for m in first), sum(m.documents for m in first)
    documents = documents if source.all_records else None
    read = input_bytes(source, sum(m.read_bytes for m in first))
    bad = BadRecords()
    for m in first:
        bad.merge(m.bad_records)
    report_bad_records(bad)
    tokens = [0] * len(rows)
    for (_, _, order), parts in zip(groups, measured, strict=True):
        for position, k in enumerate(order):
            tokens[k] = sum(m.tokens[position] for m in parts)
    if not text_bytes:
        log.warning("the inputs hold no text (%s)", format_bytes(read))
    seconds = time.perf_counter() - started
    results = [
        {
            "tokenizer": row.name,
            "vocab_size": row.vocab_size,
            "base": row.base,
            "tokens": n,
            "bytes_per_token": round(text_bytes / n, 4) if n else None,
            "tokens_per_document": round(n / documents, 2) if documents else None,
        }
        for row, n in zip(rows, tokens, strict=True)
    ]
    return {
        "version": __version__,
        "inputs": source.shown,
        "input_bytes": read,
        "text_bytes": text_bytes,
        "documents": documents,
        "bad_records_skipped": bad.count,
        "utf8_errors": job.options.utf8_errors,
        "partitions": len(first),
        "tokenizers": _described(rows, results),
        "results": results,
        "seconds": seconds,
        "bytes_per_second": text_bytes / seconds,
    }


def _described(rows: list[Row], results: list[dict]) -> dict[str, dict]:
    """Each tokenizer as the report describes it, with its knee on the held-out text: the first size
    measured from which 1,000 more tokens of vocabulary save under 1 % (``compression.knee_of``)."""
    described = {
        row.name: {
            "source": row.source,
            "special_tokens": row.tokenizer.special_tokens,
            "pattern": row.tokenizer.pretokenizer.pattern.spec,
            "vocab_size": len(row.tokenizer.vocab),
        }
        for row in rows
    }
    for name, about in described.items():
        points = sorted((r["vocab_size"], r["tokens"]) for r in results if r["tokenizer"] == name)
        # no tokens (no text): no curve
        about["knee"] = knee_of(*zip(*points, strict=True)) if all(n for _, n in points) else None
    return described


def table(report: dict) -> str:
    """The report's rows as a table, numbers aligned right; tokens per document when the inputs are
    records."""
    documents = report.get("documents") is not None
    header = ["tokenizer", "vocab size", "tokens", "bytes/token", *(["tokens/doc"] if documents else [])]
    lines = [header]
    for r in report["results"]:
        per_token = "-" if r["bytes_per_token"] is None else f"{r['bytes_per_token']:.3f}"
        name = f"{r['tokenizer']} (base)" if r["base"] else r["tokenizer"]
        line = [name, f"{r['vocab_size']:,}", f"{r['tokens']:,}", per_token]
        if documents:
            line.append("-" if r["tokens_per_document"] is None else f"{r['tokens_per_document']:.1f}")
        lines.append(line)
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if k == 0 else cell.rjust(width)
            for k, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in lines
    )


def directory_file(source: str | Tokenizer | None, name: str, store: Store) -> str | None:
    """The text of file ``name`` of a tokenizer directory; None if ``source`` is no directory (a
    ``Tokenizer`` given, a ``tokenizer.json``) or holds no such file."""
    if not isinstance(source, str):
        return None
    fs, path = store.fs(f"{source.rstrip('/')}/{name}")
    try:
        return fs.cat_file(path).decode()
    except (OSError, ValueError):  # not a directory, or one written before that file existed
        return None


def base_size(source: str | Tokenizer, tokenizer: Tokenizer, store: Store) -> int | None:
    """The size of the base vocabulary (as kept: its first ids) that ``tokenizer`` was continued from
    (``train(..., init_from=...)``), from the ``report.json`` training wrote in its directory
    ``source``: its ``vocab_size`` less the merges it learned beyond the ``inherited_merges``. None
    when it inherited no merge, or its report is missing or of another vocabulary."""
    try:
        report = json.loads(directory_file(source, "report.json", store) or "{}")
        kept = report["vocab_size"] - report["num_merges"] + report["inherited_merges"]
    except (ValueError, KeyError, TypeError):
        return None
    return kept if report["inherited_merges"] and report["vocab_size"] == len(tokenizer.vocab) else None


def training_curve(source: str | None, store: Store) -> list[tuple[int, float]]:
    """``(vocab_size, bytes_per_token)`` of the training data, from the ``compression.csv`` of a
    tokenizer directory, if it holds one."""
    text = directory_file(source, "compression.csv", store) or ""
    return [(int(r["vocab_size"]), float(r["bytes_per_token"])) for r in csv.DictReader(io.StringIO(text))]


def evaluation_figure(report: dict, store: Store) -> Any:
    """Bytes per token against vocabulary size, on a log axis (sizes from 256 to 100K and more, each
    as readable), its ticks at the sizes measured: for each tokenizer, its points on the held-out
    text joined by a line, its knee and its base marked, and, dashed, its training data's curve where
    its directory holds one."""
    axes = new_axes(f"Compression of {format_bytes(report['text_bytes'])} of held-out text")
    axes.set_xscale("log")
    for name, described in report["tokenizers"].items():
        rows = [r for r in report["results"] if r["tokenizer"] == name and r["bytes_per_token"] is not None]
        sizes, per_token = [r["vocab_size"] for r in rows], [r["bytes_per_token"] for r in rows]
        (line,) = axes.plot(sizes, per_token, marker="o", linewidth=1.6, label=f"{name}: held-out text")
        knee = described.get("knee")
        if knee is not None:
            mark_knee(axes, knee, per_token[sizes.index(knee)], line.get_color())
        for r in rows:
            if r["base"]:
                at = (r["vocab_size"], r["bytes_per_token"])
                axes.annotate("base", at, textcoords="offset points", xytext=(-8, 8), fontsize=8)
        curve = training_curve(described["source"], store)
        if curve:
            style = {"linestyle": "--", "linewidth": 1, "color": line.get_color()}
            axes.plot(*zip(*curve, strict=True), **style, label=f"{name}: training data")
    sizes = sorted({r["vocab_size"] for r in report["results"]})
    if len(sizes) <= 12:  # more would crowd the axis: then the log axis's own ticks
        from matplotlib.ticker import NullFormatter

        axes.set_xticks(sizes, [f"{size:,}" for size in sizes], rotation=45 if len(sizes) > 5 else 0)
        axes.xaxis.set_minor_formatter(NullFormatter())
    axes.legend(fontsize=8)
    return axes.figure
