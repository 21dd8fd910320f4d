"""What every test process shares: its own numba cache under pytest-xdist, and doctests in a fresh
directory each (the package's examples write files where they stand)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The test command runs two pytest processes (pytest-xdist), each of which compiles numba code for
# the patterns and array types its tests use. numba's cache is not safe for processes that compile
# different versions of one function into it at once: each picks the first free file number for its
# version, and one can end up indexed under the other's machine code (seen: "NRT_adapt_ndarray_to_
# python: 'descr' is NULL" in a gpt4 encode). So each pytest process, and the clusters and commands it
# starts, has a cache of its own, set before anything imports numba. Tests that need a cold or a
# particular cache set NUMBA_CACHE_DIR themselves.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parent / ".numba-cache" / _WORKER)


@pytest.fixture(autouse=True)
def _doctests_in_their_own_directory(request: pytest.FixtureRequest) -> None:
    if isinstance(request.node, pytest.DoctestItem):
        request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
