"""The training jobs: inputs (or counts) in, a trained tokenizer out.

``train`` is the whole job, as named steps: find the source, decide where to count it, count
(``counting``), merge (``merging``), report, publish. ``train_from_iterator`` is ``train`` of the
documents an iterable gives; ``merge`` runs the merge loop on a counts table that ``count_words``
wrote; ``train_bpe`` is the CS336-compatible entry point: vocabulary and merges back, no files.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from dask.base import tokenize

from bpe_dask import interrupts
from bpe_dask.cluster.tasks import other_processes_peak_rss_bytes
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import recorded_settings
from bpe_dask.io.in_memory import DEFAULT_BATCH_SIZE
from bpe_dask.io.storage import Store, absolute
from bpe_dask.io.tokenizer_files import read_base
from bpe_dask.io.tokenizer_formats import check_special_token_names
from bpe_dask.jobs.context import Job
from bpe_dask.jobs.counting import Placement, count_source, counting_run, start_counting
from bpe_dask.jobs.merging import Goal, Limits, Merged, Merges, Vocab, merge_counts, merges_on_worker
from bpe_dask.jobs.on_cluster import forget_shards
from bpe_dask.jobs.options import JobOptions, PathLike, positive_int
from bpe_dask.jobs.report import read_report, training_report
from bpe_dask.jobs.tokenizer_output import (
    check_tokenizer_dir,
    compression_curve,
    publish_tokenizer,
    tokenizer_files,
    warn_if_empty,
    warn_if_short,
)
from bpe_dask.rules.patterns import SUPERWORDS
from bpe_dask.rules.pretokenize import split_pattern
from bpe_dask.rules.vocabulary import Vocabulary, training_base
from bpe_dask.sources.source import Source
from bpe_dask.stages import compression
from bpe_dask.stages.compile_ahead import compile_merge_loop_in_background
from bpe_dask.stages.counters import SpecialsSeen

log = logging.getLogger(__name__)
PLOT_EARLY = 16 * 2**20  # input bytes below which compression.png's library loads as the job starts


def train(
    inputs: Any,
    vocab_size: int,
    out: PathLike,
    special_tokens: Sequence[str] = (),
    *,
    init_from: PathLike | None = None,
    inherit: int | None = None,
    superwords_after: int | None = None,
    superwords_pattern: str = "superbpe",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: Sequence[str] = (),
    **options,
) -> dict:
    """Count ``inputs``, learn merges up to ``vocab_size``, and publish the tokenizer directory ``out``.

    Returns the report (also written as ``out/report.json``). ``init_from`` is a tokenizer to
    continue training from, every id it has kept (``training_goal``), and ``inherit`` how many of its
    merges to keep (all: None). ``superwords_after`` makes a superword tokenizer (SuperBPE): merges
    up to that many tokens with the job's split pattern, then on to ``vocab_size`` with
    ``superwords_pattern`` (``superbpe``, or ``superbpe-lines``, which no token crosses a line end
    of: ``train_superwords``). ``min_frequency``, ``max_token_length`` (bytes), ``max_words`` and
    ``forbid`` are the ``Limits`` of the merge loop (the last two SuperBPE's: 4 and ``[": "]`` in
    its recipe). ``options`` are ``JobOptions``
    fields; ``merge_on`` is ``"client"``, ``"worker"``, or ``"auto"``: on a worker when the cluster
    is not an embedded LocalCluster, so the client never holds the word counts. ``inputs`` are
    paths, URLs or globs, or any other source (``sources.source``): a Dask DataFrame column or Bag
    of documents, counted on its cluster; Arrow text held here (a ``pyarrow`` Table, a Hugging Face
    dataset), counted on threads of this process.

    >>> from distributed import Client
    >>> _ = open("corpus.txt", "w").write("low lower lowest<|endoftext|>newest widest")
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     report = train("corpus.txt", 260, "tokenizer", ["<|endoftext|>"], client=client)
    >>> report["num_merges"], open("tokenizer/merges.txt").read().splitlines()
    (3, ['w e', 's t', 'l o'])
    """
    limits = Limits(min_frequency, max_token_length, max_words, forbid)
    opts, goal = training_goal(vocab_size, special_tokens, options, limits, init_from, inherit)
    if superwords_after is not None:
        return train_superwords(inputs, out, opts, goal, superwords_after, superwords_pattern)[0]
    return _train(inputs, out, opts, goal, {})[0]


def train_superwords(
    inputs: Any, out: PathLike | None, opts: JobOptions, goal: Goal, after: int, pattern: str = "superbpe"
) -> tuple[dict, Merged]:
    """SuperBPE's two stages as one job: 1. merges up to ``after`` tokens with the job's split pattern
    (from the bytes, or from ``goal``'s base), 2. training continued from those merges with
    ``pattern`` (one of ``rules.patterns.SUPERWORDS``), up to ``goal``'s size
    (docs/exactness.md#superword-tokenizers). The same tokenizer as the two stages by hand, ``out``
    published once, at the end; the report is stage 2's, with stage 1's time."""
    started = time.perf_counter()
    _check_superwords(opts, goal, after, pattern)
    if out:  # refused now, not after stage 1
        out = absolute(out)
        job = Job.start(opts, None, [out])
        check_tokenizer_dir(out, opts.overwrite, job.store)
    first = goal.base
    if after > goal.first_size:
        merged = _train(inputs, None, opts, replace(goal, vocab_size=after), {})[1]  # 1. words
        first = Vocabulary(merged.vocab, merged.merges, opts.special_tokens)
    told = {"superwords_after": after, "timings": {"stage_1": time.perf_counter() - started}}
    superwords = replace(opts, pattern=split_pattern(pattern).name)
    return _train(inputs, out, superwords, replace(goal, base=first), {}, told)  # 2. superwords


def _check_superwords(opts: JobOptions, goal: Goal, after: int, pattern: str) -> None:
    """One line for a transition ``after`` that leaves a stage nothing to learn, a first stage that
    would not split words, or a second stage's pattern that is not SuperBPE's."""
    if split_pattern(pattern) not in SUPERWORDS:
        names = " or ".join(p.name for p in SUPERWORDS)
        raise BpeDaskError(f"superwords_pattern= must be {names}, got {pattern!r}")
    if not (isinstance(after, int) and not isinstance(after, bool)):
        raise BpeDaskError(f"superwords_after= must be a whole number of tokens, got {after!r}")
    if after >= goal.vocab_size:
        raise BpeDaskError(
            f"superwords_after={after} must be below the vocab size ({goal.vocab_size:,}): superwords are "
            "learned from there to the vocab size"
        )
    if after < goal.first_size:
        raise BpeDaskError(
            f"superwords_after={after} is below the {goal.first_size:,} tokens training starts from"
        )
    if split_pattern(opts.pattern) in SUPERWORDS:
        raise BpeDaskError(
            f"superwords_after= learns its first stage with a pattern that splits words, not {opts.pattern}: "
            "give another pattern (gpt2 by default), or continue a superword tokenizer with pattern=superbpe "
            "and no superwords_after="
        )


def train_from_iterator(
    iterable: Iterable[str | bytes],
    vocab_size: int,
    out: PathLike,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    length: int | None = None,
    init_from: PathLike | None = None,
    inherit: int | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: Sequence[str] = (),
    **options,
) -> dict:
    """``train`` of the documents an iterable gives (``str``, or ``bytes`` of UTF-8), counted here.

    Each element is a document: no pre-token crosses from one into the next, and special tokens
    inside one are split out, so the merges are those of the documents joined by a special token
    (one that cannot overlap itself, as ``<|endoftext|>``). Counted in batches of ``batch_size``
    documents on ``workers`` threads of this process (one per core by default), in bounded memory;
    ``length``, how many documents to expect, gives ``show_progress=True`` a percentage and an ETA.
    ``options`` are the ``JobOptions`` that apply here (``utf8_errors``, ``engine``, ``overwrite``,
    ``storage_options`` for ``out``, ...). Returns the report, also written as ``out/report.json``.

    >>> documents = ["low lower lowest", "newest widest"]
    >>> report = train_from_iterator(iter(documents), 260, "tokenizer", ["<|endoftext|>"])
    >>> report["documents"], open("tokenizer/merges.txt").read().splitlines()
    (2, ['w e', 's t', 'l o'])
    """
    limits = Limits(min_frequency, max_token_length, max_words, forbid)
    options = {**options, "pattern": pattern} if pattern is not None else options
    opts, goal = training_goal(vocab_size, special_tokens, options, limits, init_from, inherit)
    iterating = {"documents": True, "batch_size": positive_int(batch_size, "batch_size"), "length": length}
    return _train(iterable, out, opts, goal, iterating)[0]


def _train(
    inputs: Any, out: PathLike | None, opts: JobOptions, goal: Goal, iterating: dict, told: dict | None = None
) -> tuple[dict, Merged]:
    """The training job's steps, for any source: the report (with what ``told`` adds) and what the
    merge loop learned; with no ``out`` (``train_bpe``), nothing is published."""
    started = time.perf_counter()
    out = absolute(out) if out else None
    job, source, where = start_counting(inputs, opts, out, check_tokenizer_dir, iterating)  # 1-3.
    plotting = compression.Plotting(early=out is not None and source.size < PLOT_EARLY)  # known small
    if not where.here and job.options.merge_on != "worker" and job.starts_cluster:
        compile_merge_loop_in_background(opts.engine, source.known_bytes, goal.vocab_size)
    with plotting, counting_run(job, source, where, out) as run:
        on_worker = merges_on_worker(job, run)
        counts_file = f"{run.work.rstrip('/')}/counts/{_digest(source, where)}.parquet" if on_worker else None
        counted = count_source(job, source, where, run, counts_file)  # 4. count
        timings = {"count": time.perf_counter() - started}
        if out:  # its library loads while the merge loop runs
            plotting.start()
        merged = merge_counts(job, run.client, counts_file or counted.hand_over, goal)  # 5. merge
        workers_peak = other_processes_peak_rss_bytes(run.client) if run.client is not None else None
        curve = compression_curve(merged, opts.special_tokens, counted.specials)
        if out:  # the tokenizer's files take a moment (tiktoken checks its ranks): made as the cluster closes
            tokenizer = (merged, opts.special_tokens, opts.pattern, curve, opts.roles())
            files = plotting.draw(tokenizer_files, *tokenizer)
    warn_if_empty(merged.unique_words, counted.input_bytes)
    read = read_report(counted, opts.utf8_errors, opts.pattern)  # 6. report
    report = training_report(read, merged, goal, timings)
    report["merge_ran_on"] = "worker" if on_worker else "client"
    for name, value in (told or {}).items():
        report[name] = {**report[name], **value} if isinstance(value, dict) else value
    if workers_peak is not None:
        report["workers_peak_rss_bytes"] = workers_peak
    report["timings"]["total"] = time.perf_counter() - started
    if out:
        made = interrupts.wait(files.result)
        publish_tokenizer(out, merged, opts, report, job.store, goal.limits, made, curve)  # 7. publish
    else:
        warn_if_short(merged, goal.vocab_size, goal.limits)
    forget_shards(source, counted.shards, job.store)
    return report, merged


def _digest(source: Source, where: Placement) -> str:
    """A name for what the job counts: its inputs, as they are now, and the settings."""
    return tokenize(source.identity(), where.settings.key())


def merge(
    counts: PathLike,
    vocab_size: int,
    out: PathLike,
    special_tokens: Sequence[str] | None = None,
    *,
    init_from: PathLike | None = None,
    inherit: int | None = None,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: Sequence[str] = (),
    **options,
) -> dict:
    """The merge loop over a counts table written by ``count_words``, then publish ``out``.

    ``special_tokens`` default to those the counts were made with (the counts file records them);
    other special tokens than those are refused: the counts were split on the recorded ones. So with
    the ``pattern`` option: it defaults to the recorded split pattern, which the tokenizer keeps.
    ``init_from``, ``inherit`` and the limits (``min_frequency``, ...) are those of ``train``.

    >>> from distributed import Client
    >>> from bpe_dask import count_words
    >>> _ = open("corpus.txt", "w").write("low lower lowest<|endoftext|>newest widest")
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     _ = count_words("corpus.txt", ["<|endoftext|>"], out="counts.parquet", client=client)
    >>> merge("counts.parquet", 259, "tokenizer")["special_tokens"]  # as the counts were made
    ['<|endoftext|>']
    >>> open("tokenizer/merges.txt").read().splitlines()
    ['w e', 's t']
    """
    started = time.perf_counter()
    counts, out = absolute(counts), absolute(out)
    recorded = recorded_settings(counts, Store(JobOptions.of(**options).storage_options))
    special_tokens = _special_tokens_for(counts, special_tokens, recorded)
    options = {**options, "pattern": _pattern_for(counts, options.get("pattern"), recorded)}
    limits = Limits(min_frequency, max_token_length, max_words, forbid)
    opts, goal = training_goal(vocab_size, special_tokens, options, limits, init_from, inherit)
    job = Job.start(opts, None, [counts, out])
    check_tokenizer_dir(out, opts.overwrite, job.store)
    merged = merge_counts(job, None, counts, goal)  # read here
    warn_if_empty(merged.unique_words, None)
    read = {"counts": counts, "counted_with": recorded, "pattern": opts.pattern}
    report = training_report(read, merged, goal, {})
    report["timings"]["total"] = time.perf_counter() - started
    seen = (recorded or {}).get("special_tokens_seen")  # absent from counts an older bpe-dask wrote
    curve = compression_curve(merged, opts.special_tokens, None if seen is None else SpecialsSeen(**seen))
    if seen is not None:
        report["text_bytes"] = merged.text_bytes + seen["bytes"]
    publish_tokenizer(out, merged, opts, report, job.store, goal.limits, curve=curve)
    return report


def _special_tokens_for(counts: str, given: Sequence[str] | None, recorded: dict | None) -> Sequence[str]:
    """The special tokens the counts were made with; others given are refused."""
    if recorded is None:
        return given or ()
    counted_with = recorded.get("special_tokens", [])
    if given is None:
        return counted_with
    if set(given) != set(counted_with):
        raise BpeDaskError(
            f"{counts} was counted with special tokens {counted_with!r}, not {list(given)!r}: leave "
            "special_tokens= out to use the recorded ones, or count again with the ones you want"
        )
    return given


def _pattern_for(counts: str, given: str | None, recorded: dict | None) -> str:
    """The split pattern the counts were made with (the tokenizer splits text by it too); another
    given is refused, as other special tokens are."""
    counted_with = (recorded or {}).get("pattern")
    if counted_with is None:
        return given or "gpt2"
    if given is not None and split_pattern(given).regex != split_pattern(counted_with).regex:
        raise BpeDaskError(
            f"{counts} was counted with split pattern {counted_with!r}, not {given!r}: leave pattern= "
            "out to use the recorded one, or count again with the one you want"
        )
    return counted_with


def train_bpe(
    input_path: Any,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    init_from: PathLike | None = None,
    inherit: int | None = None,
    superwords_after: int | None = None,
    superwords_pattern: str = "superbpe",
    min_frequency: int = 0,
    max_token_length: int | None = None,
    max_words: int | None = None,
    forbid: Sequence[str] = (),
    **options,
) -> tuple[Vocab, Merges]:
    """Train a byte-level BPE tokenizer: a drop-in for CS336's ``run_train_bpe``.

    ``init_from``, ``inherit``, ``superwords_after``, ``superwords_pattern`` and the limits are
    those of ``train``
    (continued from a base, the merges begin with its merges). ``options`` are ``JobOptions``
    fields: ``chunk_size``, ``client``, ``scheduler``, ``workers``, ``work_dir``, ``storage_options``,
    ``in_process``, ... Nothing is written but the work directory.

    >>> _ = open("corpus.txt", "w").write("low lower lowest<|endoftext|>newest widest")
    >>> vocab, merges = train_bpe("corpus.txt", 260, ["<|endoftext|>"])  # small: counted in-process
    >>> vocab[256], merges
    (b'<|endoftext|>', [(b'w', b'e'), (b's', b't'), (b'l', b'o')])
    """
    limits = Limits(min_frequency, max_token_length, max_words, forbid)
    opts, goal = training_goal(vocab_size, special_tokens, options, limits, init_from, inherit)
    if superwords_after is not None:
        merged = train_superwords(input_path, None, opts, goal, superwords_after, superwords_pattern)[1]
    else:
        merged = _train(input_path, None, opts, goal, {})[1]
    return merged.vocab, merged.merges


def training_goal(
    vocab_size: int,
    special_tokens: Sequence[str],
    options: dict,
    limits: Limits,
    init_from: PathLike | None = None,
    inherit: int | None = None,
) -> tuple[JobOptions, Goal]:
    """The options of a training job, checked, and what its merge loop is asked for: from the bytes,
    or from the tokenizer at ``init_from`` (``io.tokenizer_files.read_base``: a tokenizer directory,
    GPT-2's files, a ``tokenizer.json`` or a tiktoken rank file) cut to its first ``inherit`` merges
    (``rules.vocabulary.training_base``), whose special tokens and split pattern the job takes where
    it is given none; another split pattern is said in one warning line."""
    base = None
    if init_from is None and inherit is not None:
        raise BpeDaskError("inherit= keeps merges of the tokenizer init_from= names: give that too")
    if init_from is not None:
        location = absolute(os.fspath(init_from))
        storage = Store.for_job(JobOptions.of(**options).storage_options, [location]).options
        vocabulary, pattern = read_base(location, special_tokens, storage)
        base = training_base(vocabulary, inherit, location)
        special_tokens = special_tokens or base.special_tokens
        given = options.get("pattern")
        if given is None:
            options = {**options, "pattern": pattern.spec if pattern else "gpt2"}
        elif pattern is not None and split_pattern(given) not in (pattern, *SUPERWORDS):  # SuperBPE's stage 2
            log.warning(
                "training with split pattern %s, not %s's own (%s): its words split otherwise",
                split_pattern(given).spec, location, pattern.spec,
            )  # fmt: skip
    opts = JobOptions.of(special_tokens=special_tokens, **options)
    check_special_token_names(opts.special_tokens)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise BpeDaskError(f"vocab size must be a whole number, got {vocab_size!r}")
    goal = Goal(vocab_size, opts.special_tokens, base, limits, opts.engine)
    if base is not None and vocab_size <= goal.first_size:
        raise BpeDaskError(
            f"vocab size {vocab_size:,} is not above the {goal.first_size:,} tokens training starts "
            f"from ({init_from}'s, and the special tokens it lacks)"
        )
    if vocab_size < goal.first_size:
        tokens = len(opts.special_tokens)
        raise BpeDaskError(
            f"vocab size {vocab_size} is below {goal.first_size} (256 bytes + {tokens} special "
            f"token{'' if tokens == 1 else 's'})"
        )
    return opts, goal
