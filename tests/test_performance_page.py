"""docs/performance.md's promises, held without running a benchmark: every table says when and where it
was measured and comes with the commands that measure it again, each naming a script of benchmarks/ and
options that script's own argparse takes; the training and merge tables have the columns `bench.py
--markdown` prints; every figure the README gives in its Performance section, or beside a link to the
page, is one the page gives; and the lab notebook the page replaced is named only as git history."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

import bpe_dask

ROOT = Path(bpe_dask.__file__).parent.parent
PAGE = ROOT / "docs" / "performance.md"
SCRIPTS = ROOT / "benchmarks"
NOTEBOOK = "BENCHMARKS" + ".md"  # spelt so that this file does not name it


def script(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module (they are scripts, not a package; importing one runs nothing)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and the like look their module up
    sys.path.insert(0, str(SCRIPTS))  # as when run: make_corpus.py imports benchmarks/synth
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for each heading of a Markdown page, at any level."""
    parts = re.split(r"^(#+ .*)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def reproduce_commands(body: str) -> list[str]:
    """The command lines of the ```bash blocks that a paragraph starting "Reproduce" introduces."""
    blocks = re.findall(r"^Reproduce(?:[^\n]|\n(?!\n))*\n\n```bash\n(.*?)```", body, flags=re.M | re.S)
    lines = [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_every_table_has_its_machine_its_date_and_a_command_that_measures_it_again():
    tables = 0
    for heading, body in sections(PAGE.read_text(encoding="utf-8")):
        if not re.search(r"^\|( --- \|)+$", body, flags=re.M):
            continue
        tables += 1
        measured = re.search(r"^Measured (\d{4}-\d\d-\d\d)[^\n]*", body, flags=re.M)
        assert measured, f"{heading}: no 'Measured YYYY-MM-DD on ...' line"
        assert re.search(r"2-core|\d+ cores", measured.group(0)), f"{heading}: the machine is not named"
        assert reproduce_commands(body), f"{heading}: no Reproduce block"
    assert tables >= 12


def test_every_command_on_the_page_names_a_script_and_options_it_takes():
    parsers = {name: script(name).build_parser() for name in ("bench", "make_corpus", "cores", "count_floor")}
    text = PAGE.read_text(encoding="utf-8")
    commands = [c for _, body in sections(text) for c in reproduce_commands(body)]
    assert len(commands) >= 20
    for command in commands:
        python, path, *argv = shlex.split(command)
        name = re.fullmatch(r"benchmarks/(\w+)\.py", path)
        assert python == "python" and name and name.group(1) in parsers, command
        refused = io.StringIO()
        with contextlib.redirect_stderr(refused), contextlib.suppress(SystemExit):
            parsers[name.group(1)].parse_args(argv)
            continue
        pytest.fail(f"{command}: {refused.getvalue().strip().splitlines()[-1]}")


def test_every_block_of_the_page_is_the_set_up_or_a_command_checked_here():
    """tests/test_examples.py runs no block of this page (benchmarks take minutes to hours): each is
    either the one set-up line, whose extra the package has, or a Reproduce block checked above."""
    text = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```\w*\n(.*?)^```\n", text, flags=re.M | re.S)
    checked = "".join(c + "\n" for _, body in sections(text) for c in reproduce_commands(body))
    setup = "python3 -m venv .venv && .venv/bin/pip install -e '.[bench]' && . .venv/bin/activate\n"
    assert blocks.count(setup) == 1
    assert "bench" in (importlib.metadata.metadata("bpe-dask").get_all("Provides-Extra") or [])
    for block in blocks:
        lines = [line.strip() for line in block.replace("\\\n", " ").splitlines()]
        commands = [line for line in lines if line and not line.startswith("#")]
        assert block == setup or all(line + "\n" in checked for line in commands), block


def test_the_training_and_merge_tables_have_the_columns_bench_markdown_prints():
    page = script("page")
    text = PAGE.read_text(encoding="utf-8")
    assert page.header(page.peers_header(32000, 2)) in text
    assert page.header(page.merge_header(32000)) in text


FIGURE = re.compile(
    r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)(?:-(\d[\d,]*(?:\.\d+)?))? ?(MB/s|MiB/s|GiB|s|x)?(?!\w)|merge (\d[\d,]*)"
)


def figures(text: str) -> list[tuple[str, str]]:
    """(value, unit) of each figure of ``text``: times, ratios, rates, peaks in GiB and where merges
    differ. Code spans, link targets and version numbers are not figures; nor integers with no unit."""
    text = re.sub(r"`[^`]*`|\]\([^)]*\)|\d+(?:\.\d+){2,}", " ", text)
    found = []
    for low, high, unit, merge in FIGURE.findall(text):
        if merge:
            found.append((merge.replace(",", ""), "merge"))
        for value in (low, high):
            if value and (unit or "." in value):
                found.append((value.replace(",", ""), unit))
    return found


def agrees(figure: tuple[str, str], page: list[tuple[str, str]]) -> bool:
    """The page gives this figure, or one that rounds to it (the README may round: 0.049 s is 0.05 s)."""
    value, unit = figure
    places = len(value.partition(".")[2])
    return any(u == unit and round(float(v), places) == float(value) for v, u in page)


def blocks_pointing_at_the_page(text: str) -> list[str]:
    """The paragraphs and list items of a Markdown text that link to docs/performance.md."""
    items = [item for block in text.split("\n\n") for item in re.split(r"\n(?=- )", block)]
    return [item for item in items if "performance.md" in item]


def test_every_figure_the_readme_gives_of_performance_is_on_the_page():
    page = figures(PAGE.read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    quoted = [section, *blocks_pointing_at_the_page(readme.replace(section, ""))]
    for doc in (ROOT / "docs").glob("*.md"):
        if doc != PAGE:
            quoted += blocks_pointing_at_the_page(doc.read_text(encoding="utf-8"))
    given = [figure for block in quoted for figure in figures(block)]
    assert len(given) >= 20
    assert not [figure for figure in given if not agrees(figure, page)]


def test_the_lab_notebook_is_gone_and_named_only_as_git_history():
    assert not (ROOT / NOTEBOOK).exists()
    files = [ROOT / "README.md", ROOT / "pyproject.toml", *(ROOT / "docs").glob("*.md")]
    for folder in ("bpe_dask", "benchmarks", "tests", "jobs", "configs"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".toml")]
    for path in files:
        text = path.read_text(encoding="utf-8")
        in_git = len(re.findall(rf"`git [^`]*{re.escape(NOTEBOOK)}[^`]*`", text))
        assert text.count(NOTEBOOK) == in_git, f"{path.relative_to(ROOT)} names {NOTEBOOK} as a file"


def test_every_pointer_into_the_page_lands_on_a_heading():
    headings = [h.lstrip("#").strip().lower() for h, _ in sections(PAGE.read_text(encoding="utf-8"))]
    anchors = {re.sub(r"[^\w\- ]", "", h).replace(" ", "-") for h in headings}  # GitHub's
    texts = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    found = (re.findall(r"performance\.md#([\w-]+)", t.read_text(encoding="utf-8")) for t in texts)
    pointers = [p for ps in found for p in ps]
    assert len(pointers) >= 3
    assert set(pointers) <= anchors, set(pointers) - anchors
