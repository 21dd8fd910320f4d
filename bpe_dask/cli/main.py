"""The command line: ``bpe-dask train | count | merge | encode | evaluate``, each a job of the Python
API (and ``warm-up``, which fills numba's cache for them).

Takes ``argv``; parses it (``parser``), resolves flags and ``--config`` into options
(``config``), runs the job and gives an exit code: 0 when done, 1 for a user error (one line on
stderr, no traceback), 2 for a malformed command line (argparse's, or options missing, unknown or
not of their kind: ``UsageError``), 130 when interrupted, 143 when terminated.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, NoReturn

from bpe_dask import interrupts
from bpe_dask.cli.config import resolve
from bpe_dask.cli.parser import build_parser
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

log = logging.getLogger("bpe_dask")


def run() -> NoReturn:
    """The console script (and ``python -m bpe_dask``): ``main``, then the process ends at once.

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
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    if not args.get("command"):
        parser.print_help(sys.stderr)
        return 2
    command, config_path, verbose = args.pop("command"), args.pop("config"), args.pop("verbose")
    counts = args.pop("counts", None)
    with interrupts.handled():
        try:
            return _run(command, config_path, verbose, counts, args)
        except BaseException as error:
            if interrupts.received() is None and not isinstance(error, KeyboardInterrupt):
                raise
            terminated = interrupts.received() == signal.SIGTERM  # whatever the signal left behind
            print(f"bpe-dask: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
            return 143 if terminated else 130


def _run(command: str, config_path: str | None, verbose: bool, counts: str | None, args: dict) -> int:
    try:
        options = resolve(args, config_path)
        _configure_logging(options["quiet"], verbose)
        if command == "warm-up":
            return _warm_up(options)
        if command == "merge":
            report = _merge(counts, options)
        elif command == "count":
            report = _count(options)
        elif command == "encode":
            report = _encode(options)
        elif command == "evaluate":
            report = _evaluate(options)
        else:
            report = _train(options)
    except BpeDaskError as error:
        interrupts.check()  # an error the signal caused (the cluster closing under a task) is the signal
        print(f"bpe-dask: error: {hide_credentials(str(error))}", file=sys.stderr)  # a URL's, whoever said it
        return 2 if isinstance(error, UsageError) else 1  # 2: as argparse exits for a malformed command
    interrupts.check()
    log.info("done: %s", json.dumps(_summary(report)))
    return 0


def _require(options: dict[str, Any], *names: str) -> None:
    for name in names:
        if not options.get(name):
            flag = {"inputs": "INPUT", "tokenizers": "--tokenizer"}.get(name) or "--" + name.replace("_", "-")
            raise UsageError(f"{flag} is required (on the command line or in --config)")


def _job_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options that are ``JobOptions`` fields, as keyword arguments; progress unless ``-q``."""
    names = {f.name for f in fields(JobOptions)} - {"special_tokens"}
    return {**{k: v for k, v in options.items() if k in names}, "show_progress": not options["quiet"]}


def _limits(options: dict[str, Any]) -> dict[str, Any]:
    """``min_frequency`` and ``max_token_length``, where given."""
    return {k: options[k] for k in ("min_frequency", "max_token_length") if k in options}


def _train(options: dict[str, Any]) -> dict:
    _require(options, "inputs", "vocab_size", "out")
    return train(
        options["inputs"],
        options["vocab_size"],
        options["out"],
        options.get("special_tokens", []),
        **_limits(options),
        **_job_options(options),
    )


def _count(options: dict[str, Any]) -> dict:
    _require(options, "inputs", "out")
    job_options = {**_job_options(options), "in_process": False}
    special_tokens = options.get("special_tokens", [])
    counted = count_words(options["inputs"], special_tokens, out=options["out"], **job_options)
    return {
        **counted.report(),
        "unique_words": count_rows(options["out"], counted.store),
        "timings": {"count": counted.seconds},
    }


def _encode(options: dict[str, Any]) -> dict:
    _require(options, "inputs", "tokenizer", "out")
    special_tokens = options.get("special_tokens")  # none given: the tokenizer's own
    fmt = options.get("format")
    return encode(
        options["inputs"],
        options["tokenizer"],
        options["out"],
        special_tokens,
        format=fmt,
        document_separator=options.get("document_separator"),
        trust_pattern=options.get("trust_pattern", False),
        **_job_options(options),
    )


def _evaluate(options: dict[str, Any]) -> dict:
    """Print the table on stdout (the result; the log goes to stderr); files only with ``--out``."""
    if not options.get("tokenizers") and options.get("tokenizer"):  # ``tokenizer = "DIR"`` in a config file
        options["tokenizers"] = [options["tokenizer"]]
    _require(options, "inputs", "tokenizers")
    report = evaluate(
        options["inputs"],
        options["tokenizers"],
        options.get("vocab_sizes"),
        options.get("out"),
        trust_pattern=options.get("trust_pattern", False),
        **_job_options(options),
    )
    print(table(report), flush=True)
    return report


def _merge(counts: str, options: dict[str, Any]) -> dict:
    _require(options, "vocab_size", "out")
    special_tokens = options.get("special_tokens")  # none given: those the counts were made with
    return merge(
        counts,
        options["vocab_size"],
        options["out"],
        special_tokens,
        **_limits(options),
        **_job_options(options),
    )


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


def _configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(format="bpe-dask: %(message)s", level=level, stream=sys.stderr)
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
