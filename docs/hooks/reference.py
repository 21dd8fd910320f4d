"""MkDocs hook: the reference pages' generated parts, made from the code at build time.

Takes a page's Markdown; gives it with ``<!-- generated: command line -->`` replaced by every command
and option of ``bpe_dask.cli.parser.build_parser()``, and ``<!-- generated: settings -->`` by the
table of ``bpe_dask.settings.DEFAULTS``. Promises: an option or setting added to the code appears in
the docs by itself, and one removed leaves them.
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from pathlib import Path
from typing import Any

CLI_MARKER = "<!-- generated: command line -->"
SETTINGS_MARKER = "<!-- generated: settings -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, command_line())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings())
    return markdown


def command_line() -> str:
    """Each command of the parser: its description, usage, and each option with what it does."""
    from bpe_dask.cli.parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = []
    for name, command in commands.choices.items():
        parts.append(f"## `bpe-dask {name}`\n\n{command.description}\n")
        usage = command.format_usage().removeprefix("usage: ").strip()
        parts.append(f"```text\n{usage}\n```\n")
        for group in command._action_groups:
            actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
            if actions:
                parts.append(f"**{group.title.capitalize()}**\n")
                parts.append("\n".join(f"- {option(a)}" for a in actions) + "\n")
    version = "`bpe-dask --version` prints the version; `bpe-dask COMMAND --help`, a command's options.\n"
    return "\n".join([*parts, version])


def option(action: argparse.Action) -> str:
    """One option as a list item: its names and value, then its help."""
    if action.option_strings:
        value = "" if action.nargs == 0 else " " + (action.metavar or "{" + ",".join(action.choices) + "}")
        names = ", ".join(f"`{name}{value}`" for name in action.option_strings)
    else:
        names = f"`{action.metavar}`"
    return f"{names}: {action.help}"


def settings() -> str:
    """The settings' table: each one's name, default and what it does (the comment beside it)."""
    from bpe_dask import settings as module

    source = Path(module.__file__).read_text(encoding="utf-8")
    comments = _comments_of_defaults(source)
    rows = ["| setting | default | what it does |", "| --- | --- | --- |"]
    for name, default in module.DEFAULTS.items():
        rows.append(f"| `bpe-dask.{name}` | `{default}` | {comments[name]} |")
    return "\n".join(rows) + "\n"


def _comments_of_defaults(source: str) -> dict[str, str]:
    """Each key of the ``DEFAULTS`` literal and the comment that follows it (and its continuation
    lines: comments alone on the lines after, before the next key)."""
    tree = ast.parse(source)
    literal = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "DEFAULTS"
    )
    assert isinstance(literal, ast.Dict)
    lines_of = {key.lineno: key.value for key in literal.keys if isinstance(key, ast.Constant)}
    comments: dict[str, list[str]] = {}
    current = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        row = token.start[0]
        if not literal.lineno <= row <= literal.end_lineno:
            continue
        current = lines_of.get(row, current)
        if token.type == tokenize.COMMENT and current is not None:
            comments.setdefault(current, []).append(token.string.removeprefix("#").strip())
    missing = set(lines_of.values()) - set(comments)
    assert not missing, f"settings without a comment to document them: {sorted(missing)}"
    return {name: " ".join(parts) for name, parts in comments.items()}
