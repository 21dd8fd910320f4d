"""numba's cache as a process sees it: every compiled function of the package, and which of them this
process compiled and which it loaded from the cache.

Takes nothing; gives ``functions()`` (each compiled function Python calls, the counting and
encoding loops of each pattern included) and ``cache_use()``: numba's own count of cache misses
(compiled here) and hits (machine code loaded instead), and where the cache is. numba keeps a
function's machine code under ``NUMBA_CACHE_DIR`` if set (in a folder named after the source's
folder and a hash of its path), else in ``__pycache__`` beside the source; an entry serves a
process with the same source (path and content), numba and Python versions, and CPU (name and
features: ``NUMBA_CPU_NAME=generic`` makes code for any CPU of the architecture). numba stamps an
entry with its own file's content alone, though the loops inline functions of the package's other
files (numba issue 1833): here every file of the package is stamped with all of them
(``stamp_with_the_package``), so that a change anywhere in it is never answered with old code.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pkgutil
import platform
import sys
from dataclasses import dataclass
from typing import Any

import numba
from llvmlite import binding
from numba.core import caching
from numba.core.registry import CPUDispatcher

HERE = os.path.dirname(os.path.abspath(__file__))


def stamp_with_the_package() -> None:
    """Put before each of numba's cache locators that stamp a function with its source file a copy
    that, for a function of this package, adds a digest of every file of the package to the stamp:
    an entry is then fresh only while none of them has changed. Run once, before any function of
    the package is compiled (its ``__init__`` imports this module first)."""
    files = sorted(name for name in os.listdir(HERE) if name.endswith(".py"))
    digest = hashlib.sha256()
    for name in files:
        with open(os.path.join(HERE, name), "rb") as source:
            digest.update(name.encode() + b"\0" + source.read())
    package = digest.hexdigest()

    class PackageStamped:
        def get_source_stamp(self) -> tuple:
            return super().get_source_stamp(), package

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if os.path.dirname(os.path.abspath(py_file)) != HERE:
                return None  # another package's function: numba's own locators take it
            return super().from_function(py_func, py_file)

    locators = caching.CacheImpl._locator_classes
    stamped = [
        type(f"PackageStamped{locator.__name__}", (PackageStamped, locator), {})
        for locator in locators
        if issubclass(locator, caching._SourceFileBackedLocatorMixin)
    ]
    locators[:0] = stamped


stamp_with_the_package()


def functions() -> dict[str, Any]:
    """Every compiled function of ``bpe_dask.compiled`` that Python can call, by name (those it
    inlines are compiled into their callers), the loops of each built-in pattern as
    ``count[N]`` and ``encode[N]``."""
    from bpe_dask.compiled.count import COUNT_LOOPS
    from bpe_dask.compiled.encode import ENCODE_LOOPS

    found = {}
    for module in pkgutil.iter_modules([os.path.dirname(__file__)], "bpe_dask.compiled."):  # this folder
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, CPUDispatcher):
                found[f"{value.py_func.__module__}.{value.py_func.__name__}"] = value
    for task, loops in (("count", COUNT_LOOPS), ("encode", ENCODE_LOOPS)):
        for number, loop in loops.items():
            found[f"{task}[{number}]"] = loop
    return found


@dataclass
class CacheUse:
    """What numba did in this process: the functions it compiled (and saved to its cache) and those
    it loaded from the cache, in how long, and where the cache is (``NUMBA_CACHE_DIR``, or the
    ``__pycache__`` beside the code, which then holds it)."""

    compiled: list[str]
    loaded: list[str]
    folder: str
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """What a person building a worker image needs to know, in two lines."""
        chosen = os.environ.get("NUMBA_CACHE_DIR")
        if chosen and self.folder.startswith(os.path.abspath(chosen)):
            where = f"{chosen} (NUMBA_CACHE_DIR)"
        elif chosen:  # numba passes over a folder it cannot write to, to the next place it knows
            where = f"{self.folder}, not NUMBA_CACHE_DIR={chosen}, which numba cannot write to"
        else:
            where = f"{self.folder} (NUMBA_CACHE_DIR puts it elsewhere)"
        # What else an entry must match to serve a process, as numba keys it.
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        cpu = numba.config.CPU_NAME or binding.get_host_cpu_name()
        python = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return [
            f"compiled {len(self.compiled)} functions and loaded {len(self.loaded)} from numba's cache in "
            f"{self.seconds:.1f} s; the cache is {where}",
            f"it serves processes with the same NUMBA_CACHE_DIR and bpe_dask at {package} (the same code), "
            f"numba {numba.__version__}, Python {python} and CPU ({cpu}; or NUMBA_CPU_NAME=generic on both "
            f"sides, for any {platform.machine()} CPU)",
        ]


def cache_use(seconds: float = 0.0) -> CacheUse:
    """numba's own account (each function's ``stats.cache_misses`` and ``cache_hits``) of the
    package's compiled functions in this process so far."""
    compiled, loaded, folder = [], [], ""
    for name, function in sorted(functions().items()):
        if sum(function.stats.cache_misses.values()):
            compiled.append(name)
        elif sum(function.stats.cache_hits.values()):
            loaded.append(name)
        cache = getattr(function, "_cache", None)  # numba's FunctionCache: where this function's entries go
        folder = folder or getattr(cache, "cache_path", "")
    return CacheUse(compiled, loaded, folder, seconds)


def cached_versions(function: Any) -> list[tuple]:
    """The argument types of each version of ``function`` (a numba dispatcher) whose machine code
    numba's cache holds for this machine and this source: the versions a call would load, not compile.
    Read from numba's index of the function's entries, without loading or compiling anything."""
    entries = getattr(getattr(function, "_cache", None), "_cache_file", None)  # numba's NullCache: none
    if entries is None:
        return []
    machine = function.targetctx.codegen().magic_tuple()  # numba's key: the target, CPU name and features
    try:
        return [key[0] for key in entries._load_index() if key[1] == machine]
    except Exception:  # an index numba could not read either: it compiles
        return []
