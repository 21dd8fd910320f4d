"""The package's shape: small modules, data flowing one way (no import cycles), one home per rule."""

from __future__ import annotations

import ast
from pathlib import Path

import bpe_dask

PACKAGE = Path(bpe_dask.__file__).parent
MODULES = {path.stem: path for path in PACKAGE.glob("*.py")}


def imports_of(path: Path) -> set[str]:
    """The package's own modules that ``path`` imports (``from . import x`` counts as ``x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [alias.name for alias in node.names]
            found.update(name for name in names if name in MODULES)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
            found.update("__init__" for alias in node.names if alias.name not in MODULES)
    return found


def test_no_module_is_long():
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    assert max(lengths.values()) <= 400, sorted(lengths.items(), key=lambda item: -item[1])[:3]


def test_no_import_cycles():
    graph = {name: imports_of(path) for name, path in MODULES.items()}
    visiting, done = set(), set()

    def visit(name: str, trail: list[str]) -> None:
        assert name not in visiting, " -> ".join([*trail, name])
        if name in done:
            return
        visiting.add(name)
        for child in sorted(graph[name]):
            visit(child, [*trail, name])
        visiting.remove(name)
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_module_names_do_not_clash_with_the_public_api():
    public = set(bpe_dask.__all__)
    assert not public & set(MODULES), public & set(MODULES)
    for name in public:
        assert not isinstance(getattr(bpe_dask, name), type(bpe_dask)), (
            name
        )  # a function or class, not a module


def test_the_split_pattern_and_the_cut_rule_are_defined_once():
    sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
    # The text rules' home is two modules: the patterns with their cut rules, and what applies them.
    assert [name for name, text in sources.items() if r"\p{L}+| ?\p{N}+" in text] == ["patterns"]
    compiling = sorted(name for name, text in sources.items() if "regex.compile(" in text)
    assert compiling == ["patterns", "pretokenize"]
