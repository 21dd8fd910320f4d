"""The command line: ``bpe-dask train | count | merge | encode | evaluate``, each a job of the Python
API (and ``warm-up``, which fills numba's cache for them).

Takes ``argv``; parses it (``parser``), resolves flags and ``--config`` into options
(``config``), runs the job and gives an exit code: 0 when done, 1 for a user error (one line on
stderr, no traceback), 2 for a malformed command line (argparse's, or options missing, unknown or
not of their kind: ``UsageError``), 130 when interrupted, 143 when terminated.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, NoReturn

from tqdm.contrib.logging import logging_redirect_tqdm

from bpe_dask import interrupts
from bpe_dask.cli.config import COMMAND_LINE, ENVIRONMENT, PLACES, flag_of, resolve
from bpe_dask.cli.parser import REQUIRED, build_parser
from bpe_dask.cluster.failures import quiet_dask_errors
from bpe_dask.credentials import hide_credentials
from bpe_dask.errors import BpeDaskError, UsageError
from bpe_dask.io.counts_table import count_rows
from bpe_dask.jobs.count import count_words
from bpe_dask.jobs.encode import encode
from bpe_dask.jobs.evaluate import evaluate
from bpe_dask.jobs.evaluation import table
from bpe_dask.jobs.options import JobOptions
from bpe_dask.jobs.train import merge, train
from bpe_dask.settings import given_from
from bpe_dask.wording import as_flags

log = logging.getLogger("bpe_dask")


def run() -> NoReturn:
    """The command (``bpe-dask`` and ``python -m bpe_dask`` run it through ``bpe_dask.__main__``, which
    answers a signal while this module loads): ``main``, then the process ends at once.

    Everything the job writes is committed, and its cluster closed, before ``main`` returns; what
    Python's own teardown would do then (free numba's compiled code, module by module) takes time and
    changes nothing, so it is skipped, once the output streams are flushed."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can reach it
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (the process's arguments by default) and give its exit code, as the
    module's docstring lists them; SIGINT and SIGTERM are handled while it runs (``interrupts``)."""
    # The resource tracker this process starts (with the embedded cluster's worker processes) writes
    # its warnings on our stderr, which it shares: kept quiet by ``-W``, which Python's child
    # processes (``multiprocessing``'s) take from ``sys.warnoptions``.
    if RESOURCE_TRACKER_WARNINGS not in sys.warnoptions:
        sys.warnoptions.append(RESOURCE_TRACKER_WARNINGS)
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    if not args.get("command"):
        parser.print_help(sys.stderr)
        return 2
    with interrupts.handled():
        try:
            return _run(args, parser.commands[args["command"]])
        except BaseException as error:
            if interrupts.received() is None and not isinstance(error, KeyboardInterrupt):
                raise
            terminated = interrupts.received() == signal.SIGTERM  # whatever the signal left behind
            print(f"bpe-dask: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
            return 143 if terminated else 130


# The warning of Python's resource tracker, in its own process, that it cleaned up semaphores a
# process left: after a SIGKILL of this one, the queues Dask keeps to its worker processes (6 each).
# Nothing is left (it removed them); nothing can prevent it (a killed process frees nothing).
RESOURCE_TRACKER_WARNINGS = "ignore::UserWarning:multiprocessing.resource_tracker"


def _run(args: dict[str, Any], flags: argparse.ArgumentParser) -> int:
    command, config_path, verbose = args.pop("command"), args.pop("config"), args.pop("verbose")
    counts = args.pop("counts", None)  # merge's, which no config file gives
    try:
        options = {**resolve(args, config_path), "counts": counts}
        _configure_logging(options["quiet"], verbose)
        _warn_of_joined_special_tokens(options.get("special_tokens") or [])
        if command == "warm-up":
            return _warm_up(options)
        # On a terminal, log records print above the progress bar, not after it on its line.
        above_bars = logging_redirect_tqdm() if sys.stderr.isatty() else contextlib.nullcontext()
        with _place_named(options, command), above_bars:
            report = _job(command, options, flags)
    except BpeDaskError as error:
        interrupts.check()  # an error the signal caused (the cluster closing under a task) is the signal
        message = as_flags(hide_credentials(str(error)), keyword_flags())  # a URL's, whoever said it
        print(f"bpe-dask: error: {message}", file=sys.stderr)
        return 2 if isinstance(error, UsageError) else 1  # 2: as argparse exits for a malformed command
    interrupts.check()
    log.info("done: %s", json.dumps(_summary(report)))
    return 0


def _warn_of_joined_special_tokens(special_tokens: list[str]) -> None:
    """``--special-token 'A,B'`` is one token, ``A,B`` (a special token may hold a comma), where
    ``--vocab-sizes`` takes a list: likely meant as two, so said."""
    for token in special_tokens:
        parts = token.split(",")
        if len(parts) > 1 and all(part.strip() for part in parts):
            repeated = " ".join(f"--special-token {shlex.quote(part.strip())}" for part in parts)
            log.warning("special token %r is one token, commas and all; for %d, repeat the flag: %s",
                        token, len(parts), repeated)  # fmt: skip


def _place_named(options: dict[str, Any], command: str) -> contextlib.AbstractContextManager:
    """Where to run as the user can trace it: a scheduler from ``DASK_SCHEDULER_ADDRESS`` is said to
    come from it; one that a flag or the config file overrides, said to be unused."""
    place_from, exported = options.pop("place_from", None), os.environ.get(ENVIRONMENT)
    if place_from == ENVIRONMENT:
        return given_from(options["scheduler"], ENVIRONMENT)
    name = next((name for name in PLACES if options.get(name)), None)  # the one ``resolve`` kept
    if exported and name and command != "merge":  # merge runs here, wherever the rest would
        said = flag_of(name) if place_from == COMMAND_LINE else f"{name} in {place_from}"
        log.info("%s (%s) is not used: %s says where to run", ENVIRONMENT, exported, said)
    return contextlib.nullcontext()


# Each command's job. It takes the options its command's flags name (``parser``), and the
# ``JobOptions`` a config file gives besides; the special tokens are a job's own argument, not for
# ``evaluate``, which has no flag for them.
JOBS = {"train": train, "count": count_words, "merge": merge, "encode": encode, "evaluate": evaluate}
JOB_OPTIONS = {f.name for f in fields(JobOptions)} - {"special_tokens"}
CLI_ONLY = ("help", "config", "quiet", "verbose")  # never a job's option, nor named in a message


def _job(command: str, options: dict[str, Any], flags: argparse.ArgumentParser) -> dict:
    """Run the job of ``command`` with the options it takes (none given: the job's defaults, the
    special tokens included: the tokenizer's, or those the counts were made with); progress unless
    ``-q``. ``count`` reports the counts table, ``evaluate`` prints its table on stdout (the result;
    the log goes to stderr)."""
    if command == "evaluate" and not options.get("tokenizers") and options.get("tokenizer"):
        options["tokenizers"] = [options["tokenizer"]]  # ``tokenizer = "DIR"`` in a config file
    required = next(group for group in flags._action_groups if group.title == REQUIRED)
    for name in [action.dest for action in required._group_actions]:
        if not options.get(name):
            raise UsageError(f"{flag_of(name)} is {REQUIRED}")
    taken = JOB_OPTIONS | {action.dest for action in flags._actions} - set(CLI_ONLY)
    given = {k: v for k, v in options.items() if k in taken}
    result = JOBS[command](**given, show_progress=not options["quiet"])
    if command == "count":
        return {
            **result.report(),
            "unique_words": count_rows(options["out"], result.store),
            "timings": {"count": result.seconds},
        }
    if command == "evaluate":
        print(table(result), flush=True)
    return result


def _warm_up(options: dict[str, Any]) -> int:
    """numba's cache filled for the patterns given (or the config file's), and where it is."""
    from bpe_dask.stages.warm_up import builtin_patterns, compile_stages

    patterns = builtin_patterns(options.get("patterns") or [options.get("pattern", "gpt2")])
    plural = "s" if len(patterns) > 1 else ""
    log.info("compiling every job's numba code for the %s pattern%s", " and ".join(patterns), plural)
    for line in compile_stages(patterns).lines():
        log.info("%s", line)
    return 0


def _summary(report: dict) -> dict:
    keys = ("input_bytes", "partitions", "unique_words", "num_merges", "tokens", "shards", "timings")
    summary = {k: report[k] for k in keys if k in report}
    if "timings" in summary:
        summary["timings"] = {k: round(v, 2) for k, v in summary["timings"].items()}
    return summary


@functools.cache
def keyword_flags() -> dict[str, str]:
    """Each option's Python keyword and its flag, for messages (``wording.as_flags``).

    >>> flags = keyword_flags()
    >>> flags["on_bad_record"], flags["special_tokens"], flags["tokenizers"], "quiet" in flags
    ('--on-bad-record', '--special-token', '--tokenizer', False)
    """
    actions = [action for command in build_parser().commands.values() for action in command._actions]
    # Each keyword has one flag, whichever command takes it; its long form is its last name (-q, --quiet).
    return {a.dest: a.option_strings[-1] for a in actions if a.option_strings and a.dest not in CLI_ONLY}


class _FlagsFormatter(logging.Formatter):
    """The job's log lines with the options they name as flags (``wording.as_flags``)."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        return as_flags(line, keyword_flags()) if record.name.startswith("bpe_dask") else line


def _configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_FlagsFormatter("bpe-dask: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])  # none if this process's logging is set up
    log.setLevel(level)
    for name in ("matplotlib", "PIL"):  # drawing compression.png: font searches, not the job's news
        logging.getLogger(name).setLevel(logging.WARNING)
    if verbose:  # Dask's config gives its loggers levels of their own: -v lowers them (and the workers')
        # to INFO, not DEBUG: Dask's debug lines dump raw messages, pickled arguments and so the
        # storage options' credentials included.
        for name in ("distributed", "dask"):
            logging.getLogger(name).setLevel(logging.INFO)
    else:
        quiet_dask_errors()
        for name in ("botocore", "aiobotocore", "s3fs", "fsspec"):  # "Found credentials in ...", say
            logging.getLogger(name).setLevel(logging.WARNING)


if __name__ == "__main__":
    sys.exit(main())
