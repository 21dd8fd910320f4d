"""The command line: ``bpe-dask train | count | merge | encode``, each a job of the Python API.

Takes ``argv``; resolves flags and ``--config`` into options (``config``), runs the job and gives
an exit code: 0 when done, 1 for a user error (one line on stderr, no traceback), 2 for a
malformed command line, 130 when interrupted, 143 when terminated.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, NoReturn

from .blocks import UTF8_ERRORS
from .config import resolve
from .count_job import count_words
from .counts_table import count_rows
from .encode_job import encode
from .errors import BpeDaskError
from .options import JobOptions
from .train_job import merge, train
from .version import __version__

log = logging.getLogger("bpe_dask")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bpe-dask", description="Exact byte-level BPE training on Dask.")
    parser.add_argument("--version", action="version", version=f"bpe-dask {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    train = commands.add_parser("train", help="count words and learn merges: the whole job")
    train.add_argument("inputs", nargs="*", metavar="INPUT", default=argparse.SUPPRESS)
    _vocab_options(train, "directory for vocab.json, merges.txt, tokenizer.json, report.json")
    _special_token_option(train)
    train.add_argument(
        "--merge-on",
        choices=("auto", "client", "worker"),
        default=argparse.SUPPRESS,
        help="where the merge loop runs (auto: on a worker unless the cluster is the embedded one)",
    )
    _count_options(train)

    count = commands.add_parser("count", help="count words only, into a Parquet table")
    count.add_argument("inputs", nargs="*", metavar="INPUT", default=argparse.SUPPRESS)
    count.add_argument(
        "--out", metavar="COUNTS", default=argparse.SUPPRESS, help="Parquet file for the counts"
    )
    _special_token_option(count)
    _count_options(count)

    encode = commands.add_parser("encode", help="encode text into .npy shards of token ids")
    encode.add_argument("inputs", nargs="*", metavar="INPUT", default=argparse.SUPPRESS)
    encode.add_argument(
        "--tokenizer", metavar="DIR", default=argparse.SUPPRESS, help="a directory `bpe-dask train` wrote"
    )
    encode.add_argument(
        "--out", metavar="DIR", default=argparse.SUPPRESS, help="directory for the shards and index.json"
    )
    encode.add_argument(
        "--special-token", dest="special_tokens", action="append", metavar="TOK", default=argparse.SUPPRESS,
        help="special tokens (default: those the tokenizer's tokenizer.json registers)",
    )  # fmt: skip
    _count_options(encode)

    merge = commands.add_parser("merge", help="learn merges from a counts table")
    merge.add_argument("counts", metavar="COUNTS", help="a Parquet table written by `bpe-dask count`")
    _vocab_options(merge, "output directory")
    _special_token_option(merge)
    _common_options(merge)
    return parser


def _vocab_options(parser: argparse.ArgumentParser, out_help: str) -> None:
    parser.add_argument("--vocab-size", type=int, metavar="N", default=argparse.SUPPRESS)
    parser.add_argument("--out", metavar="DIR", default=argparse.SUPPRESS, help=out_help)


def _special_token_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--special-token", dest="special_tokens", action="append", metavar="TOK", default=argparse.SUPPRESS
    )


def _count_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=argparse.SUPPRESS,
        help="LocalCluster worker processes (default: one per core)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDR",
        default=argparse.SUPPRESS,
        help="address of a running Dask scheduler, e.g. tcp://host:8786",
    )
    parser.add_argument(
        "--chunk-size",
        metavar="SIZE",
        default=argparse.SUPPRESS,
        help="bytes per map task, e.g. 65536 or 64MiB (default 64MiB)",
    )
    parser.add_argument(
        "--ship-package",
        action="store_true",
        default=argparse.SUPPRESS,
        help="upload this bpe_dask to workers that lack it",
    )
    parser.add_argument(
        "--utf8-errors",
        choices=UTF8_ERRORS,
        default=argparse.SUPPRESS,
        help="invalid UTF-8 in the input: stop with its offset (strict, the default) or count it as U+FFFD",
    )
    parser.add_argument(
        "--work-dir",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="where shards go; kept, so a re-run reuses them (default: a temporary directory)",
    )
    _common_options(parser)


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage-options",
        metavar="JSON",
        default=argparse.SUPPRESS,
        help='fsspec options for remote URLs, e.g. \'{"endpoint_url": "http://127.0.0.1:9000"}\'',
    )
    parser.add_argument("--config", metavar="FILE", help="TOML file of options; flags override it")
    parser.add_argument(
        "--overwrite", action="store_true", default=argparse.SUPPRESS, help="replace results already in --out"
    )
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="warnings only")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, Dask's included")


def main(argv: Sequence[str] | None = None) -> int:
    args = vars(build_parser().parse_args(argv))
    command, config_path, verbose = args.pop("command"), args.pop("config"), args.pop("verbose")
    counts = args.pop("counts", None)
    try:
        with _sigterm_stops_the_job():
            return _run(command, config_path, verbose, counts, args)
    except Terminated:
        print("bpe-dask: terminated", file=sys.stderr)
        return 143


def _run(command: str, config_path: str | None, verbose: bool, counts: str | None, args: dict) -> int:
    try:
        options = resolve(args, config_path)
        _configure_logging(options["quiet"], verbose)
        if command == "merge":
            report = _merge(counts, options)
        elif command == "count":
            report = _count(options)
        elif command == "encode":
            report = _encode(options)
        else:
            report = _train(options)
    except BpeDaskError as error:
        print(f"bpe-dask: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bpe-dask: interrupted", file=sys.stderr)
        return 130
    log.info("done: %s", json.dumps(_summary(report)))
    return 0


class Terminated(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C does, closing the cluster and removing temporary files."""


@contextmanager
def _sigterm_stops_the_job() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # signals go to the main thread only
        yield
        return

    def stop(signum: int, frame: object) -> NoReturn:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _require(options: dict[str, Any], *names: str) -> None:
    for name in names:
        if not options.get(name):
            flag = "INPUT" if name == "inputs" else "--" + name.replace("_", "-")
            raise BpeDaskError(f"{flag} is required (on the command line or in --config)")


def _job_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options that are ``JobOptions`` fields, as keyword arguments; progress unless ``-q``."""
    names = {f.name for f in fields(JobOptions)} - {"special_tokens"}
    return {**{k: v for k, v in options.items() if k in names}, "show_progress": not options["quiet"]}


def _train(options: dict[str, Any]) -> dict:
    _require(options, "inputs", "vocab_size", "out")
    return train(
        options["inputs"],
        options["vocab_size"],
        options["out"],
        options["special_tokens"],
        **_job_options(options),
    )


def _count(options: dict[str, Any]) -> dict:
    _require(options, "inputs", "out")
    job_options = {**_job_options(options), "in_process": False}
    counted = count_words(options["inputs"], options["special_tokens"], out=options["out"], **job_options)
    return {
        **counted.report(),
        "unique_words": count_rows(options["out"], counted.storage_options),
        "timings": {"count": counted.seconds},
    }


def _encode(options: dict[str, Any]) -> dict:
    _require(options, "inputs", "tokenizer", "out")
    special_tokens = options["special_tokens"] or None  # none given: the tokenizer's own
    return encode(
        options["inputs"], options["tokenizer"], options["out"], special_tokens, **_job_options(options)
    )


def _merge(counts: str, options: dict[str, Any]) -> dict:
    _require(options, "vocab_size", "out")
    return merge(
        counts, options["vocab_size"], options["out"], options["special_tokens"], **_job_options(options)
    )


def _summary(report: dict) -> dict:
    keys = ("input_bytes", "partitions", "unique_words", "num_merges", "tokens", "shards", "timings")
    return {k: report[k] for k in keys if k in report}


def _configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    logging.basicConfig(format="bpe-dask: %(message)s", level=level, stream=sys.stderr)
    log.setLevel(level)
    if not verbose:
        # Failures reach the user as one line each; Dask's own error logs (tracebacks of a lost
        # connection, say) repeat them at length: -v shows them.
        noisy = ("distributed", "dask", "tornado", "asyncio")
        names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in noisy]
        for name in {*noisy, *names}:  # Dask's config gives some child loggers levels of their own
            logging.getLogger(name).setLevel(logging.CRITICAL)


if __name__ == "__main__":
    sys.exit(main())
