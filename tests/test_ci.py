"""`.ci/run`, the project's CI: it fails when any step of the README's test command fails (install,
lint, format, tests), and then runs nothing more; it runs `.ci/loaded` only after they all pass.

The script runs for real, in a copy of `.ci/`, with stand-ins on PATH for the programs it calls
(`python3 -m venv` makes a `.venv/bin` whose `pip`, `ruff` and `python` log their call and fail
where the test says), so each step's failure is seen without installing anything.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import timing

REPO = Path(__file__).resolve().parent.parent
STEPS = ["pip install", "ruff check", "ruff format", "python -m"]  # as the stand-ins log them


def executable(path: Path, text: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def run_ci(tmp_path: Path, failing: str | None) -> tuple[int, list[str]]:
    clone = tmp_path / "clone"
    shutil.copytree(REPO / ".ci", clone / ".ci")
    log = tmp_path / "calls"
    executable(clone / ".ci" / "loaded", f'echo loaded >> "{log}"\n')
    stand_in = f'echo "$(basename "$0") $1" >> "{log}"; [ "$(basename "$0") $1" != "{failing}" ]\n'
    made = tmp_path / "venv-bin"
    made.mkdir()
    for name in ("pip", "ruff", "python"):
        executable(made / name, stand_in)
    tools = tmp_path / "tools"
    tools.mkdir()
    venv = f'[ "$1 $2 $3" = "-m venv .venv" ] && mkdir -p .venv && cp -r "{made}" .venv/bin\n'
    executable(tools / "python3", venv)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(clone / ".ci" / "run")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timing.seconds(60))  # fmt: skip
    calls = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return done.returncode, calls


@pytest.mark.parametrize("failing", STEPS)
def test_a_failing_step_fails_ci_and_nothing_runs_after_it(tmp_path, failing):
    returncode, calls = run_ci(tmp_path, failing)
    assert returncode != 0, calls
    assert calls == STEPS[: STEPS.index(failing) + 1]


def test_when_every_step_passes_the_load_sensitive_tests_run(tmp_path):
    returncode, calls = run_ci(tmp_path, None)
    assert returncode == 0
    assert calls == [*STEPS, "loaded"]


def test_every_test_the_loaded_run_names_exists():
    """.ci/loaded named a test that was renamed away: pytest ran nothing and exited 5, failing CI
    after the whole suite had passed."""
    import re

    loaded = (REPO / ".ci" / "loaded").read_text(encoding="utf-8")
    files = {"$I": "tests/test_interrupts.py"}
    named = re.findall(r'"(\$I|tests/[\w/]+\.py)::(\w+)', loaded)
    assert len(named) > 5
    for file, test in named:
        text = (REPO / files.get(file, file)).read_text(encoding="utf-8")
        assert f"def {test}(" in text, (file, test)
