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
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, NoReturn

from bpe_dask import interrupts
from bpe_dask.cli.config import resolve
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.counts_table import count_rows
from bpe_dask.io.plan import BAD_RECORD_ACTIONS, INPUT_FORMATS
from bpe_dask.io.text import UTF8_ERRORS
from bpe_dask.jobs.cluster import quiet_dask_errors
from bpe_dask.jobs.count import count_words
from bpe_dask.jobs.encode import encode
from bpe_dask.jobs.options import JobOptions
from bpe_dask.jobs.train import merge, train
from bpe_dask.version import __version__

log = logging.getLogger("bpe_dask")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


INPUT_HELP = "files, directories or globs, local paths or URLs fsspec reads (s3://, gs://, ...)"
SPECIAL_TOKEN_HELP = (
    "a special token, e.g. '<|endoftext|>': split out before counting, never merged (repeatable)"
)


PATTERN_HELP = (
    "the pre-tokenization split pattern: gpt2 (the default), gpt4 (cl100k), o200k, or a regex of your "
    "own (cut only at special tokens, so one long document without them is one task)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bpe-dask",
        description="Exact byte-level BPE tokenizers (GPT-2 / CS336 rules) trained and applied as Dask jobs.",
        epilog="Run `bpe-dask COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"bpe-dask {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    train = _command(
        commands, "train", "count words and learn merges: the whole job, a tokenizer directory out"
    )
    required = _required(train)
    required.add_argument("inputs", nargs="*", metavar="INPUT", default=argparse.SUPPRESS, help=INPUT_HELP)
    _vocab_size_option(required)
    _out_option(required, "DIR", "directory for vocab.json, merges.txt, tokenizer.json and report.json")
    _special_token_option(train, SPECIAL_TOKEN_HELP)
    _pattern_option(train, PATTERN_HELP)
    _limit_options(train)
    _input_options(train)
    _option(
        train,
        "--merge-on",
        choices=("auto", "client", "worker"),
        help="where the merge loop runs (auto: on a worker, unless the cluster is the embedded one)",
    )
    _cluster_options(train)

    count = _command(commands, "count", "count words only, into a Parquet table to merge later")
    required = _required(count)
    required.add_argument("inputs", nargs="*", metavar="INPUT", default=argparse.SUPPRESS, help=INPUT_HELP)
    _out_option(required, "COUNTS", "Parquet file for the counts (token: binary, count: int64)")
    _special_token_option(count, SPECIAL_TOKEN_HELP)
    _pattern_option(count, PATTERN_HELP)
    _input_options(count)
    _cluster_options(count)

    merge = _command(commands, "merge", "learn merges from a counts table that `bpe-dask count` wrote")
    required = _required(merge)
    required.add_argument("counts", metavar="COUNTS", help="a Parquet counts table (a file or URL)")
    _vocab_size_option(required)
    _out_option(required, "DIR", "directory for vocab.json, merges.txt, tokenizer.json and report.json")
    _special_token_option(merge, "a special token (default: those the counts were made with)")
    _pattern_option(merge, "the split pattern (default: the one the counts were made with)")
    _limit_options(merge)
    _engine_option(merge)
    _common_options(merge)

    encode = _command(commands, "encode", "encode text into token ids with a trained tokenizer")
    required = _required(encode)
    required.add_argument("inputs", nargs="*", metavar="INPUT", default=argparse.SUPPRESS, help=INPUT_HELP)
    _option(required, "--tokenizer", metavar="DIR", help="a tokenizer directory `bpe-dask train` wrote")
    _out_option(
        required, "OUT", "a .bin file of ids (with OUT.json beside it), or a directory of .npy shards"
    )
    _option(encode, "--format", choices=("bin", "npy"),
            help="bin: one flat file of uint16/uint32 ids to np.memmap; npy: a directory of shards "
                 "(default: bin when OUT ends in .bin)")  # fmt: skip
    _special_token_option(encode, "a special token (default: those the tokenizer's tokenizer.json registers)")
    _input_options(encode)
    _option(encode, "--document-separator", metavar="TOKEN",
            help="with records (Parquet, JSON Lines): end each document with this special token's id, "
                 "e.g. '<|endoftext|>'")  # fmt: skip
    _option(encode, "--trust-pattern", action="store_true",
            help="run the tokenizer's split pattern even if not built in (gpt2, gpt4, o200k)")  # fmt: skip
    _cluster_options(encode)
    return parser


def _command(commands: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    return commands.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".")


def _required(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    group = parser.add_argument_group("required (on the command line or in --config)")
    parser._action_groups.insert(0, parser._action_groups.pop())  # shown first
    return group


def _option(parser: argparse._ActionsContainer, *flags: str, **kwargs: Any) -> None:
    parser.add_argument(*flags, default=argparse.SUPPRESS, **kwargs)


def _vocab_size_option(parser: argparse._ActionsContainer) -> None:
    _option(
        parser,
        "--vocab-size",
        metavar="N",
        help="tokens in the vocabulary: 256 bytes + special tokens + merges",
    )


def _limit_options(parser: argparse._ActionsContainer) -> None:
    _option(
        parser,
        "--min-frequency",
        metavar="N",
        help="stop merging when the most frequent pair occurs fewer than N times (default: no limit)",
    )
    _option(
        parser,
        "--max-token-length",
        metavar="N",
        help="never learn a token longer than N bytes: longer pairs are passed over (default: no limit)",
    )


def _pattern_option(parser: argparse._ActionsContainer, help: str) -> None:
    _option(parser, "--pattern", metavar="NAME|REGEX", help=help)


def _input_options(parser: argparse._ActionsContainer) -> None:
    _option(parser, "--input-format", choices=INPUT_FORMATS,
            help="how to read the inputs (default: by name: .parquet, .jsonl/.ndjson (also .gz, .zst, ...), "
                 "else text)")  # fmt: skip
    _option(parser, "--text-column", metavar="NAME",
            help="the Parquet column or JSON field holding each document's text (default: text)")  # fmt: skip
    _option(parser, "--on-bad-record", choices=BAD_RECORD_ACTIONS,
            help="a record without text (bad JSON, missing field, not a string, null): stop at it "
                 "(error, the default) or leave it out and count it (skip)")  # fmt: skip


def _out_option(parser: argparse._ActionsContainer, metavar: str, help: str) -> None:
    _option(parser, "--out", metavar=metavar, help=help)


def _special_token_option(parser: argparse._ActionsContainer, help: str) -> None:
    _option(parser, "--special-token", dest="special_tokens", action="append", metavar="TOKEN", help=help)


def _cluster_options(parser: argparse._ActionsContainer) -> None:
    _option(
        parser,
        "--workers",
        metavar="N",
        help="start a LocalCluster of N worker processes (default: one per core)",
    )
    _option(parser, "--scheduler", metavar="ADDR", help="run on a Dask scheduler, e.g. tcp://host:8786")
    _option(
        parser,
        "--chunk-size",
        metavar="SIZE",
        help="bytes per map task, e.g. 16MiB (default: from the input size and the cluster's threads)",
    )
    _option(
        parser,
        "--utf8-errors",
        choices=UTF8_ERRORS,
        help="invalid UTF-8 in the input: stop at it (strict, the default) or read it as U+FFFD (replace)",
    )
    _engine_option(parser)
    _option(
        parser,
        "--work-dir",
        metavar="DIR",
        help="where shards go; kept, so a re-run reuses them (default: a temporary directory)",
    )
    _option(
        parser, "--ship-package", action="store_true", help="upload this bpe_dask to workers that lack it"
    )
    _option(parser, "--ship-credentials", action="store_true",
            help="send this machine's AWS_* credentials to the tasks (default: their own)")  # fmt: skip
    _common_options(parser)


def _engine_option(parser: argparse._ActionsContainer) -> None:
    _option(
        parser,
        "--engine",
        choices=("auto", "python", "numba"),
        help="compiled code (numba) or the pure-Python reference; auto: compiled where it pays (the default)",
    )


def _common_options(parser: argparse._ActionsContainer) -> None:
    _option(
        parser,
        "--storage-options",
        metavar="JSON",
        help='fsspec options for URLs, e.g. \'{"endpoint_url": "http://127.0.0.1:9000"}\'',
    )
    parser.add_argument("--config", metavar="FILE", help="a TOML file of options; flags override it")
    _option(parser, "--overwrite", action="store_true", help="replace results already in --out")
    _option(parser, "-q", "--quiet", action="store_true", help="warnings and errors only")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, Dask's included")


def main(argv: Sequence[str] | None = None) -> int:
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
        if command == "merge":
            report = _merge(counts, options)
        elif command == "count":
            report = _count(options)
        elif command == "encode":
            report = _encode(options)
        else:
            report = _train(options)
    except BpeDaskError as error:
        interrupts.check()  # an error the signal caused (the cluster closing under a task) is the signal
        print(f"bpe-dask: error: {error}", file=sys.stderr)
        return 1
    interrupts.check()
    log.info("done: %s", json.dumps(_summary(report)))
    return 0


def _require(options: dict[str, Any], *names: str) -> None:
    for name in names:
        if not options.get(name):
            flag = "INPUT" if name == "inputs" else "--" + name.replace("_", "-")
            raise BpeDaskError(f"{flag} is required (on the command line or in --config)")


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
    if not verbose:
        quiet_dask_errors()
        for name in ("botocore", "aiobotocore", "s3fs", "fsspec"):  # "Found credentials in ...", say
            logging.getLogger(name).setLevel(logging.WARNING)


if __name__ == "__main__":
    sys.exit(main())
