"""The documentation's promises: an example (``>>>``, run as a doctest) for every public name, the
doctests run by the plain test command, and every pointer into docs/exactness.md lands on a heading."""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from pathlib import Path

import bpe_dask
from bpe_dask import Tokenizer

ROOT = Path(bpe_dask.__file__).parent.parent
RULES = sorted(path.stem for path in (ROOT / "bpe_dask" / "rules").glob("*.py") if path.stem != "__init__")


def has_example(thing: object) -> bool:
    return ">>>" in (inspect.getdoc(thing) or "")


def test_every_public_name_of_the_package_has_an_example():
    public = [getattr(bpe_dask, name) for name in bpe_dask.__all__]
    named = [t for t in public if inspect.isclass(t) or inspect.isfunction(t)]
    missing = [t.__name__ for t in named if not has_example(t)]
    assert not missing, missing


def test_every_public_function_and_class_of_the_rules_has_an_example():
    missing = []
    for module_name in RULES:
        module = importlib.import_module(f"bpe_dask.rules.{module_name}")
        for name, thing in vars(module).items():
            defined_here = getattr(thing, "__module__", None) == module.__name__
            named = inspect.isclass(thing) or inspect.isfunction(thing)
            if defined_here and named and not name.startswith("_"):
                missing += [] if has_example(thing) else [f"{module_name}.{name}"]
    assert not missing, missing


def test_every_public_method_of_the_tokenizer_has_an_example():
    methods = [name for name, _ in inspect.getmembers(Tokenizer, callable) if not name.startswith("_")]
    assert {"encode", "decode", "encode_batch", "encode_iterable", "save", "load"} <= set(methods)
    missing = [name for name in methods if not has_example(getattr(Tokenizer, name))]
    assert not missing, missing


def test_the_test_command_runs_the_doctests():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--doctest-modules" in options["addopts"].split() and "bpe_dask" in options["testpaths"]


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_pointer_into_exactness_lands_on_a_heading():
    doc = (ROOT / "docs" / "exactness.md").read_text(encoding="utf-8")
    anchors = {anchor(line.lstrip("#")) for line in doc.splitlines() if line.startswith("#")}
    sources = [*(ROOT / "bpe_dask").rglob("*.py"), ROOT / "docs" / "exactness.md", ROOT / "README.md"]
    pointers = {
        (path.name, target)
        for path in sources
        for target in re.findall(r"exactness\.md#([\w-]+)", path.read_text(encoding="utf-8"))
    }
    pointers |= {("exactness.md", target) for target in re.findall(r"\]\(#([\w-]+)\)", doc)}
    assert len(pointers) > 10
    assert not [p for p in pointers if p[1] not in anchors], sorted(anchors)


def test_the_readmes_python_examples_import_only_what_the_readme_installs():
    """The quick start installs the core dependencies; an example that needs more (tiktoken, Hugging
    Face ``tokenizers``) must come after the line that says how to install them, the ``interop`` extra."""
    import sys

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module = lambda requirement: re.split(r"[<>=\[ ]", requirement)[0].replace("-", "_")  # noqa: E731
    core = {module(r) for r in project["dependencies"]} | {"bpe_dask"}
    interop = {module(r) for r in project["optional-dependencies"]["interop"]}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"([^\n]*\n\n)?```python\n(.*?)```", readme, flags=re.S)
    assert len(blocks) >= 4
    extra_blocks = 0
    for before, block in blocks:
        imported = set(re.findall(r"^(?:from|import) (\w+)", block, flags=re.M))
        imported |= {m for line in re.findall(r"^import (.*)$", block, flags=re.M)
                     for m in re.findall(r"(?:^|, )(\w+)", line)}  # fmt: skip
        imported -= set(sys.stdlib_module_names)
        assert imported <= core | interop, imported - core - interop
        if imported & interop:
            extra_blocks += 1
            assert ".[interop]" in before, before  # said just before the example
    assert extra_blocks >= 1
