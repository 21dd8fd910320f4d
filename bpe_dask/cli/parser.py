"""The command line's grammar: every flag once, in ``FLAGS``, and each command as the list of its flags.

Takes nothing; gives the ``argparse`` parser of ``bpe-dask train | count | merge | encode | evaluate |
warm-up``. A flag the user leaves out is absent from the parsed options (``argparse.SUPPRESS``), so a
``--config`` file can give it instead (``config.resolve``).

>>> vars(build_parser().parse_args(["count", "in.txt", "--out", "counts.parquet"]))
{'command': 'count', 'config': None, 'verbose': False, 'inputs': ['in.txt'], 'out': 'counts.parquet'}
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from bpe_dask.cli.config import did_you_mean
from bpe_dask.io.inputs import BAD_RECORD_ACTIONS, INPUT_FORMATS
from bpe_dask.io.text import UTF8_ERRORS
from bpe_dask.version import __version__

INPUT_HELP = "files, directories or globs, local paths or URLs fsspec reads (s3://, gs://, ...)"
SPECIAL_TOKEN_HELP = (
    "a special token, e.g. '<|endoftext|>': split out before counting, never merged (repeatable)"
)
PATTERN_HELP = (
    "the pre-tokenization split pattern: gpt2 (the default), gpt4 (cl100k), o200k, superbpe (SuperBPE's "
    "second stage: no whitespace split), or a regex of your own (cut only at special tokens, so one long "
    "document without them is one task)"
)
TOKENIZER_OUT = "directory for vocab.json, merges.txt, tokenizer.json and report.json"
WARM_UP_HELP = (
    "compile the numba code of every job with these patterns into numba's cache (NUMBA_CACHE_DIR), e.g. "
    "when building a worker image, so that workers load it instead of compiling"
)

# Every flag's argparse keywords (and the two positional arguments'); ``names`` where it has a short
# form, ``default`` where it is not left out when not given. A command may add to them (``--out``'s
# metavar and help differ).
FLAGS: dict[str, dict[str, Any]] = {
    "inputs": {"nargs": "*", "metavar": "INPUT", "help": INPUT_HELP},
    "counts": {"metavar": "COUNTS", "help": "a Parquet counts table (a file or URL)"},
    "--vocab-size": {
        "metavar": "N",
        "help": "tokens in the vocabulary: 256 bytes + special tokens + merges (32000, 32k; 32Ki is 32,768)",
    },
    "--tokenizer": {
        "metavar": "DIR|FILE",
        "help": "a tokenizer directory `bpe-dask train` wrote, or a Hugging Face tokenizer.json",
    },
    "--vocab-sizes": {
        "metavar": "N,N,...",
        "help": "also measure each tokenizer cut to these vocabulary sizes (its first merges): 8000,16k,32Ki",
    },
    "--out": {},
    "--format": {
        "choices": ("bin", "npy"),
        "help": (
            "bin: one flat file of uint16/uint32 ids to np.memmap; npy: a directory of shards (default: bin "
            "when OUT ends in .bin, npy when it has no suffix; any other name needs --format)"
        ),
    },
    "--special-token": {"dest": "special_tokens", "action": "append", "metavar": "TOKEN"},
    "--pattern": {"metavar": "NAME|REGEX"},
    **{
        f"--{role}-token": {
            "metavar": "TOKEN",
            "help": (
                f"the special token transformers takes as {role}_token, in tokenizer_config.json "
                f"(default: {'<|endoftext|> where it is one, as GPT-2' if role != 'pad' else 'none'})"
            ),
        }
        for role in ("bos", "eos", "pad")
    },
    "--init-from": {
        "metavar": "BASE",
        "help": (
            "continue training from this tokenizer, every id it has kept: a tokenizer directory (bpe-dask's, "
            "or GPT-2's vocab.json and merges.txt), a tokenizer.json or a tiktoken rank file, local or a "
            "URL; its special tokens and split pattern unless others are given"
        ),
    },
    "--inherit": {
        "metavar": "N",
        "help": "with --init-from, keep its first N merges only, and the tokens they make (default: all)",
    },
    "--superwords-after": {
        "metavar": "T",
        "help": (
            "make a superword tokenizer (SuperBPE): merges up to T tokens with --pattern, then on to "
            "--vocab-size with the superbpe pattern, which does not split words (the paper's T: 90 %% "
            "of the vocab size)"
        ),
    },
    "--superwords-pattern": {
        "metavar": "NAME",
        "help": (
            "with --superwords-after, the second stage's pattern: superbpe (the default: documents whole "
            "between numbers), or superbpe-lines (cut after each line end, as SuperBPE's trainer reads files)"
        ),
    },
    "--min-frequency": {
        "metavar": "N",
        "help": "stop merging when the most frequent pair occurs fewer than N times (default: no limit)",
    },
    "--max-token-length": {
        "metavar": "N",
        "help": "never learn a token longer than N bytes: longer pairs are passed over (default: no limit)",
    },
    "--max-words": {
        "metavar": "N",
        "help": (
            "never learn a token of more than N words (runs of bytes other than the space; SuperBPE's "
            "recipe: 4) (default: no limit)"
        ),
    },
    "--forbid": {
        "metavar": "TEXT",
        "action": "append",
        "help": "never learn a token holding TEXT (repeatable; SuperBPE's recipe: ': ') (default: none)",
    },
    "--input-format": {
        "choices": INPUT_FORMATS,
        "help": (
            "how to read the inputs (default: by name: .parquet, .jsonl/.ndjson (also .gz, .zst, ...), else "
            "text)"
        ),
    },
    "--text-column": {
        "metavar": "NAME",
        "help": "the Parquet column or JSON field holding each document's text (default: text)",
    },
    "--on-bad-record": {
        "choices": BAD_RECORD_ACTIONS,
        "help": (
            "a record without text (bad JSON, missing field, not a string, null): stop at it (error, the "
            "default) or leave it out and count it (skip)"
        ),
    },
    "--document-separator": {
        "metavar": "TOKEN",
        "help": (
            "with records (Parquet, JSON Lines): end each document with this special token's id, e.g. "
            "'<|endoftext|>'"
        ),
    },
    "--strict-pattern": {
        "action": "store_true",
        "help": (
            "stop, before any work, if the split pattern leaves characters of a sample of the input out of "
            "every pre-token (default: a warning)"
        ),
    },
    "--trust-pattern": {
        "action": "store_true",
        "help": "run the tokenizer's split pattern even if it is not a built-in one (see --pattern)",
    },
    "--merge-on": {
        "choices": ("auto", "client", "worker"),
        "help": "where the merge loop runs (auto: on a worker, unless the cluster is the embedded one)",
    },
    "--workers": {
        "metavar": "N",
        "help": "start a LocalCluster of N worker processes (default: one per core)",
    },
    "--scheduler": {"metavar": "ADDR", "help": "run on a Dask scheduler, e.g. tcp://host:8786"},
    "--scheduler-file": {
        "metavar": "FILE",
        "help": (
            "run on the Dask scheduler this file names: the JSON `dask scheduler --scheduler-file`, "
            "dask-jobqueue and dask-mpi write"
        ),
    },
    "--chunk-size": {
        "metavar": "SIZE",
        "help": "bytes per map task, e.g. 16MiB (default: from the input size and the cluster's threads)",
    },
    "--utf8-errors": {
        "choices": UTF8_ERRORS,
        "help": "invalid UTF-8 in the input: stop at it (strict, the default) or read it as U+FFFD (replace)",
    },
    "--engine": {
        "choices": ("auto", "python", "numba"),
        "help": (
            "compiled code (numba) or the pure-Python reference; auto: compiled where it pays (the default)"
        ),
    },
    "--work-dir": {
        "metavar": "DIR",
        "help": "where shards go; kept, so a re-run reuses them (default: a temporary directory)",
    },
    "--ship-package": {"action": "store_true", "help": "upload this bpe_dask to workers that lack it"},
    "--ship-credentials": {
        "action": "store_true",
        "help": "send this machine's AWS_* credentials to the tasks (default: their own)",
    },
    "--storage-options": {
        "metavar": "JSON",
        "help": 'fsspec options for URLs, e.g. \'{"endpoint_url": "http://127.0.0.1:9000"}\'',
    },
    "--config": {"default": None, "metavar": "FILE", "help": "a TOML file of options; flags override it"},
    "--overwrite": {"action": "store_true", "help": "replace results already in --out"},
    "--quiet": {"names": ("-q", "--quiet"), "action": "store_true", "help": "warnings and errors only"},
    "--verbose": {
        "names": ("-v", "--verbose"),
        "default": False,
        "action": "store_true",
        "help": "debug logging, Dask's included",
    },
}
LIMITS = ("--init-from", "--inherit", "--min-frequency", "--max-token-length", "--max-words", "--forbid")
ROLES = ("--bos-token", "--eos-token", "--pad-token")
SUPERWORDS = ("--superwords-after", "--superwords-pattern")
READING = ("--input-format", "--text-column", "--on-bad-record")
COMMON = ("--storage-options", "--config", "--overwrite", "--quiet", "--verbose")
PLACE_FLAGS = ("--workers", "--scheduler", "--scheduler-file")  # where a job runs
RUN_FLAGS = (
    "--chunk-size",
    "--utf8-errors",
    "--engine",
    "--work-dir",
    "--ship-package",
    "--ship-credentials",
)
CLUSTER = (*PLACE_FLAGS, *RUN_FLAGS, *COMMON)
CHECKS = ("--trust-pattern", "--strict-pattern")

REQUIRED = "required (on the command line or in --config)"  # the title of a command's required options
Flag = str | tuple[str, dict[str, Any]]  # a flag, or a flag and what the command adds to it


class _Parser(argparse.ArgumentParser):
    commands: Mapping[str, argparse.ArgumentParser] = {}  # each command's parser (``bpe-dask``'s only)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:  # a typo: name the flag it was meant to be
            command = parsed.command
            flag = next((word.split("=")[0] for word in unknown if word.startswith("--")), None)
            known = _flags(self.commands[command] if command else self)
            owners = [name for name, parser in self.commands.items() if flag in _flags(parser)]
            message = f"unrecognized arguments: {' '.join(unknown)}"
            if flag not in known and owners:  # another command's flag, not a typo
                where = f"of {command}" if command else "here"
                message += f" ({flag} is an option of {' and '.join(owners)}, not {where})"
            elif flag:
                message += did_you_mean(flag, known)
            self.error(message)
        return parsed

    def error(self, message: str) -> NoReturn:
        # One prefix for every error line, a command's included: "bpe-dask: error: train: ...".
        command = self.prog.removeprefix("bpe-dask").strip()
        self.exit(2, f"bpe-dask: error: {command + ': ' if command else ''}{message}\n")


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every flag of ``parser`` and its commands."""
    flags = [flag for action in parser._actions for flag in action.option_strings]
    return flags + [flag for command in getattr(parser, "commands", {}).values() for flag in _flags(command)]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``bpe-dask`` and each of its commands, with each command's flags (``FLAGS``)."""
    parser = _Parser(
        prog="bpe-dask",
        description="Exact byte-level BPE tokenizers (GPT-2 / CS336 rules) trained and applied as Dask jobs.",
        epilog="Run `bpe-dask COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"bpe-dask {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.commands = commands.choices
    out = lambda metavar, help: ("--out", {"metavar": metavar, "help": help})  # noqa: E731
    special = lambda help: ("--special-token", {"help": help})  # noqa: E731
    pattern = lambda help: ("--pattern", {"help": help})  # noqa: E731
    counting = [special(SPECIAL_TOKEN_HELP), pattern(PATTERN_HELP), "--strict-pattern"]
    _command(
        commands,
        "train",
        "count words and learn merges: the whole job, a tokenizer directory out",
        ["inputs", "--vocab-size", out("DIR", TOKENIZER_OUT)],
        [*counting, *LIMITS, *SUPERWORDS, *ROLES, *READING, "--merge-on", *CLUSTER],
    )
    _command(
        commands,
        "count",
        "count words only, into a Parquet table to merge later",
        ["inputs", out("COUNTS", "Parquet file for the counts (token: binary, count: int64)")],
        [*counting, *READING, *CLUSTER],
    )
    merge_special = special("a special token (default: those the counts were made with)")
    merge_pattern = pattern("the split pattern (default: the one the counts were made with)")
    _command(
        commands,
        "merge",
        "learn merges from a counts table that `bpe-dask count` wrote",
        ["counts", "--vocab-size", out("DIR", TOKENIZER_OUT)],
        [merge_special, merge_pattern, *LIMITS, *ROLES, "--engine", *COMMON],
    )
    ids_out = out("OUT", "a .bin file of ids (with OUT.json beside it), or a directory of .npy shards")
    encode_special = special("a special token (default: those the tokenizer's tokenizer.json registers)")
    _command(
        commands,
        "encode",
        "encode text into token ids with a trained tokenizer",
        ["inputs", "--tokenizer", ids_out],
        ["--format", encode_special, *READING, "--document-separator", *CHECKS, *CLUSTER],
    )
    patterns_help = "the built-in patterns the jobs use: gpt2 (the default), gpt4, o200k, superbpe"
    patterns = {
        "dest": "patterns",
        "nargs": "+",
        "action": "extend",
        "metavar": "NAME",
        "help": patterns_help,
    }
    _command(
        commands, "warm-up", WARM_UP_HELP, [], [("--pattern", patterns), "--config", "--quiet", "--verbose"]
    )
    tokenizers_help = "a tokenizer directory, or a HF tokenizer.json (repeatable)"
    tokenizers = {"dest": "tokenizers", "action": "append", "metavar": "DIR|FILE", "help": tokenizers_help}
    evaluation_out = out("DIR", "write evaluation.json and evaluation.png there (default: print only)")
    _command(
        commands,
        "evaluate",
        "measure how well tokenizers compress held-out text (bytes per token)",
        ["inputs", ("--tokenizer", tokenizers)],
        ["--vocab-sizes", evaluation_out, *READING, *CHECKS, *(f for f in CLUSTER if f != "--work-dir")],
    )
    return parser


def _command(
    commands: argparse._SubParsersAction, name: str, help: str, required: list[Flag], optional: list[Flag]
) -> None:
    """The command ``name``: its ``required`` options (on the command line or in ``--config``; the
    inputs, or a counts table, first, as a positional argument) shown first, then the others."""
    parser = commands.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".")
    group = parser.add_argument_group(REQUIRED)
    parser._action_groups.insert(0, parser._action_groups.pop())  # shown first
    if not required:  # a command of no input
        parser._action_groups.remove(group)
    for container, flag in [*((group, f) for f in required), *((parser, f) for f in optional)]:
        name, added = (flag, {}) if isinstance(flag, str) else flag
        keywords = {"default": argparse.SUPPRESS, **FLAGS[name], **added}
        container.add_argument(*keywords.pop("names", (name,)), **keywords)
