"""The documentation's promises: an example (``>>>``, run as a doctest) for every public name, the
doctests run by the plain test command, every pointer into docs/exactness.md lands on a heading, and
the site (mkdocs.yml, docs/) builds in strict mode, offline, with every command, option, setting and
public name in its reference. (Every example of its pages runs in tests/test_examples.py.)"""

from __future__ import annotations

import argparse
import html
import importlib
import inspect
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pages
import pytest

import bpe_dask
from bpe_dask import Tokenizer
from bpe_dask.cli.parser import build_parser
from bpe_dask.settings import DEFAULTS

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
    sources = [*(ROOT / "bpe_dask").rglob("*.py"), *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    pointers = {
        (path.name, target)
        for path in sources
        for target in re.findall(r"exactness\.md#([\w-]+)", path.read_text(encoding="utf-8"))
    }
    pointers |= {("exactness.md", target) for target in re.findall(r"\]\(#([\w-]+)\)", doc)}
    assert len(pointers) > 10
    assert not [p for p in pointers if p[1] not in anchors], sorted(anchors)


def test_the_python_examples_import_only_what_the_quick_start_installs():
    """The quick start installs the core dependencies; an example that needs more (tiktoken, Hugging
    Face ``tokenizers``) must come after the line that says how to install them, the ``interop`` extra."""
    import sys

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module = lambda requirement: re.split(r"[<>=\[ ]", requirement)[0].replace("-", "_")  # noqa: E731
    core = {module(r) for r in project["dependencies"]} | {"bpe_dask"}
    interop = {module(r) for r in project["optional-dependencies"]["interop"]}
    text = "\n".join(pages.path_of(page).read_text(encoding="utf-8") for page in pages.pages())
    blocks = re.findall(r"([^\n]*\n\n)?```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 10
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


# --- the site -------------------------------------------------------------------------------------

# Flags of other tools that the pages name (dask's, pip's, Python's file server's, the corpus maker's).
OTHER_FLAGS = {"--nworkers", "--nthreads", "--protocol", "--tls", "--tls-ca-file", "--tls-cert", "--tls-key",
               "--no-cache-dir", "--bind", "--directory", "--kind", "--size", "--seed",
               "--check"}  # fmt: skip


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def flags_of(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as CI builds it: strict (a warning, such as a broken link or anchor, fails it),
    and with every proxy pointing at a closed port, so that anything fetched from the network fails."""
    out = tmp_path_factory.mktemp("site")
    proxies = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")
    offline = dict.fromkeys(proxies, "http://127.0.0.1:9")
    env = {**os.environ, **offline, "NO_PROXY": "", "no_proxy": "", "NO_MKDOCS_2_WARNING": "1"}
    env["BPE_DASK_REPOSITORY"] = REPOSITORY
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return out


REPOSITORY = "https://git.example.org/bpe-dask"


def test_every_page_links_the_repository(site):
    for page in ("index.html", "guide/quickstart/index.html", "performance/index.html"):
        assert f'href="{REPOSITORY}"' in (site / page).read_text(encoding="utf-8"), page


def page_text(site: Path, page: str) -> str:
    """A built page's text, without its tags."""
    built = (site / page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", built))


def test_the_command_line_reference_has_every_command_and_option(site):
    text = page_text(site, "reference/cli.md")
    plain = lambda help: help.replace("`", "")  # noqa: E731  (`x` is code on the page)
    for name, command in commands().items():
        assert f"bpe-dask {name}" in text and plain(command.description) in text, name
        for action in command._actions:
            if not isinstance(action, argparse._HelpAction):
                assert plain(action.help) in text, (name, action.option_strings)


def test_the_settings_reference_has_every_setting_and_its_default(site):
    text = page_text(site, "reference/settings.md")
    for name, default in DEFAULTS.items():
        assert re.search(rf"bpe-dask\.{name}\s+{re.escape(str(default))}\s", text), name


def test_the_api_reference_has_every_public_name_and_shows_its_examples_as_code(site):
    written = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^::: bpe_dask\.(\w+)$", written, flags=re.M))
    assert listed == set(bpe_dask.__all__) - {"__version__"}
    built = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "<blockquote>" not in built  # a >>> line read as Markdown quotes
    assert built.count('<span class="gp">&gt;&gt;&gt; </span>') >= 30  # highlighted as a Python session


def test_every_page_is_in_the_nav_and_the_site():
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == set(pages.nav_pages())


def test_every_flag_the_pages_name_is_one_of_the_command_line():
    """A renamed or removed option leaves no page naming it (examples that run fail on their own;
    this holds the prose and the examples not run)."""
    ours = {flag for command in commands().values() for flag in flags_of(command)}
    named = set()
    for page in pages.pages():
        if page == "performance.md":  # benchmarks flags: test_performance_page checks them
            continue
        text = pages.path_of(page).read_text(encoding="utf-8")
        named |= set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", text))
    assert named - ours <= OTHER_FLAGS, sorted(named - ours - OTHER_FLAGS)
    assert len(named & ours) > 25


def test_the_api_references_signatures_are_formatted_one_parameter_a_line(site):
    """mkdocstrings printed each signature as one unformatted line: it formats them with ruff (or
    black), which the docs extra now installs."""
    import tomllib

    text = page_text(site, "reference/api.md")
    assert "train(\n    inputs: Any,\n    vocab_size: int,\n    out: PathLike," in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert any(requirement.startswith("ruff") for requirement in extras["docs"])
