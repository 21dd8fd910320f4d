"""What every job shares: options in; a store, a place to run, and finished tasks out.

Every job opens the same way: ``Job.start`` makes the job's ``Store`` (the storage options with
what the environment adds, and the ``bpe-dask`` settings) once, on the client; the job checks its
output and finds its source (``sources.source``). Its stages then run in a ``Run``
(``Job.running``): here, or on ``Job.cluster`` (the given client, a scheduler, or a LocalCluster)
once ``Job.preflight`` has checked the workers, with a work directory; tasks run through
``run_tasks``, which turns a failure into one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from distributed import Client, get_client

from bpe_dask import interrupts
from bpe_dask.cluster.client import NO_WARM_UP, WarmUp, dask_client
from bpe_dask.cluster.preflight import Place, check_workers, unregister_plugins
from bpe_dask.cluster.tasks import is_embedded, run_tasks
from bpe_dask.errors import BpeDaskError
from bpe_dask.io import scratch
from bpe_dask.io.documents import BadRecords
from bpe_dask.io.outputs import missing_folders
from bpe_dask.io.storage import LOCAL, Store, describe, is_local, required_packages
from bpe_dask.jobs.options import JobOptions
from bpe_dask.rules.pretokenize import Pretokenizer
from bpe_dask.sources.source import Source, input_urls, source_of
from bpe_dask.tokenizer import Tokenizer
from bpe_dask.wording import plural

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Run:
    """Where a job's stages run: on ``client``'s cluster, with the work directory ``work``; or here,
    in this process (both ``None``)."""

    client: Client | None
    work: str | None


@dataclass
class Job:
    """One run of a job: its options, and the ``Store`` its tasks take."""

    options: JobOptions
    store: Store
    plugins: list[str] = field(default_factory=list)  # registered on the workers by ``preflight``
    _scratch_beside: str = ""  # where ``work_directory`` made the temporary one, for messages

    @classmethod
    def start(cls, options: JobOptions, inputs: Any, urls: Sequence[str | None] = ()) -> Job:
        """A job that reads ``inputs`` and writes ``urls``: an ``s3://`` job takes the AWS
        environment along."""
        named = [*input_urls(inputs), *urls]
        return cls(options, Store.for_job(options.storage_options, named, options.ship_credentials))

    def find_source(
        self,
        inputs: Any,
        exclude: Sequence[str | None] = (),
        outputs: Sequence[str | None] = (),
        **iterating: Any,
    ) -> Source:
        """What ``inputs`` are (``sources.source_of``), what the job writes left out. A Dask
        collection runs on the cluster the job was given, else on the current ``distributed``
        client, whose cluster holds what the collection was persisted on, else on a LocalCluster."""
        opts = self.options
        source = interrupts.call(  # listing a bucket may take long: a signal stops the wait
            source_of,
            inputs,
            self.store,
            opts.reading(),
            opts.utf8_errors,
            exclude=exclude,
            outputs=outputs,
            **iterating,
        )
        if source.reads_on == "cluster" and not opts.wants_cluster:
            with contextlib.suppress(ValueError):  # no client: the job starts a LocalCluster
                self.options = JobOptions.of(opts, client=get_client())
        return source

    @property
    def embedded(self) -> bool:
        """Whether the job's cluster is a LocalCluster on this machine (``is_embedded``), before it starts."""
        client = self.options.client
        return is_embedded(client) if client is not None else not self.options.on_scheduler

    @property
    def starts_cluster(self) -> bool:
        """Whether the job starts a LocalCluster of its own (no client given, no scheduler named)."""
        return not (self.options.client or self.options.on_scheduler)

    @contextmanager
    def cluster(self, in_threads: bool = False, warm_up: WarmUp = NO_WARM_UP) -> Iterator[Client]:
        """The job's client. A LocalCluster it starts runs the tasks in threads of this process with
        ``in_threads`` (for tasks that run compiled code, which releases the GIL), and ``warm_up``s as
        it starts."""
        opts = self.options
        where = (opts.scheduler, opts.workers, opts.client, opts.scheduler_file)
        with dask_client(*where, in_threads, warm_up) as client:
            try:
                yield client
            finally:
                if self.plugins and (opts.client or opts.on_scheduler):  # it outlives the job
                    unregister_plugins(client, self.plugins)

    def preflight(
        self, client: Client, work_dir: str | None, source: Source, outputs: Sequence[str | None] = ()
    ) -> None:
        """Check before any task that every worker can read the inputs (the source's ``files``) and
        write the work directory (if the tasks write one) and the ``outputs`` the tasks write (all
        absolute by now: ``storage.absolute``)."""
        inputs = [f.url for f in source.files]
        urls = [*inputs, *[u for u in (work_dir, *outputs) if u]]
        packages = required_packages(urls, [f.compression for f in source.files])
        places = [Place(url, "input") for url in inputs[:1]]
        if work_dir and self.options.work_dir:
            places.append(Place(work_dir, "work_dir=", True))
        elif work_dir:  # the job's own scratch space: the user can only name another
            made = f"the temporary work directory this job made{self._scratch_beside}"
            places.append(Place(work_dir, made, True, instead="work_dir="))
        places += [Place(o, "out=", True) for o in outputs if o]
        if is_embedded(client):  # the LocalCluster's workers share this machine's disk
            places = [p for p in places if not (p.writes and is_local(p.url))]
        self.plugins = check_workers(
            client,
            packages,
            places=places,
            embedded=not (self.options.client or self.options.on_scheduler),  # the LocalCluster we started
            store=self.store,
            ship_package=self.options.ship_package,
        )

    @contextmanager
    def running(
        self,
        source: Source,
        here: bool,
        pretokenizer: Pretokenizer,
        in_threads: bool = False,
        warm_up: WarmUp = NO_WARM_UP,
        beside: str | None = None,
        outputs: Sequence[str | None] = (),
        writes: bool = True,
    ) -> Iterator[Run]:
        """Where the job's stages run, once the split pattern is checked on a sample of ``source``:
        here (no cluster, no work directory) or, unless ``here``, once the start of ``source`` is
        read as its tasks will read it (``first_look``: a mistake there is said before the cluster
        starts), on the job's cluster
        (``cluster``: ``in_threads``, ``warm_up``) with a work directory (``work_directory``:
        ``beside``; none for tasks that write nothing, ``writes=False``), the workers checked first
        (``preflight``: ``outputs``, the files its tasks write). A collection's sample is taken on
        its cluster."""
        if source.reads_on != "cluster":
            self.check_pattern(source, pretokenizer)
        if here:  # counted at once: its own reading says what is wrong, first
            yield Run(None, None)
            return
        source.first_look(self.options.utf8_errors, pretokenizer)
        scratch = self.work_directory(beside) if writes else nullcontext(None)
        with scratch as work, self.cluster(in_threads, warm_up) as client:
            self.preflight(client, work, source, outputs)
            if source.reads_on == "cluster":
                self.check_pattern(source, pretokenizer, client)
            yield Run(client, work)

    def check_pattern(self, source: Source, pretokenizer: Pretokenizer, client: Client | None = None) -> None:
        """A split pattern of one's own may leave characters out of every pre-token, and such text is
        never counted (``'\\w+'`` drops spaces and punctuation): say how many characters of a sample
        of the input it drops, in a warning, or, with ``strict_pattern``, an error before any work."""
        if pretokenizer.pattern.builtin:
            return
        documents, what = source.sample(lambda tasks: run_tasks(client, tasks))
        check_sample(pretokenizer, documents, what, self.options.strict_pattern)

    @contextmanager
    def work_directory(self, beside: str | None = None) -> Iterator[str]:
        """The user's work directory (kept, so a re-run reuses its shards), or a temporary one: on
        this machine, or, ``beside`` an output on storage the workers reach, a hidden folder next to
        it. A temporary one is removed afterwards (a warning in one line if it cannot be); a local
        one is locked meanwhile, and those that killed jobs left are removed first (``io.scratch``)."""
        work_dir = self.options.work_dir
        if work_dir:
            fs, path = self.store.fs(work_dir)
            try:
                fs.makedirs(path, exist_ok=True)
            except Exception as error:
                raise BpeDaskError(f"cannot use work_dir={work_dir!r}: {describe(error)}") from None
            yield work_dir
            return
        if beside:
            self._scratch_beside = f" beside out={beside!r}"
            parent, _, name = beside.rstrip("/").rpartition("/")
            if is_local(beside):
                yield from _locked_scratch(parent, f".{name}.work-")
            else:
                yield from _scratch_in_store(self.store, f"{parent}/.{name}.work-{uuid.uuid4().hex[:12]}")
            return
        yield from _locked_scratch(tempfile.gettempdir(), "bpe-dask-", private=True)


def _locked_scratch(folder: str, prefix: str, private: bool = False) -> Iterator[str]:
    """A new local work directory ``folder/prefix*`` (the owner's only if ``private``), locked while
    the job runs (``io.scratch``), after removing those that killed jobs (SIGKILL) left there."""
    removed = scratch.remove_abandoned(folder, prefix)
    if removed:
        killed = plural(len(removed), "job")
        log.info("removed the work directories of %s that were killed: %s", killed, ", ".join(removed))
    made: list[str] = []  # beside an --out whose folder is not there yet: made for the job, removed after
    try:
        for new in missing_folders(LOCAL.fs(folder)[0], folder):
            os.mkdir(new)
            made.insert(0, new)
        work, held = scratch.make_locked(folder, prefix, private)
    except OSError as error:
        _remove_empty(made)
        raise BpeDaskError(f"cannot make a work directory in {folder}: {error.strerror or error}") from None
    try:
        yield work
    finally:
        scratch.discard(work, held)
        _remove_empty(made)


def _remove_empty(folders: list[str]) -> None:
    for folder in folders:  # innermost first; one that holds something by now stays
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _scratch_in_store(store: Store, url: str) -> Iterator[str]:
    """A work directory in an object store, removed afterwards: no lock there, so one that a killed
    job left is not found; a warning in one line if it cannot be removed."""
    fs, path = store.fs(url)
    try:
        yield url
    finally:
        try:
            if fs.exists(path):
                fs.rm(path, recursive=True)
        except Exception as error:
            log.warning("could not remove the work directory %s: %s; delete it by hand", url, describe(error))


def check_sample(pretokenizer: Pretokenizer, documents: Sequence[str], what: str, strict: bool) -> None:
    """``Job.check_pattern`` on ``documents``, a sample of the input that ``what`` names: a warning,
    or with ``strict`` an error, if the split pattern leaves any of their characters out of every
    pre-token (special tokens aside).

    >>> from bpe_dask.rules.pretokenize import Pretokenizer
    >>> check_sample(Pretokenizer([], r"\\w+"), ["a b!"], "the first document", strict=True)
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: the split pattern '\\w+' leaves 2 of the 4 ...(strict_pattern=True)
    """
    if pretokenizer.pattern.builtin:
        return
    dropped = "".join(pretokenizer.uncovered(document) for document in documents)
    if not dropped:
        return
    total = sum(map(len, documents))
    examples = ", ".join(repr(c) for c in list(dict.fromkeys(dropped))[:5])
    message = (
        f"the split pattern '{pretokenizer.pattern.spec}' leaves {len(dropped):,} of the {total:,} "
        f"characters of {what} out of every pre-token ({100 * len(dropped) / total:.1f} %; {examples}): "
        "such text is never counted, and the tokenizer cannot encode it"
    )
    if strict:
        raise BpeDaskError(f"{message} (strict_pattern=True)")
    log.warning("%s; strict_pattern=True makes this an error", message)


def report_bad_records(bad: BadRecords) -> None:
    """Say what ``on_bad_record="skip"`` left out."""
    if bad.count:
        log.warning("skipped %s; the first: %s", plural(bad.count, "bad record"), bad.first)


def job_tokenizer(
    given: str | Tokenizer,
    store: Store,
    engine: str,
    trust_pattern: bool = False,
    special_tokens: Sequence[str] | None = None,
) -> Tokenizer:
    """The tokenizer a job runs (``encode``'s, each of ``evaluate``'s): the ``Tokenizer`` given, or the
    one at an absolute location, a directory `bpe-dask train` wrote or a Hugging Face
    ``tokenizer.json`` file; with ``special_tokens`` (none: its own) and the job's ``engine`` unless
    that is ``auto``. A split pattern read from a file that is not built in needs ``trust_pattern``."""
    if isinstance(given, str):
        fs, path = store.fs(given)
        try:
            is_file = fs.isfile(path)
        except Exception as error:
            raise BpeDaskError(f"tokenizer {given}: cannot read it ({describe(error)})") from None
        if not is_file:
            return Tokenizer.load(given, special_tokens, store.options, engine, trust_pattern=trust_pattern)
        given = Tokenizer.from_tokenizer_json(given, store.options, engine, trust_pattern=trust_pattern)
    engine = given.engine if engine == "auto" else engine
    if special_tokens is None and engine == given.engine:
        return given
    tokens = given.special_tokens if special_tokens is None else special_tokens
    return Tokenizer(given.vocab, given.merges, tokens, given.pretokenizer.pattern, engine)
