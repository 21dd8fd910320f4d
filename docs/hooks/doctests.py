"""Griffe extension (mkdocstrings): a docstring's ``>>>`` examples shown as Python sessions.

Takes each object's docstring as griffe reads it; gives it with every run of doctest lines (a ``>>>``
line, its ``...`` continuations and its output, up to a blank line) in a ``pycon`` fence. Promises
nothing else changes: the docstrings are plain text with ``code``, which Markdown renders as it is,
but a ``>>>`` line would be read as three nested quotes.
"""

from __future__ import annotations

from typing import Any

import griffe


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)


def fence_doctests(text: str) -> str:
    """``text`` with each run of lines that starts with a ``>>>`` line at the margin, up to the next
    blank line, between a ```pycon fence and a closing one (tests/test_docs.py looks at the result
    on the built API page)."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if not inside and line.startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)
