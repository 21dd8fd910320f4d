"""Command-line options: built-in defaults, then a TOML config file, then command-line flags.

Takes the flags argparse saw and an optional ``--config`` file; gives one dict of option values
in the types the jobs take (``JobOptions`` checks what they mean). A config file uses the long
option names (``vocab_size`` or ``vocab-size``) at the top level. Relative paths in a config file
are taken from the file's own folder, so a job runs the same from any directory; relative paths
in flags, from the current directory.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bpe_dask.errors import BpeDaskError, UsageError
from bpe_dask.io.text import check_utf8_errors
from bpe_dask.jobs.options import MERGE_PLACES, parse_size, positive_int, vocab_count, whole_number


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise BpeDaskError(f"not a string: {value!r}")
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BpeDaskError(f"not a list of strings: {value!r}")
    return list(value)


def _storage_options(value: Any) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise BpeDaskError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise BpeDaskError(f"must be a JSON object or TOML table, got a {type(value).__name__}")
    return value


def _vocab_sizes(value: Any) -> list[int]:
    """``"8000,16k"`` (a flag) or ``[8000, "16k"]`` (TOML) as whole numbers (``vocab_count``)."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    elif not isinstance(value, list) or any(
        isinstance(v, bool) or not isinstance(v, int | str) for v in value
    ):
        raise BpeDaskError(f"not a list of whole numbers: {value!r}")
    if not value:
        raise BpeDaskError("no vocabulary size given")
    return [vocab_count(v) for v in value]


def _merge_on(value: Any) -> str:
    if value not in MERGE_PLACES:
        raise BpeDaskError(f"must be auto, client or worker, got {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise BpeDaskError(f"not true or false: {value!r}")
    return value


# Each option a config file or a flag gives, and how its value is read (``_checked``).
OPTIONS: dict[str, Callable[[Any], Any]] = {
    # patterns: warm-up's
    **dict.fromkeys(("inputs", "special_tokens", "tokenizers", "patterns", "forbid"), _strings),
    **dict.fromkeys(("out", "init_from", "work_dir", "tokenizer", "scheduler", "scheduler_file"), _string),
    **dict.fromkeys(("pattern", "engine", "format", "input_format", "text_column", "on_bad_record"), _string),
    "superwords_pattern": _string,
    **dict.fromkeys(("bos_token", "eos_token", "pad_token", "document_separator"), _string),
    **dict.fromkeys(("overwrite", "quiet", "ship_package", "ship_credentials"), _boolean),
    **dict.fromkeys(("trust_pattern", "strict_pattern"), _boolean),
    "vocab_size": vocab_count,
    "vocab_sizes": _vocab_sizes,
    "inherit": whole_number,
    "superwords_after": vocab_count,
    "min_frequency": whole_number,  # 0 (Hugging Face's default) and 1 both change nothing
    "max_token_length": positive_int,
    "max_words": positive_int,
    "workers": positive_int,
    "chunk_size": parse_size,
    "storage_options": _storage_options,
    "merge_on": _merge_on,
    "utf8_errors": check_utf8_errors,
}
PATH_OPTIONS = {"inputs", "out", "work_dir", "tokenizer", "tokenizers", "scheduler_file", "init_from"}
# Numbers a flag gives as text; a TOML file has numbers of its own, so a quoted one is a mistake
# (a vocabulary size may be "32k", as on the command line).
NUMBER_OPTIONS = {
    "vocab_size",
    "superwords_after",
    "inherit",
    "min_frequency",
    "max_token_length",
    "max_words",
    "workers",
}
# The command line's own defaults; an option not given takes the job's (``JobOptions``'s, the job's own).
DEFAULTS: dict[str, Any] = {"quiet": False}


def load_config(path: str) -> dict[str, Any]:
    """The options a TOML file sets, checked and with canonical names."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"config file not found: {path}") from None
    except OSError as error:
        raise UsageError(f"cannot read config file {path}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: not valid TOML ({error})") from None
    options = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        name = {"input": "inputs", "special_token": "special_tokens"}.get(name, name)
        if name not in OPTIONS:
            raise UsageError(f"{path}: unknown option {key!r}{did_you_mean(name, OPTIONS)}")
        in_thousands = isinstance(value, str) and value.rstrip().endswith(("k", "K", "Ki"))
        whole = isinstance(value, int) and not isinstance(value, bool)
        sized = name in ("vocab_size", "superwords_after") and in_thousands
        if name in NUMBER_OPTIONS and not whole and not sized:
            raise UsageError(f"{path}: {key}: not a whole number: {value!r} (a TOML number has no quotes)")
        if name == "vocab_sizes" and not isinstance(value, list):  # a flag's "8000,16000" is text
            raise UsageError(f"{path}: {key}: not a list of whole numbers: {value!r} (e.g. [8000, 16000])")
        options[name] = _checked(name, value, source=f"{path}: {key}")
    base = os.path.dirname(os.path.abspath(path))
    for name in PATH_OPTIONS & options.keys():
        value = options[name]
        options[name] = [_from(base, v) for v in value] if isinstance(value, list) else _from(base, value)
    return options


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the known word closest to a mistyped one, or nothing.

    >>> did_you_mean("vocab_szie", ["vocab_size", "workers"])
    ' (did you mean vocab_size?)'
    """
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _from(base: str, path: str) -> str:
    """``path`` taken relative to ``base``, unless it is absolute or a URL."""
    return path if "://" in path or os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


ENVIRONMENT = "DASK_SCHEDULER_ADDRESS"  # Dask's own variable for the scheduler a client connects to


def resolve(flags: Mapping[str, Any], config_path: str | None = None) -> dict[str, Any]:
    """Defaults, then the environment, then the config file, then the flags given. Where to run is
    said by the highest of these that says it (``place_from``)."""
    environment = {"scheduler": os.environ[ENVIRONMENT]} if os.environ.get(ENVIRONMENT) else {}
    from_file = load_config(config_path) if config_path else {}
    given = {k: _checked(k, v, source=flag_of(k)) for k, v in flags.items()}
    options = {**DEFAULTS, **environment, **from_file, **given}
    levels = [(ENVIRONMENT, environment), (config_path or "", from_file), (COMMAND_LINE, flags)]
    options["place_from"] = _one_place_to_run(options, levels)
    return options


COMMAND_LINE = "the command line"


PLACES = ("scheduler_file", "scheduler", "workers")


def _one_place_to_run(options: dict[str, Any], levels: list[tuple[str, Mapping[str, Any]]]) -> str | None:
    """Where to run: the highest of ``levels`` (``DASK_SCHEDULER_ADDRESS``, the config file, the
    flags) that names a place decides, and the places below it are dropped, as for any option (a
    ``--workers`` flag runs a job whose config file names a scheduler on a LocalCluster). Two places
    in one level are a usage error. Gives the level that decided (``ENVIRONMENT``, the config file,
    or ``COMMAND_LINE``), or None where none names a place."""
    for source, level in reversed(levels):
        given = [name for name in PLACES if name in level]
        if len(given) > 1:
            where = "" if source == COMMAND_LINE else f" (in {source})"
            both = f"{flag_of(given[0])} and {flag_of(given[1])}"
            raise UsageError(f"{both} both say where to run{where}: give one")
        if given:
            for name in set(PLACES) - {given[0]}:
                options.pop(name, None)
            return source
    return None


def flag_of(name: str) -> str:
    flags = {"inputs": "INPUT", "special_tokens": "--special-token", "tokenizers": "--tokenizer"}
    return flags.get(name, "--" + name.replace("_", "-"))


def _checked(name: str, value: Any, source: str) -> Any:
    """``value`` in the type the jobs take; a mistake names where it came from (a flag, or a file and key)."""
    try:
        return OPTIONS[name](value)
    except BpeDaskError as error:
        raise UsageError(f"{source}: {error}") from None
