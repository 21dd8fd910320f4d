"""The merge stage of a job: the counts in, what the merge loop learned out, run here or on a worker.

``merge_counts`` runs the merge loop where the counts are, with a progress bar: ``merge_on_cluster``
as one Dask task on the worker with the most memory, which reads the counts where it runs and
reports progress to the client; else on the client. ``merge_table`` is the loop (``stages.merge``)
in this process. ``Goal`` is what the loop is asked for (the vocabulary size,
special tokens, the base it starts from, the ``Limits`` that may stop it early, the engine);
``Merged`` is what it learned, and what it cost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property, partial

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
from bpe_dask.rules.reference import Merges, Vocab
from bpe_dask.rules.vocabulary import Vocabulary, start
from bpe_dask.stages.merge import laid_out, train_merges
from bpe_dask.stages.read_events import stop_if_cancelled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stop:
    """Why the merge loop stopped before the vocabulary was full, when an option made it stop:
    ``"min_frequency"`` (the best pair left occurs only ``count`` times) or ``"token_limits"`` (every
    pair left would make a token ``Limits`` rule out)."""

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
    tokens: int = 0  # the words' tokens before the first merge learned, times their counts
    savings: list[int] = field(default_factory=list)  # the tokens each merge learned saved, in order
    first_size: int = 256  # the vocabulary's size before the first merge learned
    text_bytes: int = 0  # the bytes of text the words stand for (their bytes times their counts)

    @property
    def learned(self) -> int:
        """How many merges the loop learned (a base's come before them)."""
        return len(self.savings)


@dataclass(frozen=True)
class Limits:
    """The options that may stop the merge loop before the vocabulary is full (as in Hugging Face's
    trainer): a merge only when the best pair occurs at least ``min_frequency`` times (0 and 1 change
    nothing); and the tokens it may make (``rules.bpe.allowed``): never one over ``max_token_length``
    bytes, over ``max_words`` words (SuperBPE's recipe: 4), or holding any of ``forbid`` (its recipe:
    ": "). None and nothing: no limit."""

    min_frequency: int = 0
    max_token_length: int | None = None
    max_words: int | None = None
    forbid: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _whole(self.min_frequency) or self.min_frequency < 0:
            raise BpeDaskError(f"min_frequency must be a whole number, 0 or more, got {self.min_frequency!r}")
        longest = self.max_token_length
        if longest is not None and (not _whole(longest) or longest < 1):
            raise BpeDaskError(f"max_token_length must be a positive whole number of bytes, got {longest!r}")
        if self.max_words is not None and (not _whole(self.max_words) or self.max_words < 1):
            raise BpeDaskError(f"max_words must be a positive whole number, got {self.max_words!r}")
        if isinstance(self.forbid, str) or not all(isinstance(part, str) and part for part in self.forbid):
            raise BpeDaskError(f"forbid must be a list of non-empty strings, got {self.forbid!r}")
        object.__setattr__(self, "forbid", tuple(self.forbid))  # frozen: a list given is kept as a tuple


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Goal:
    """What the merge loop is asked for: a vocabulary of ``vocab_size`` tokens with ``special_tokens``,
    from ``base`` (a ``Vocabulary`` to continue training from; None: the bytes), within ``limits``,
    on ``engine``."""

    vocab_size: int
    special_tokens: tuple[str, ...] = ()
    base: Vocabulary | None = None
    limits: Limits = Limits()
    engine: str = "auto"

    @cached_property  # the base's vocabulary copied once
    def first_size(self) -> int:
        """The vocabulary's size before the first merge learned (``rules.vocabulary.start``)."""
        return len(start(self.special_tokens, self.base and (self.base.vocab, self.base.merges))[0])

    @property
    def merges(self) -> int:
        """The merges to learn, at most."""
        return max(0, self.vocab_size - self.first_size)


def merge_table(
    counts: pa.Table | Callable[[], pa.Table],
    goal: Goal,
    report: Callable[[int], None] | None = None,
) -> Merged:
    """The merge loop over a word-count table, in this process. ``counts`` is the table, or what
    reads it: then the table is read here and let go once its words are laid out for the loop, so
    that its memory serves the loop."""
    started = time.perf_counter()
    stops: list[Stop] = []
    savings: list[int] = []
    words = laid_out(counts() if callable(counts) else counts, goal.vocab_size, goal.engine, goal.base)
    # Arrow's allocator keeps what a table it freed held, for its next tables: the loop needs it more.
    pa.default_memory_pool().release_unused()
    unique_words, tokens, text_bytes = words.rows, words.tokens, words.text_bytes
    vocab, merges = train_merges(
        words,
        goal.vocab_size,
        goal.special_tokens,
        report,
        engine=goal.engine,
        base=goal.base,
        **asdict(goal.limits),
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
        tokens,
        savings,
        goal.first_size,
        text_bytes,
    )


def merge_on_worker(counts_url: str, goal: Goal, store: Store) -> Merged:
    """The merge loop as a Dask task: reads the counts where it runs, reports progress to the client,
    and stops if its job did (on a cluster that goes on after the job, it would run on for minutes)."""

    def report_or_stop(done: int) -> None:
        stop_if_cancelled()
        progress.publish_from_worker(done)

    report = progress.every(0.5, goal.merges, report_or_stop)
    return merge_table(partial(read_counts, counts_url, store), goal, report)


def merges_on_worker(job: Job, run: Run) -> bool:
    """Whether the merge loop runs on a worker: when asked to, or by default on a cluster that is not
    an embedded LocalCluster, so that the client never holds the word counts."""
    merge_on = job.options.merge_on
    return run.client is not None and (
        merge_on == "worker" or (merge_on == "auto" and not is_embedded(run.client))
    )


def merge_counts(job: Job, client: Client | None, counts: str | Callable[[], pa.Table], goal: Goal) -> Merged:
    """The merge loop over the counts, with a progress bar unless ``-q``: on the cluster's roomiest
    worker where ``counts`` is a file's URL and there is a ``client`` (``merges_on_worker``), else
    here, the counts read from that file, or handed over (``CountResult.hand_over``) to the loop."""
    bar = progress.MergeProgress(goal.merges) if job.options.show_progress else None
    with progress.phase(bar):
        if isinstance(counts, str) and client is not None:
            merged = merge_on_cluster(client, counts, goal, job.store, bar)
        else:
            reading = partial(read_counts, counts, job.store) if isinstance(counts, str) else counts
            merged = merge_table(reading, goal, progress.every(0.2, goal.merges, bar) if bar else None)
        if bar is not None:  # its last state, where the loop stopped short of the goal
            bar(merged.learned)
        return merged


def merge_on_cluster(
    client: Client, counts_url: str, goal: Goal, store: Store, bar: progress.MergeProgress | None
) -> Merged:
    """Run the merge loop on the worker with the most memory (it is the job's one big task), its
    progress shown by ``bar``."""
    workers = workers_of(client)
    roomiest = max(workers, key=lambda w: workers[w].get("memory_limit") or 0, default=None)
    if bar is not None:
        progress.subscribe(client, bar)
    log.info("running the merge loop on %s", roomiest or "the first worker to join")
    future = client.submit(
        merge_on_worker,
        counts_url,
        goal,
        store,
        key=f"merge-{tokenize(counts_url, goal)}",
        workers=[roomiest] if roomiest else None,  # none left: wherever one joins
        allow_other_workers=True,
        pure=False,
        priority=100,
    )
    with failures_explained(client):
        try:
            return interrupts.wait(future.result)
        except BaseException:
            future.release()  # it stops (``stop_if_cancelled``), also where the client goes on (the API)
            raise
