"""The evaluate job: held-out inputs and tokenizers in; how well each compresses that text out.

``evaluate`` measures bytes per token (UTF-8 bytes of text over tokens) and, for inputs of records,
tokens per document, for each tokenizer given and for smaller vocabularies of each (a vocabulary of
``k`` ids is the bytes, the special tokens and the first merges: ``Tokenizer.truncated``). It plans
the inputs as ``encode`` does and measures each partition in a Dask task (``stages.evaluate``), which
hands back only counts, with one merging per tokenizer however many sizes are asked for; small
inputs with no cluster asked for are measured in this process. The
result is a report (a row per tokenizer and size), printed as a table by the command line
(``table``), and, given ``out``, ``evaluation.json`` and ``evaluation.png`` published whole.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dask
from dask.base import tokenize

from bpe_dask import interrupts
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.outputs import check_output_dir
from bpe_dask.io.publish import publish_directory
from bpe_dask.io.storage import Store, absolute, describe
from bpe_dask.jobs.cluster import NO_WARM_UP, WarmUp
from bpe_dask.jobs.context import Job, Run, cluster_threads, report_bad_records, run_tasks
from bpe_dask.jobs.counting import placement
from bpe_dask.jobs.options import JobOptions, PathLike, check_replacement_character
from bpe_dask.jobs.progress import MapProgress
from bpe_dask.sources.files import FileSource
from bpe_dask.sources.source import input_list
from bpe_dask.stages.count import CountSettings
from bpe_dask.stages.evaluate import Measure, Measured, measure_part, nested, pieces_at
from bpe_dask.tokenizer import Tokenizer
from bpe_dask.version import __version__
from bpe_dask.wording import format_bytes, plural

log = logging.getLogger(__name__)

FILES = ("evaluation.json", "evaluation.png")
TokenizerSource = PathLike | Tokenizer


@dataclass(frozen=True)
class Row:
    """One tokenizer at one vocabulary size, to measure."""

    name: str
    vocab_size: int
    tokenizer: Tokenizer  # whole: cut to ``vocab_size`` where it is measured (``_groups``)
    source: str | None  # the tokenizer's directory or file, absolute; None for a ``Tokenizer`` given


Group = tuple[CountSettings, list[Measure], list[int]]  # what counting takes; measures; rows in order


def evaluate(
    inputs: PathLike | Sequence[PathLike],
    tokenizers: TokenizerSource | Sequence[TokenizerSource] | Mapping[str, TokenizerSource],
    vocab_sizes: Sequence[int] | None = None,
    out: PathLike | None = None,
    *,
    trust_pattern: bool = False,
    **options,
) -> dict:
    """How well ``tokenizers`` compress ``inputs`` (held-out text); returns the report.

    ``tokenizers`` are directories `bpe-dask train` wrote, Hugging Face ``tokenizer.json`` files of the
    byte-level BPE kind, or ``Tokenizer`` objects, one or a list of them, or a mapping from the names
    the report gives them. Each is measured at its own vocabulary size and at each of ``vocab_sizes``
    it can be cut to (its first merges); a size one tokenizer cannot be cut to (above its own, or
    below its bytes and special tokens) is left out for that one, and one that none can is an error. Each
    tokenizer's special tokens are split out of the text, one token each, as ``encode`` does. The
    report's ``results`` hold a row per tokenizer and size: ``tokens``, ``bytes_per_token`` and, when
    every input holds records (Parquet, JSON Lines), ``tokens_per_document``. With ``out``, the
    directory ``out`` gets ``evaluation.json`` (the report) and ``evaluation.png`` (bytes per token
    against vocabulary size, a line per tokenizer). ``options`` are ``JobOptions`` fields.

    >>> from bpe_dask.rules import reference
    >>> vocab, merges = reference.train(["low lower lowest newest widest"] * 3, 265, ["<|endoftext|>"])
    >>> _ = open("held-out.txt", "w").write("the lowest<|endoftext|>the newest")
    >>> toy = Tokenizer(vocab, merges, ["<|endoftext|>"])
    >>> report = evaluate("held-out.txt", {"toy": toy}, [257, 260])  # small: measured in this process
    >>> [(r["vocab_size"], r["tokens"], r["bytes_per_token"]) for r in report["results"]]
    [(257, 21, 1.5714), (260, 16, 2.0625), (265, 13, 2.5385)]
    >>> print(table(report))
    tokenizer  vocab size  tokens  bytes/token
    toy               257      21        1.571
    toy               260      16        2.062
    toy               265      13        2.538
    """
    started = time.perf_counter()
    refused = sorted({"special_tokens", "pattern"} & options.keys())
    if refused:
        raise BpeDaskError(
            f"evaluate takes each tokenizer's own special tokens and split pattern, not {refused[0]}"
        )
    opts = JobOptions.of(**options)
    out = absolute(os.fspath(out)) if out is not None else None
    sources = _named(tokenizers)
    paths = [source for _, source in sources if isinstance(source, str)]
    job = Job.start(opts, inputs, [out, *paths])
    loaded = {name: _load(source, opts.engine, job.store, trust_pattern) for name, source in sources}
    rows = _rows(loaded, dict(sources), _checked_sizes(vocab_sizes))
    for tokenizer in loaded.values():
        check_replacement_character(tokenizer.special_tokens, opts.utf8_errors)
    if out:  # 1. the output may be written
        check_output_dir(out, opts.overwrite, lambda name: name in FILES, job.store)
    source = job.find_source(input_list(inputs), exclude=[out])  # 2. what the input is: files
    groups = _groups(rows, opts)
    for settings, _, _ in groups[1:]:  # text a pattern leaves out has bytes but no tokens
        job.check_pattern(source, settings.pretokenizer())
    wheres = [placement(job, source, g[0], small_here=True, stages=("evaluate",)) for g in groups]  # 3.
    groups = [(where.settings, *rest) for where, (_, *rest) in zip(wheres, groups, strict=True)]
    in_threads = all(where.in_threads for where in wheres)
    patterns = tuple(
        dict.fromkeys(p for where in wheres for p in where.warm_up.patterns if where.warm_up.stages)
    )
    warm_up = WarmUp(patterns, ("evaluate",)) if patterns else NO_WARM_UP
    pretokenizer = groups[0][0].pretokenizer()
    with job.running(source, wheres[0].here, pretokenizer, in_threads, warm_up, writes=False) as run:
        measured = _measure(run, job, source, groups)  # 4. measure
    report = _report(job, source, rows, groups, measured, started)  # 5. report
    if out:
        files = {
            "evaluation.json": json.dumps(report, indent=2) + "\n",
            "evaluation.png": plot(report, job.store),
        }
        interrupts.check()  # nothing is published after a signal
        publish_directory(out, files, job.store, overwrite=opts.overwrite)  # 6. publish
        log.info("wrote %s/evaluation.json and evaluation.png", out)
    return report


def _named(
    tokenizers: TokenizerSource | Sequence[TokenizerSource] | Mapping[str, TokenizerSource],
) -> list[tuple[str, str | Tokenizer]]:
    """Each tokenizer under its name in the report (a path as given; ``tokenizer 1``, ... for objects),
    paths made absolute."""
    if isinstance(tokenizers, Mapping):
        named = list(tokenizers.items())
    else:
        given = [tokenizers] if isinstance(tokenizers, (str, os.PathLike, Tokenizer)) else list(tokenizers)
        named = [
            (os.fspath(t) if not isinstance(t, Tokenizer) else f"tokenizer {k}", t)
            for k, t in enumerate(given, 1)
        ]
    if not named:
        raise BpeDaskError("no tokenizer to evaluate")
    names = [name for name, _ in named]
    twice = [name for name in names if names.count(name) > 1]
    if twice:
        raise BpeDaskError(f"tokenizer {twice[0]} is given twice")
    result = []
    for name, source in named:
        if not isinstance(source, (str, os.PathLike, Tokenizer)):
            raise BpeDaskError(
                f"tokenizer {name}: a directory, a tokenizer.json or a Tokenizer, not {source!r}"
            )
        result.append((str(name), source if isinstance(source, Tokenizer) else absolute(os.fspath(source))))
    return result


def _load(source: str | Tokenizer, engine: str, store: Store, trust_pattern: bool) -> Tokenizer:
    """A ``Tokenizer``, with the job's engine unless that is ``auto``; from a tokenizer directory, or a
    Hugging Face ``tokenizer.json`` file."""
    if isinstance(source, Tokenizer):
        if engine in ("auto", source.engine):
            return source
        pattern = source.pretokenizer.pattern
        return Tokenizer(source.vocab, source.merges, source.special_tokens, pattern, engine)
    fs, path = store.fs(source)
    try:
        is_file = fs.isfile(path)
    except Exception as error:
        raise BpeDaskError(f"tokenizer {source}: cannot read it ({describe(error)})") from None
    if is_file:
        return Tokenizer.from_tokenizer_json(source, store.options, engine, trust_pattern=trust_pattern)
    return Tokenizer.load(source, None, store.options, engine, trust_pattern=trust_pattern)


def _checked_sizes(vocab_sizes: Sequence[int] | None) -> list[int]:
    if vocab_sizes is None:
        return []
    if isinstance(vocab_sizes, (int, str)) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in vocab_sizes
    ):
        raise BpeDaskError(f"vocab_sizes must be a list of whole numbers, got {vocab_sizes!r}")
    return sorted(set(vocab_sizes))


def _rows(loaded: dict[str, Tokenizer], sources: dict[str, str | Tokenizer], sizes: list[int]) -> list[Row]:
    """Each tokenizer at each size it can be cut to, then at its own. A size no tokenizer can be cut
    to is an error; one that only some can, is left out for the others, with a line saying so."""

    def bounds(tokenizer: Tokenizer) -> tuple[int, int]:  # the bytes and special tokens; every id
        return 256 + len(tokenizer.special_tokens), len(tokenizer.vocab)

    for size in sizes:
        if all(size < bounds(t)[0] for t in loaded.values()):
            name = min(loaded, key=lambda n: bounds(loaded[n])[0])
            raise BpeDaskError(
                f"vocabulary size {size:,} is smaller than {name}'s 256 bytes and "
                f"{plural(len(loaded[name].special_tokens), 'special token')}"
            )
        if all(size > bounds(t)[1] for t in loaded.values()):
            name = max(loaded, key=lambda n: bounds(loaded[n])[1])
            raise BpeDaskError(
                f"vocabulary size {size:,} is larger than the tokenizers: {name} has "
                f"{bounds(loaded[name])[1]:,} ids"
            )
    rows = []
    for name, tokenizer in loaded.items():
        first, whole = bounds(tokenizer)
        source = sources[name] if isinstance(sources[name], str) else None
        for size in sizes:
            if not first <= size <= whole:
                log.info(
                    "%s takes %s to %s ids: not measured at %s", name, f"{first:,}", f"{whole:,}", f"{size:,}"
                )
            elif size < whole:
                rows.append(Row(name, size, tokenizer, source))
        rows.append(Row(name, whole, tokenizer, source))
    return rows


def _groups(rows: list[Row], opts: JobOptions) -> list[Group]:
    """The rows by what counting their text takes: the split pattern and the special tokens. Text is
    read and counted once per group (usually one), its partitions planned for that group's cuts.
    Each tokenizer is one ``Measure`` at all its sizes when its merges nest, else one per size."""
    by_settings: dict[CountSettings, dict[str, list[int]]] = {}
    for k, row in enumerate(rows):
        tokenizer = row.tokenizer
        settings = CountSettings(
            tuple(tokenizer.special_tokens),
            opts.utf8_errors,
            tokenizer.pretokenizer.pattern.spec,
            opts.engine,
        )
        by_settings.setdefault(settings, {}).setdefault(row.name, []).append(k)
    groups = []
    for settings, by_name in by_settings.items():
        measures, order = [], []
        for members in by_name.values():
            tokenizer = rows[members[0]].tokenizer
            whole = len(tokenizer.vocab)
            if nested(tokenizer):
                pieces = [
                    None if rows[k].vocab_size == whole else pieces_at(tokenizer, rows[k].vocab_size)
                    for k in members
                ]
                measures.append(Measure(tokenizer, tuple(pieces)))
            else:
                log.info("%s: its merges do not nest, so each size is encoded apart", rows[members[0]].name)
                measures += [
                    Measure(
                        tokenizer if rows[k].vocab_size == whole else tokenizer.truncated(rows[k].vocab_size)
                    )
                    for k in members
                ]
            order += members
        groups.append((settings, measures, order))
    return groups


def _measure(run: Run, job: Job, source: FileSource, groups: list[Group]) -> list[list[Measured]]:
    """Each group's measures of every part: here, or as a task per part and group on the cluster,
    each tokenizer sent to every worker once."""
    if run.client is None:
        store = job.store
        chunk = job.options.chunk_size
        return [
            [
                measure_part(part, measures, settings, store)
                for part in source.plan(settings.pretokenizer(), chunk)
            ]
            for settings, measures, _ in groups
        ]
    client, threads, tag = run.client, cluster_threads(run.client), uuid.uuid4().hex  # nothing to reuse
    tasks, sizes, counts = [], [], []
    for g, (settings, measures, _) in enumerate(groups):
        parts = source.plan(settings.pretokenizer(), job.options.chunk_size, threads)
        shared = [client.scatter(measure, broadcast=True, hash=False) for measure in measures]
        tasks += [
            dask.delayed(measure_part, pure=True)(
                part, shared, settings, job.store, dask_key_name=f"evaluate-{tokenize(tag, g, part.key())}"
            )
            for part in parts
        ]
        sizes += [part.size for part in parts]
        counts.append(len(parts))
    total = source.known_bytes * len(groups)
    progress = MapProgress("evaluate", len(tasks), total) if job.options.show_progress else None
    measured = run_tasks(client, tasks, progress, sizes, lambda m: (m.text_bytes, 0))
    return [measured[sum(counts[:g]) : sum(counts[: g + 1])] for g in range(len(groups))]


def _report(
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
    read = source.known_bytes + sum(m.read_bytes for m in first)  # and what inputs of no known size held
    bad = BadRecords()
    for m in first:
        bad.merge(m.bad_records)
    report_bad_records(bad)
    records = source.all_records
    tokens = [0] * len(rows)
    for (_, _, order), parts in zip(groups, measured, strict=True):
        for position, k in enumerate(order):
            tokens[k] = sum(m.tokens[position] for m in parts)
    if not text_bytes:
        log.warning("the inputs hold no text (%s)", format_bytes(read))
    seconds = time.perf_counter() - started
    return {
        "version": __version__,
        "inputs": source.shown,
        "input_bytes": read,
        "text_bytes": text_bytes,
        "documents": documents if records else None,
        "bad_records_skipped": bad.count,
        "utf8_errors": job.options.utf8_errors,
        "partitions": len(first),
        "tokenizers": _described(rows),
        "results": [
            _result(row, n, text_bytes, documents if records else None)
            for row, n in zip(rows, tokens, strict=True)
        ],
        "seconds": seconds,
        "bytes_per_second": text_bytes / seconds,
    }


def _result(row: Row, tokens: int, text_bytes: int, documents: int | None) -> dict:
    return {
        "tokenizer": row.name,
        "vocab_size": row.vocab_size,
        "tokens": tokens,
        "bytes_per_token": round(text_bytes / tokens, 4) if tokens else None,
        "tokens_per_document": round(tokens / documents, 2) if documents else None,
    }


def _described(rows: list[Row]) -> dict[str, dict]:
    described = {}
    for row in rows:
        tokenizer = row.tokenizer
        described.setdefault(
            row.name,
            {
                "source": row.source,
                "special_tokens": tokenizer.special_tokens,
                "pattern": tokenizer.pretokenizer.pattern.spec,
            },
        )
        described[row.name]["vocab_size"] = len(tokenizer.vocab)
    return described


def table(report: dict) -> str:
    """The report's rows as a table, numbers aligned right; tokens per document when the inputs are
    records."""
    documents = report.get("documents") is not None
    header = ["tokenizer", "vocab size", "tokens", "bytes/token", *(["tokens/doc"] if documents else [])]
    lines = [header]
    for r in report["results"]:
        per_token = "-" if r["bytes_per_token"] is None else f"{r['bytes_per_token']:.3f}"
        line = [r["tokenizer"], f"{r['vocab_size']:,}", f"{r['tokens']:,}", per_token]
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


def training_curve(source: str | None, store: Store) -> list[tuple[int, float]]:
    """``(vocab_size, bytes_per_token)`` of the training data, from the ``compression.csv`` of a
    tokenizer directory, if it holds one."""
    if source is None:
        return []
    fs, path = store.fs(f"{source.rstrip('/')}/compression.csv")
    try:
        text = fs.cat_file(path).decode()
    except (OSError, ValueError):  # not a directory, or one written before the curve existed
        return []
    return [(int(r["vocab_size"]), float(r["bytes_per_token"])) for r in csv.DictReader(io.StringIO(text))]


def plot(report: dict, store: Store) -> bytes:
    """A PNG of bytes per token against vocabulary size: for each tokenizer, its points on the held-out
    text joined by a line and, dashed, its training data's curve where its directory holds one."""
    import matplotlib

    matplotlib.use("Agg")  # no screen: draw to a buffer
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.2), dpi=110)
    axes = figure.subplots()
    for name, described in report["tokenizers"].items():
        points = [
            (r["vocab_size"], r["bytes_per_token"])
            for r in report["results"]
            if r["tokenizer"] == name and r["bytes_per_token"] is not None
        ]
        (line,) = axes.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker="o",
            linewidth=1.6,
            label=f"{name}: held-out text",
        )
        curve = training_curve(described["source"], store)
        if curve:
            axes.plot(
                [c[0] for c in curve],
                [c[1] for c in curve],
                linestyle="--",
                linewidth=1,
                color=line.get_color(),
                label=f"{name}: training data",
            )
    axes.set_xlabel("vocabulary size")
    axes.set_ylabel("bytes per token")
    axes.set_title(f"Compression of {format_bytes(report['text_bytes'])} of held-out text")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
