"""The documentation's pages and their examples, as the tests read them: README.md, then the site's
pages (docs/) in the order of mkdocs.yml's nav, each a list of fenced blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
# The languages a fenced block may have: examples (run), and what is not an example (output, a
# synopsis, a picture, a config file, an image recipe). A block fenced `sh` or `py` would dodge
# the runner, so it is refused here.
EXAMPLES = ("bash", "python")
NOT_EXAMPLES = ("text", "", "yaml", "dockerfile", "pycon")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\n$")


@dataclass
class Block:
    page: str  # README.md, or a path under docs/
    language: str
    code: str
    line: int  # of its opening fence, counted from 1
    not_run: str | None  # why, when a `<!-- not run: why -->` line comes just before it
    output: str | None  # the ```text block right after it: what it prints
    end: int  # where it ends in the page's text

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def nav_pages() -> list[str]:
    """The site's pages in the nav's order (paths under docs/)."""
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_IgnoreTags)

    def walk(items: list) -> list[str]:
        found = []
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            found += walk(value) if isinstance(value, list) else [value]
        return found

    return walk(config["nav"])


def pages() -> list[str]:
    """README.md, then every page of the site in the nav's order."""
    return ["README.md", *nav_pages()]


def path_of(page: str) -> Path:
    return REPO / page if page == "README.md" else DOCS / page


def blocks(page: str) -> list[Block]:
    """The fenced blocks of a page, each with its marker and its output block."""
    text = path_of(page).read_text(encoding="utf-8")
    found: list[Block] = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```\n", text, flags=re.M | re.S):
        language, code = match.group(1), match.group(2)
        assert language in EXAMPLES + NOT_EXAMPLES, f"{page}: a block fenced ```{language}"
        before = text[: match.start()]
        line = before.count("\n") + 1
        marker = NOT_RUN.search(before)
        if language == "text" and found and not text[found[-1].end : match.start()].strip():
            found[-1].output = code
        why = marker.group(1) if marker else None
        found.append(Block(page, language, code, line, why, None, match.end()))
    return found


def examples(page: str) -> list[Block]:
    return [b for b in blocks(page) if b.language in EXAMPLES]


class _IgnoreTags(yaml.SafeLoader):
    """mkdocs.yml may hold tags (!!python/name:...) that only MkDocs resolves."""


_IgnoreTags.add_multi_constructor("", lambda loader, suffix, node: None)
