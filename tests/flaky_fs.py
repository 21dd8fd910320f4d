"""A local filesystem whose reads fail once per file inside Dask workers: fault injection for
what a real process cannot do on cue (a dropped connection, a throttled store).

Registered as the ``flaky://`` protocol in whichever process calls ``register``. The first
open of each file in a worker raises, and leaves a marker file beside it so that every
process sees that the failure has happened.
"""

from __future__ import annotations

import fsspec
from fsspec.implementations.local import LocalFileSystem


class NamedLocalFileSystem(LocalFileSystem):
    """The local filesystem under a protocol of its own (``protocol``): what a test filesystem that
    misbehaves on cue is built on."""

    protocol = ("local-named",)
    root_marker = "/"

    @classmethod
    def _strip_protocol(cls, path):
        path = path.removeprefix(f"{cls.protocol[0]}://") if isinstance(path, str) else path
        return super()._strip_protocol(path)

    def unstrip_protocol(self, name: str) -> str:
        return f"{self.protocol[0]}://" + self._strip_protocol(name)


class FlakyFileSystem(NamedLocalFileSystem):
    protocol = ("flaky",)

    def _open(self, path, mode="rb", **kwargs):
        if "r" in mode and in_a_worker() and not path.endswith(".failed-once"):
            marker = path + ".failed-once"
            if not super().exists(marker):
                super().touch(marker)
                raise ConnectionResetError(f"injected failure reading {path}")
        return super()._open(path, mode, **kwargs)


def in_a_worker() -> bool:
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return False
    return True


def register() -> None:
    fsspec.register_implementation("flaky", FlakyFileSystem, clobber=True)
