"""The doctests run in a fresh directory each: the package's examples write files where they stand."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _doctests_in_their_own_directory(request: pytest.FixtureRequest) -> None:
    if isinstance(request.node, pytest.DoctestItem):
        request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
