"""Reports: what a job read and what it made, in, one ``report.json`` dict out, the same for every source.

``read_report`` is what every counting job reports of its input, whatever the source: the inputs
as named to the user, their bytes (what their stores told, and what parts of no known size held
once read), the text counted, the partitions (reused or computed), the records skipped, and, for
documents held in memory, how many and on how many threads. ``training_report`` adds the merge
loop's figures and what stopped it.
"""

from __future__ import annotations

from dataclasses import asdict

from bpe_dask.jobs.counted import CountResult
from bpe_dask.jobs.merging import Goal, Merged
from bpe_dask.rules.patterns import unicode_tables
from bpe_dask.sources.source import Source
from bpe_dask.version import __version__


def input_bytes(source: Source, read_bytes: int = 0) -> int:
    """The input's bytes: what its store told of each file, and ``read_bytes``, what its parts of no
    known size held once read (a web file served with no size, a collection, documents in memory)."""
    return source.known_bytes + read_bytes


def read_report(counted: CountResult, utf8_errors: str, pattern: str) -> dict:
    """What a job read, as its report says."""
    report = {
        "inputs": counted.input_files,
        "input_bytes": counted.input_bytes,
        "text_bytes": counted.text_bytes,
        "partitions": counted.partitions,
        "partitions_reused": counted.partitions_reused,
        "partitions_computed": counted.partitions - counted.partitions_reused,
        "utf8_errors": utf8_errors,
        "bad_records_skipped": counted.bad.count,
        "pattern": pattern,
    }
    if counted.documents is not None:
        report.update(documents=counted.documents, threads=counted.threads)
    return report


def training_report(read: dict, merged: Merged, goal: Goal, timings: dict) -> dict:
    """``report.json`` of a training job: ``read`` (what the job read), then the merge loop's figures."""
    return {
        "version": __version__,
        **read,
        "unique_words": merged.unique_words,
        "vocab_size": len(merged.vocab),
        "requested_vocab_size": goal.vocab_size,
        "special_tokens": list(goal.special_tokens),
        "unicode_tables": unicode_tables(),  # whose character classes split the text
        **asdict(goal.limits),
        "inherited_merges": len(goal.base.merges) if goal.base else 0,
        "num_merges": len(merged.merges),
        "stopped_by": stopped_by(merged, goal.vocab_size),
        "peak_rss_bytes": merged.peak_rss_bytes,
        "timings": {**timings, "merge": merged.seconds},
    }


def stopped_by(merged: Merged, vocab_size: int) -> str:
    """What ended the merge loop: ``vocab_size`` (full), ``min_frequency``, ``max_token_length``, or
    ``no_pairs`` (every word is one token)."""
    if len(merged.vocab) >= vocab_size:
        return "vocab_size"
    return merged.stopped.reason if merged.stopped else "no_pairs"
