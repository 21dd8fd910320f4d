"""The suite's waits (``tests/timing.py``): one setting scales them, a busy machine doubles them, and a
wait on a condition returns as soon as it holds."""

from __future__ import annotations

import os
import time

import pytest
import timing


def test_the_setting_scales_every_timeout_and_load_doubles_it_or_more(monkeypatch):
    def load(average: float) -> None:
        monkeypatch.setattr(os, "getloadavg", lambda: (average, 0.0, 0.0))

    load(0.0)
    monkeypatch.delenv(timing.VARIABLE, raising=False)
    assert timing.seconds(30) == 30
    monkeypatch.setenv(timing.VARIABLE, "2.5")
    assert timing.seconds(30) == 75 and timing.dask_seconds(30) == "75s"
    load(timing.cores())  # busy, but each process has its core
    assert timing.seconds(30) == 75
    load(timing.cores() + 0.5)
    assert timing.seconds(30) == 150
    load(timing.cores() * 5)  # a fifth of a core each: five times as long
    assert timing.seconds(30) == 375


@pytest.mark.parametrize("given", ["0", "-1", "lots"])
def test_a_setting_that_is_no_positive_number_is_refused_by_name(monkeypatch, given):
    monkeypatch.setenv(timing.VARIABLE, given)
    with pytest.raises(ValueError, match=f"{timing.VARIABLE}='{given}': give a positive number"):
        timing.seconds(1)


def test_a_wait_returns_what_the_condition_gave_or_says_what_it_awaited(monkeypatch):
    monkeypatch.setenv(timing.VARIABLE, "1")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    ready = time.monotonic() + 0.2
    assert timing.wait_until(lambda: time.monotonic() > ready and "ready", 60, "the moment") == "ready"
    gave_up = rf"still waiting for nothing after 0.1 s \(more time: {timing.VARIABLE}"
    with pytest.raises(TimeoutError, match=gave_up):
        timing.wait_until(lambda: None, 0.1, "nothing")
