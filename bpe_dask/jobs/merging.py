"""The merge stage of a job: the counts in, what the merge loop learned out, run here or on a worker.

``merge_counts`` runs the merge loop where the counts are: ``merge_on_cluster`` as one Dask task on
the worker with the most memory, which reads the counts where it runs and reports progress to the
client; ``merge_here`` on the client with a progress bar; ``merge_table`` is the loop
(``stages.merge``) in this process. ``Limits``
are the options that may stop the loop early; ``Merged`` is what it learned, and what it cost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial

import pyarrow as pa
from dask.base import tokenize
from distributed import Client

from bpe_dask import interrupts
from bpe_dask.cluster import progress
from bpe_dask.cluster.failures import failures_explained
from bpe_dask.cluster.tasks import is_embedded, peak_rss_bytes, workers_of
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import read_counts
from bpe_dask.io.storage import Store
from bpe_dask.jobs.context import Job, Run
from bpe_dask.jobs.counted import Counted
from bpe_dask.jobs.options import JobOptions
from bpe_dask.rules.reference import Merges, Vocab
from bpe_dask.rules.vocabulary import Vocabulary
from bpe_dask.stages.merge import laid_out, train_merges
from bpe_dask.stages.read_events import stop_if_cancelled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stop:
    """Why the merge loop stopped before the vocabulary was full, when an option made it stop:
    ``"min_frequency"`` (the best pair left occurs only ``count`` times) or ``"max_token_length"``
    (every pair left would make too long a token)."""

    reason: str
    count: int = 0


@dataclass
class Merged:
    """What the merge loop learned, and what it cost."""

    vocab: Vocab
    merges: Merges
    unique_words: int
    peak_rss_bytes: int
    seconds: float
    stopped: Stop | None = None  # when --min-frequency or --max-token-length ended the loop early
    byte_tokens: int = 0  # the words' tokens before any merge: their bytes, times their counts
    savings: list[int] = field(default_factory=list)  # the tokens each merge saved, in order


@dataclass(frozen=True)
class Limits:
    """The options that may stop the merge loop before the vocabulary is full (as in Hugging Face's
    trainer): a merge only when the best pair occurs at least ``min_frequency`` times (0 and 1 change
    nothing), and never a token over ``max_token_length`` bytes (None: no limit)."""

    min_frequency: int = 0
    max_token_length: int | None = None

    def __post_init__(self) -> None:
        if not _whole(self.min_frequency) or self.min_frequency < 0:
            raise BpeDaskError(f"min_frequency must be a whole number, 0 or more, got {self.min_frequency!r}")
        longest = self.max_token_length
        if longest is not None and (not _whole(longest) or longest < 1):
            raise BpeDaskError(f"max_token_length must be a positive whole number of bytes, got {longest!r}")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def merge_table(
    counts: pa.Table | Callable[[], pa.Table],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    report_progress: Callable[[int], None] | None = None,
    engine: str = "auto",
    limits: Limits = Limits(),
    base: Vocabulary | None = None,
) -> Merged:
    """The merge loop over a word-count table, in this process, from the bytes or from ``base``.
    ``counts`` is the table, or what reads it: then the table is read here and let go once its
    words are laid out for the loop, so that its memory serves the loop."""
    started = time.perf_counter()
    stops: list[Stop] = []
    savings: list[int] = []
    words = laid_out(counts() if callable(counts) else counts, vocab_size, engine, base)
    # Arrow's allocator keeps what a table it freed held, for its next tables: the loop needs it more.
    pa.default_memory_pool().release_unused()
    unique_words, byte_tokens = words.rows, words.byte_tokens
    vocab, merges = train_merges(
        words,
        vocab_size,
        special_tokens,
        report_progress,
        engine=engine,
        base=base,
        **asdict(limits),
        stopped=lambda *why: stops.append(Stop(*why)),
        savings=savings,
    )
    seconds = time.perf_counter() - started
    return Merged(
        vocab,
        merges,
        unique_words,
        peak_rss_bytes(),
        seconds,
        stops[0] if stops else None,
        byte_tokens,
        savings,
    )


def merge_on_worker(
    counts_url: str,
    vocab_size: int,
    special_tokens: Sequence[str],
    store: Store,
    engine: str = "auto",
    limits: Limits = Limits(),
) -> Merged:
    """The merge loop as a Dask task: reads the counts where it runs, reports progress to the client,
    and stops if its job did (on a cluster that goes on after the job, it would run on for minutes)."""
    total = vocab_size - 256 - len(special_tokens)

    def report_or_stop(done: int) -> None:
        stop_if_cancelled()
        progress.publish_from_worker(done)

    report = progress.every(0.5, total, report_or_stop)
    reading = partial(read_counts, counts_url, store)
    return merge_table(reading, vocab_size, special_tokens, report, engine, limits)


def merge_counts(job: Job, run: Run, counted: Counted, vocab_size: int, limits: Limits) -> Merged:
    """The merge loop over what was counted: on the cluster's roomiest worker where the counts are in
    a file (``merges_on_worker``), else here, the table handed over to the loop."""
    if isinstance(counted.counts, str) and run.client is not None:
        return merge_on_cluster(
            run.client, counted.counts, vocab_size, job.options.special_tokens, job, limits
        )
    return merge_here(counted.hand_over, vocab_size, job.options, limits)  # read there, then let go


def merges_on_worker(job: Job, run: Run) -> bool:
    """Whether the merge loop runs on a worker: when asked to, or by default on a cluster that is not
    an embedded LocalCluster, so that the client never holds the word counts."""
    merge_on = job.options.merge_on
    return run.client is not None and (
        merge_on == "worker" or (merge_on == "auto" and not is_embedded(run.client))
    )


def merge_on_cluster(
    client: Client, counts_url: str, vocab_size: int, special_tokens: Sequence[str], job: Job, limits: Limits
) -> Merged:
    """Run the merge loop on the worker with the most memory: it is the job's one big task."""
    workers = workers_of(client)
    roomiest = max(workers, key=lambda w: workers[w].get("memory_limit") or 0, default=None)
    bar = None
    if job.options.show_progress:
        bar = progress.MergeProgress(vocab_size - 256 - len(special_tokens))
        progress.subscribe(client, bar)
    log.info("running the merge loop on %s", roomiest or "the first worker to join")
    future = client.submit(
        merge_on_worker,
        counts_url,
        vocab_size,
        special_tokens,
        job.store,
        job.options.engine,
        limits,
        key=f"merge-{tokenize(counts_url, vocab_size, special_tokens, limits)}",
        workers=[roomiest] if roomiest else None,  # none left: wherever one joins
        allow_other_workers=True,
        pure=False,
        priority=100,
    )
    with failures_explained(client), progress.phase(bar):
        try:
            return interrupts.wait(future.result)
        except BaseException:
            future.release()  # it stops (``stop_if_cancelled``), also where the client goes on (the API)
            raise


def merge_here(
    counts: pa.Table | Callable[[], pa.Table], vocab_size: int, opts: JobOptions, limits: Limits
) -> Merged:
    """The merge loop on the client, with a progress bar unless ``-q``; ``counts`` as ``merge_table``'s."""
    total = vocab_size - 256 - len(opts.special_tokens)
    bar = progress.MergeProgress(total) if opts.show_progress else None
    report = progress.every(0.2, total, bar) if bar is not None else None
    with progress.phase(bar):
        return merge_table(counts, vocab_size, opts.special_tokens, report, opts.engine, limits)
