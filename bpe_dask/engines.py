"""Which engine does a task: the compiled core (numba) or the readable Python path.

Takes the engine asked for (``auto``, ``python`` or ``numba``), how much work there is and the
threshold of that task, and whether the split pattern is a built-in one; gives whether the compiled
core runs it. ``auto`` takes the compiled core from the threshold up (below it, loading compiled
code costs more than it saves) and wherever it can; the Python path stays the reference the tests
hold the compiled core to. Counting, encoding and the merge loop each choose here, with their own
threshold.

>>> use_compiled("auto", 10, threshold=100), use_compiled("auto", 1000, threshold=100)
(False, True)
>>> use_compiled("auto", 1000, threshold=100, builtin_pattern=False)
False
>>> use_compiled("numba", 1, threshold=100, builtin_pattern=False)
Traceback (most recent call last):
bpe_dask.errors.BpeDaskError: the numba engine works with the built-in patterns only (pattern= names one): ...
"""

from __future__ import annotations

from bpe_dask.errors import BpeDaskError

ENGINES = ("auto", "python", "numba")


def check_engine(engine: str) -> str:
    """``engine``, if it is one of ``ENGINES``."""
    if engine not in ENGINES:
        raise BpeDaskError(f"engine must be auto, python or numba, got {engine!r}")
    return engine


def check_engine_supports(engine: str, builtin_pattern: bool, pattern: str = "") -> None:
    """Refuse ``engine="numba"`` with a pattern of one's own (``pattern``, named in the error): the
    compiled core scans only the built-in ones. Any other engine runs any pattern.

    >>> check_engine_supports("auto", builtin_pattern=False)
    >>> check_engine_supports("numba", False, "[a-z]+")
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: the numba engine works with the built-in patterns only ..., not [a-z]+: ...
    """
    if check_engine(engine) == "numba" and not builtin_pattern:
        which = f", not {pattern}" if pattern else ""
        raise BpeDaskError(
            f"the numba engine works with the built-in patterns only (pattern= names one){which}: use "
            "engine auto or python"
        )


def use_compiled(engine: str, size: int, threshold: int, *, builtin_pattern: bool = True) -> bool:
    """Whether the compiled core does a task of ``size`` (bytes, characters or words) under
    ``engine``: always for ``numba``, never for ``python``, from ``threshold`` up for ``auto``."""
    check_engine_supports(engine, builtin_pattern)
    if engine == "python" or not builtin_pattern:
        return False
    return engine == "numba" or size >= threshold
