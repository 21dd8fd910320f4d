"""A trained tokenizer's directory: what the merge loop learned in, the files of ``--out`` out.

``publish_tokenizer`` writes the tokenizer's files (``tokenizer_files``), the compression curve
(``compression``) and the report into ``--out``, whole or not at all (``io.publish``), after saying
why the vocabulary is short, if it is (``warn_if_short``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from bpe_dask import interrupts
from bpe_dask.io.outputs import check_output_dir
from bpe_dask.io.publish import publish_directory
from bpe_dask.io.storage import Store
from bpe_dask.io.written import REPORT, TOKENIZER
from bpe_dask.jobs.merging import Limits, Merged
from bpe_dask.jobs.options import JobOptions
from bpe_dask.stages import compression
from bpe_dask.stages.counters import SpecialsSeen
from bpe_dask.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def check_tokenizer_dir(out: str, overwrite: bool, store: Store) -> None:
    """Refuse an ``out`` that holds a tokenizer already (unless ``overwrite``) or files a training job
    does not write (``io.outputs.check_output_dir``)."""
    check_output_dir(out, overwrite, TOKENIZER.owns, store)


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
    files = files or tokenizer_files(merged, opts.special_tokens, report["pattern"], curve, opts.roles())
    if curve is None:
        log.info(
            "no compression curve: the counts do not record the special tokens their text held "
            "(counted by an older bpe-dask)"
        )
    else:
        report["compression"] = curve.summary()
    files = {**files, REPORT: json.dumps(report, indent=2) + "\n"}
    interrupts.check()  # nothing is published after a signal, even one some library swallowed
    publish_directory(out, files, store, overwrite=opts.overwrite)  # checked again as it commits
    log.info("wrote the tokenizer to %s: %s", out, ", ".join(files))


def tokenizer_files(
    merged: Merged,
    special_tokens: Sequence[str],
    pattern: str,
    curve: compression.Curve | None = None,
    roles: Mapping[str, str | None] | None = None,
) -> dict[str, str | bytes]:
    """The tokenizer's files by name (``Tokenizer.files``, with the special tokens' ``roles``), and
    ``compression.csv`` and ``compression.png`` when there is a ``curve``."""
    tokenizer = Tokenizer(merged.vocab, merged.merges, special_tokens, pattern)
    files: dict[str, str | bytes] = dict(tokenizer.files(roles))
    if curve is not None:
        csv, png = compression.CURVE_FILES
        files[csv] = curve.csv()
        files[png] = compression.plot_curves({"training data": curve})
    return files


def compression_curve(
    merged: Merged, special_tokens: Sequence[str], specials: SpecialsSeen | None
) -> compression.Curve | None:
    """The training data's tokens at each vocabulary size, from what the merge loop saved; none when
    the special tokens the data held are not known (counts an older bpe-dask wrote)."""
    if specials is None:
        return None
    first, count, text = merged.first_size, specials.count, merged.text_bytes
    return compression.Curve(first, merged.tokens, text, count, specials.bytes, merged.savings)


def warn_if_short(merged: Merged, vocab_size: int, limits: Limits) -> None:
    """Why the vocabulary is short, if it is: an info line when the user's limit did it, else a warning."""
    stopped, done = merged.stopped, f"{merged.learned:,}"
    if stopped is not None and stopped.reason == "min_frequency":
        fitting = "" if limits.max_token_length is None else f" of at most {limits.max_token_length:,} bytes"
        log.info(
            "stopped at %s merges: the most frequent pair%s occurs %s times, under min_frequency=%d",
            done,
            fitting,
            f"{stopped.count:,}",
            limits.min_frequency,
        )
    elif stopped is not None and stopped.reason == "token_limits":
        ruled_out = [
            *([f"longer than max_token_length={limits.max_token_length}"] if limits.max_token_length else []),
            *([f"of more than max_words={limits.max_words} words"] if limits.max_words else []),
            *([f"holding one of forbid={list(limits.forbid)!r}"] if limits.forbid else []),
        ]
        log.info("stopped at %s merges: every pair left would make a token %s", done, " or ".join(ruled_out))
    elif merged.unique_words and len(merged.vocab) < vocab_size:
        log.warning(
            "the counts hold pairs for only %s merges: the vocabulary has %s tokens, not the %s asked for",
            f"{merged.learned:,}",
            f"{len(merged.vocab):,}",
            f"{vocab_size:,}",
        )


def warn_if_empty(unique_words: int, input_bytes: int | None) -> None:
    """Say that there was nothing to learn from: an input of ``input_bytes``, or a counts file (``None``)."""
    if unique_words == 0:
        held = (
            f"the input holds no words ({input_bytes:,} bytes)"
            if input_bytes is not None
            else ("the counts hold no words")
        )
        log.warning("%s: the vocabulary is only the bytes and special tokens", held)
