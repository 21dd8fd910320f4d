"""The package's shape: folders that draw the pipeline, small modules, data flowing one way (each layer
imports only the layers below it, no import cycles), one home per rule, and no private names shared."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import bpe_dask

PACKAGE = Path(bpe_dask.__file__).parent
MODULES = {
    ".".join(path.relative_to(PACKAGE).with_suffix("").parts): path
    for path in PACKAGE.rglob("*.py")
    if "__pycache__" not in path.parts
}
# Lowest first: a module may import its own layer and those below, never one above.
LAYERS = [
    "base",
    "rules",
    "compiled",
    "io",
    "sources",
    "tokenizer",
    "stages",
    "cluster",
    "jobs",
    "cli",
    "package",
]
BASE = {"credentials", "engines", "errors", "interrupts", "settings", "version", "wording"}


def layer_of(module: str) -> str:
    if module in BASE:
        return "base"
    if module in ("__init__", "__main__"):
        return "package"
    return module.split(".")[0]


def imports_of(path: Path) -> set[str]:
    """The package's own modules that ``path`` imports (``from bpe_dask.io import plan`` counts as
    ``io.plan``; ``from bpe_dask import Tokenizer`` as the package itself)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bpe_dask":
            inner = node.module.removeprefix("bpe_dask").removeprefix(".")
            for alias in node.names:
                dotted = f"{inner}.{alias.name}".lstrip(".")
                found.add(dotted if dotted in MODULES else (inner or "__init__"))
        assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path}: relative import"
    found.discard("")
    return {name if name in MODULES else f"{name}.__init__" for name in found}


def test_every_module_is_in_its_layer():
    assert {layer_of(name) for name in MODULES} == set(LAYERS)


def test_a_job_reads_as_steps():
    """No function of ``jobs/`` is over 50 lines of code (its docstring aside): a job is named steps."""
    long = []
    for name, path in MODULES.items():
        if layer_of(name) != "jobs":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                if body and body[-1].end_lineno - body[0].lineno + 1 > 50:
                    long.append(f"{name}.{node.name}")
    assert not long, long


def test_ruff_lays_out_the_code():
    """``ruff format`` lays out the code: a handful of ``fmt: skip`` at most."""
    skips = {name: path.read_text(encoding="utf-8").count("# fmt: skip") for name, path in MODULES.items()}
    assert sum(skips.values()) < 10, {name: n for name, n in skips.items() if n}


def test_imports_go_down_the_layers():
    upward = []
    for name, path in MODULES.items():
        for imported in imports_of(path):
            if LAYERS.index(layer_of(imported)) > LAYERS.index(layer_of(name)):
                upward.append(f"{name} -> {imported}")
    assert not upward, upward


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


def test_no_private_name_is_imported_across_modules():
    shared = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bpe_dask"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.endswith("__")]
                shared += [f"{name}: {node.module}.{private_name}" for private_name in private]
    assert not shared, shared


def test_module_names_do_not_clash_with_the_public_api():
    public = set(bpe_dask.__all__)
    top = {name.split(".")[0] for name in MODULES}
    assert not public & top, public & top
    for name in public:
        assert not isinstance(getattr(bpe_dask, name), type(bpe_dask)), name  # a function or class


def test_the_split_pattern_and_the_cut_rule_are_defined_once():
    sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
    # The text rules' home is the patterns with their cut rules, and what applies them.
    assert [name for name, text in sources.items() if r"\p{L}+| ?\p{N}+" in text] == ["rules.patterns"]
    compiling = sorted(name for name, text in sources.items() if "regex.compile(" in text)
    assert compiling == ["rules.cuts", "rules.patterns", "rules.pretokenize"]


def test_the_architecture_pages_table_names_every_module_in_its_folder():
    """docs/architecture.md's "The modules" table lists the tree: each row's modules under the row's
    folder."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## The modules", 1)[1].split("\n## ", 1)[0]
    listed, folder = set(), None
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip()[1:-1].split("|")]
        if not row.startswith("|") or len(cells) != 3 or set(cells[1]) <= {"-"} or cells[0] == "folder":
            continue
        if cells[0]:
            folder = re.match(r"`(\w+)/`", cells[0]).group(1) if cells[0].startswith("`") else ""
        for name in re.findall(r"`(\w+)\.py`", cells[1] + " " + cells[2]):
            listed.add(f"{folder}.{name}" if folder else name)
    in_tree = {name for name in MODULES if not name.endswith(("__init__", "__main__")) and name != "version"}
    assert listed == in_tree, (sorted(in_tree - listed), sorted(listed - in_tree))
