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

import json
import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence

import dask
from dask.base import tokenize

from bpe_dask import interrupts
from bpe_dask.cluster.client import NO_WARM_UP, WarmUp
from bpe_dask.cluster.progress import MapProgress
from bpe_dask.cluster.tasks import cluster_threads, run_tasks
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.outputs import check_output_dir
from bpe_dask.io.publish import publish_directory
from bpe_dask.io.storage import absolute
from bpe_dask.io.written import EVALUATION, EVALUATION_FILES
from bpe_dask.jobs.context import Job, Run, job_tokenizer
from bpe_dask.jobs.counting import placement
from bpe_dask.jobs.evaluation import Group, Row, base_size, evaluation_figure, evaluation_report
from bpe_dask.jobs.options import JobOptions, PathLike, check_replacement_character
from bpe_dask.sources.files import FileSource
from bpe_dask.sources.source import input_list
from bpe_dask.stages.compression import png
from bpe_dask.stages.count import CountSettings
from bpe_dask.stages.evaluate import Measure, Measured, measure_part, nested, pieces_at
from bpe_dask.tokenizer import Tokenizer
from bpe_dask.wording import plural

log = logging.getLogger(__name__)

TokenizerSource = PathLike | Tokenizer


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
    below its bytes and special tokens) is left out for that one, and one that none can is an error. A
    directory `bpe-dask train` wrote of a tokenizer continued from a base (``init_from``) is also
    measured, with no size asked, at the size of that base as kept (its first ids: the base
    itself, as ``Tokenizer.truncated`` cuts the tokenizer), which the ``report.json`` beside it tells
    (``base_size``); a ``Tokenizer`` object does not tell it. Each tokenizer's special tokens are split
    out of the text, one token each, as ``encode`` does. The report's ``results`` hold a row per
    tokenizer and size: ``tokens``, ``bytes_per_token``, ``base`` (whether the size is its base's; the
    table names that row ``NAME (base)``) and, when every input holds records (Parquet, JSON Lines),
    ``tokens_per_document``. With ``out``, the directory ``out`` gets ``evaluation.json`` (the
    report) and ``evaluation.png`` (bytes per token against vocabulary size, a line per tokenizer).
    ``options`` are ``JobOptions`` fields.

    >>> from bpe_dask.rules import reference
    >>> vocab, merges = reference.train(["low lower lowest newest widest"] * 3, 265, ["<|endoftext|>"])
    >>> _ = open("held-out.txt", "w").write("the lowest<|endoftext|>the newest")
    >>> toy = Tokenizer(vocab, merges, ["<|endoftext|>"])
    >>> report = evaluate("held-out.txt", {"toy": toy}, [257, 260])  # small: measured in this process
    >>> [(r["vocab_size"], r["tokens"], r["bytes_per_token"]) for r in report["results"]]
    [(257, 21, 1.5714), (260, 16, 2.0625), (265, 13, 2.5385)]
    >>> from bpe_dask.jobs.evaluation import table
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
    opts, out = JobOptions.of(**options), absolute(os.fspath(out)) if out is not None else None
    sources = _named(tokenizers)
    job = Job.start(opts, inputs, [out, *[source for _, source in sources if isinstance(source, str)]])
    rows = _rows(job, sources, vocab_sizes, trust_pattern)
    if out:  # 1. the output may be written
        check_output_dir(out, opts.overwrite, EVALUATION.owns, job.store)
    source = job.find_source(input_list(inputs), exclude=[out])  # 2. what the input is: files
    groups, here, in_threads, warm_up = _placed(job, source, _groups(rows, opts))  # 3. where it is read
    with job.running(source, here, groups[0][0].pretokenizer(), in_threads, warm_up, writes=False) as run:
        measured = _measure(run, job, source, groups)  # 4. measure
    report = evaluation_report(job, source, rows, groups, measured, started)  # 5. report
    if out:
        table, picture = EVALUATION_FILES
        figure = png(evaluation_figure(report, job.store))
        files = {table: json.dumps(report, indent=2) + "\n", picture: figure}
        interrupts.check()  # nothing is published after a signal
        publish_directory(out, files, job.store, overwrite=opts.overwrite)  # 6. publish
        log.info("wrote %s/evaluation.json and evaluation.png", out)
    return report


def _placed(job: Job, source: FileSource, groups: list[Group]) -> tuple[list[Group], bool, bool, WarmUp]:
    """Where the groups are measured (as counting is placed), with the settings they count with; the
    split pattern checked for each group but the first (``Job.running`` checks that one)."""
    for settings, _, _ in groups[1:]:  # text a pattern leaves out has bytes but no tokens
        job.check_pattern(source, settings.pretokenizer())
    wheres = [placement(job, source, g[0], stages=("evaluate",)) for g in groups]
    groups = [(where.settings, *rest) for where, (_, *rest) in zip(wheres, groups, strict=True)]
    in_threads = all(where.in_threads for where in wheres)
    patterns = tuple(dict.fromkeys(p for w in wheres for p in w.warm_up.patterns if w.warm_up.stages))
    return groups, wheres[0].here, in_threads, WarmUp(patterns, ("evaluate",)) if patterns else NO_WARM_UP


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


def _rows(
    job: Job,
    sources: list[tuple[str, str | Tokenizer]],
    vocab_sizes: Sequence[int] | None,
    trust_pattern: bool,
) -> list[Row]:
    """The tokenizers loaded, and the rows to measure: each tokenizer at each of ``vocab_sizes`` it
    can be cut to and at the size of the base it was continued from (``base_size``), then at its
    own. A size no tokenizer can be cut to is an error; one that only some can, is left out for the
    others, with a line saying so."""
    opts = job.options
    loaded = {name: job_tokenizer(source, job.store, opts.engine, trust_pattern) for name, source in sources}
    for tokenizer in loaded.values():
        check_replacement_character(tokenizer.special_tokens, opts.utf8_errors)
    if isinstance(vocab_sizes, (int, str)) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in vocab_sizes or ()
    ):
        raise BpeDaskError(f"vocab_sizes must be a list of whole numbers, got {vocab_sizes!r}")
    sizes = sorted(set(vocab_sizes or ()))
    # the bytes and special tokens; every id
    bounds = {name: (t.vocabulary.first_size, len(t.vocab)) for name, t in loaded.items()}
    for size in sizes:
        if all(size < first for first, _ in bounds.values()):
            name = min(bounds, key=lambda n: bounds[n][0])
            raise BpeDaskError(
                f"vocabulary size {size:,} is smaller than {name}'s 256 bytes and "
                f"{plural(len(loaded[name].special_tokens), 'special token')}"
            )
        if all(size > whole for _, whole in bounds.values()):
            name = max(bounds, key=lambda n: bounds[n][1])
            raise BpeDaskError(
                f"vocabulary size {size:,} is larger than the tokenizers: {name} has {bounds[name][1]:,} ids"
            )
    rows = []
    for name, source in sources:
        (first, whole), tokenizer = bounds[name], loaded[name]
        path = source if isinstance(source, str) else None
        base = base_size(source, tokenizer, job.store)
        for size in sorted({*sizes, base}) if base else sizes:
            if not first <= size <= whole:
                log.info(
                    "%s takes %s to %s ids: not measured at %s", name, f"{first:,}", f"{whole:,}", f"{size:,}"
                )
            elif size < whole:
                rows.append(Row(name, size, tokenizer, path, base=size == base))
        rows.append(Row(name, whole, tokenizer, path))
    return rows


def _groups(rows: list[Row], opts: JobOptions) -> list[Group]:
    """The rows by what counting their text takes: the split pattern and the special tokens. Text is
    read and counted once per group (usually one), its partitions planned for that group's cuts.
    Each tokenizer is one ``Measure`` at all its sizes when its merges nest, else one per size."""
    by_settings: dict[CountSettings, dict[str, list[int]]] = {}
    for k, row in enumerate(rows):
        specials, pattern = tuple(row.tokenizer.special_tokens), row.tokenizer.pretokenizer.pattern.spec
        settings = CountSettings(specials, opts.utf8_errors, pattern, opts.engine)
        by_settings.setdefault(settings, {}).setdefault(row.name, []).append(k)
    groups = []
    for settings, by_name in by_settings.items():
        measures = []
        for name, members in by_name.items():
            tokenizer, sizes = rows[members[0]].tokenizer, [rows[k].vocab_size for k in members]
            whole = len(tokenizer.vocab)
            if nested(tokenizer):
                pieces = [None if size == whole else pieces_at(tokenizer, size) for size in sizes]
                measures.append(Measure(tokenizer, tuple(pieces)))
            else:
                log.info("%s: its merges do not nest, so each size is encoded apart", name)
                measures += [Measure(tokenizer if s == whole else tokenizer.truncated(s)) for s in sizes]
        groups.append((settings, measures, [k for members in by_name.values() for k in members]))
    return groups


def _measure(run: Run, job: Job, source: FileSource, groups: list[Group]) -> list[list[Measured]]:
    """Each group's measures of every part: here, or as a task per part and group on the cluster,
    each tokenizer sent to every worker once."""
    store, chunk = job.store, job.options.chunk_size
    if run.client is None:
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
        parts = interrupts.call(source.plan, settings.pretokenizer(), chunk, threads)
        shared = [client.scatter(measure, broadcast=True, hash=False) for measure in measures]
        tasks += [
            dask.delayed(measure_part, pure=True)(
                part, shared, settings, store, dask_key_name=f"evaluate-{tokenize(tag, g, part.key())}"
            )
            for part in parts
        ]
        sizes += [part.size for part in parts]
        counts.append(len(parts))
    total = source.known_bytes * len(groups)
    progress = MapProgress("evaluate", len(tasks), total) if job.options.show_progress else None
    measured = run_tasks(client, tasks, progress, sizes, lambda m: (m.text_bytes, 0))
    return [measured[sum(counts[:g]) : sum(counts[: g + 1])] for g in range(len(groups))]
