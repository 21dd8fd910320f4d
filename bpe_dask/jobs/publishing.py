"""Publishing a trained tokenizer: what the merge loop learned in, the tokenizer directory out.

``training_report`` is ``report.json``: the job's figures, the merge loop's, and what stopped it
(``stopped_by``); ``publish_tokenizer`` writes the tokenizer's files, the compression curve
(``compression``) and the report into ``--out``, whole or not at all (``io.publish``), after saying
why the vocabulary is short, if it is (``warn_if_short``); ``merge_and_publish`` does all of it
for counts held in this process.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict

import pyarrow as pa

from bpe_dask import interrupts
from bpe_dask.io.publish import publish_directory
from bpe_dask.io.storage import Store
from bpe_dask.jobs import compression
from bpe_dask.jobs.merging import Limits, Merged, merge_here
from bpe_dask.jobs.options import JobOptions
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.tokenizer import FILES, Tokenizer
from bpe_dask.version import __version__

log = logging.getLogger(__name__)

OUTPUT_FILES = (*FILES, *compression.FILES, "report.json")


def is_output_file(name: str) -> bool:
    """Whether ``name`` is a file a training job writes into its output directory."""
    return name in OUTPUT_FILES


def publish_tokenizer(
    out: str,
    merged: Merged,
    opts: JobOptions,
    report: dict,
    store: Store,
    limits: Limits,
    files: dict[str, str | bytes] | None = None,
    curve: compression.Curve | None = None,
) -> None:
    """Publish the tokenizer directory ``out``: the tokenizer's ``files`` (made here if not given,
    with the compression ``curve`` when there is one) and ``report.json``, whole or not at all, and
    not after a signal."""
    warn_if_short(merged, report["requested_vocab_size"], limits)
    files = files or tokenizer_files(merged, opts.special_tokens, report["pattern"], curve)
    if curve is None:
        log.info("no compression curve: the counts do not record the special tokens their text held "
                 "(counted by an older bpe-dask)")  # fmt: skip
    else:
        report["compression"] = curve.summary()
    files = {**files, "report.json": json.dumps(report, indent=2) + "\n"}
    interrupts.check()  # nothing is published after a signal, even one some library swallowed
    publish_directory(out, files, store, overwrite=opts.overwrite)  # checked again as it commits


def merge_and_publish(
    counts: pa.Table | Callable[[], pa.Table], specials: SpecialsSeen, base: dict, vocab_size: int, out: str,
    opts: JobOptions, store: Store, limits: Limits, started: float, timings: dict,
) -> dict:  # fmt: skip
    """The merge loop over ``counts`` (or what gives them: ``merge_table``'s) in this process, then
    ``out`` published with its report (``base``: what the job read, ``input_bytes`` among it;
    ``specials``: the special tokens its text held); the report is returned."""
    merged = merge_here(counts, vocab_size, opts, limits)
    warn_if_empty(merged.unique_words, base["input_bytes"])
    report = training_report(base, merged, opts.special_tokens, vocab_size, limits, timings)
    report["merge_ran_on"] = "client"
    report["timings"]["total"] = time.perf_counter() - started
    curve = compression_curve(merged, opts.special_tokens, specials)
    files = tokenizer_files(merged, opts.special_tokens, opts.pattern, curve)
    publish_tokenizer(out, merged, opts, report, store, limits, files, curve)
    return report


def tokenizer_files(
    merged: Merged, special_tokens: Sequence[str], pattern: str, curve: compression.Curve | None = None
) -> dict[str, str | bytes]:
    """The tokenizer's files by name (``Tokenizer.files``), and ``compression.csv`` and
    ``compression.png`` when there is a ``curve``."""
    tokenizer = Tokenizer(merged.vocab, merged.merges, special_tokens, pattern)
    files: dict[str, str | bytes] = dict(tokenizer.files())
    if curve is not None:
        files["compression.csv"] = curve.csv()
        files["compression.png"] = compression.plot({"training data": curve})
    return files


def compression_curve(
    merged: Merged, special_tokens: Sequence[str], specials: SpecialsSeen | None
) -> compression.Curve | None:
    """The training data's tokens at each vocabulary size, from what the merge loop saved; none when
    the special tokens the data held are not known (counts an older bpe-dask wrote)."""
    if specials is None:
        return None
    first = 256 + len(special_tokens)
    return compression.Curve(first, merged.byte_tokens, specials.count, specials.bytes, merged.savings)


def training_report(
    base: dict, merged: Merged, special_tokens: Sequence[str], vocab_size: int, limits: Limits, timings: dict
) -> dict:
    """``report.json`` of a training job: ``base`` (what the job read), then the merge loop's figures."""
    return {
        "version": __version__,
        **base,
        "unique_words": merged.unique_words,
        "vocab_size": len(merged.vocab),
        "requested_vocab_size": vocab_size,
        "special_tokens": list(special_tokens),
        **asdict(limits),
        "num_merges": len(merged.merges),
        "stopped_by": _stopped_by(merged, vocab_size),
        "peak_rss_bytes": merged.peak_rss_bytes,
        "timings": {**timings, "merge": merged.seconds},
    }


def _stopped_by(merged: Merged, vocab_size: int) -> str:
    """What ended the merge loop: ``vocab_size`` (full), ``min_frequency``, ``max_token_length``, or
    ``no_pairs`` (every word is one token)."""
    if len(merged.vocab) >= vocab_size:
        return "vocab_size"
    return merged.stopped.reason if merged.stopped else "no_pairs"


def warn_if_short(merged: Merged, vocab_size: int, limits: Limits) -> None:
    """Why the vocabulary is short, if it is: an info line when the user's limit did it, else a warning."""
    stopped, done = merged.stopped, f"{len(merged.merges):,}"
    if stopped is not None and stopped.reason == "min_frequency":
        fitting = "" if limits.max_token_length is None else f" of at most {limits.max_token_length:,} bytes"
        log.info(
            "stopped at %s merges: the most frequent pair%s occurs %s times, under --min-frequency %s",
            done, fitting, f"{stopped.count:,}", f"{limits.min_frequency:,}",
        )  # fmt: skip
    elif stopped is not None and stopped.reason == "max_token_length":
        log.info(
            "stopped at %s merges: every pair left would make a token longer than --max-token-length %s",
            done, f"{limits.max_token_length:,}",
        )  # fmt: skip
    elif merged.unique_words and len(merged.vocab) < vocab_size:
        log.warning(
            "the counts hold pairs for only %s merges: the vocabulary has %s tokens, not the %s asked for",
            f"{len(merged.merges):,}", f"{len(merged.vocab):,}", f"{vocab_size:,}",
        )  # fmt: skip


def warn_if_empty(unique_words: int, input_bytes: int | None) -> None:
    """Say that there was nothing to learn from: an input of ``input_bytes``, or a counts file (``None``)."""
    if unique_words == 0:
        held = f"the input holds no words ({input_bytes:,} bytes)" if input_bytes is not None else (
            "the counts hold no words")
        log.warning("%s: the vocabulary is only the bytes and special tokens", held)
