"""Storage: URLs in, fsspec filesystems out, through the job's ``Store``.

The one place that decides how a URL is opened. A ``Store`` is a job's context: built once on the
client (``Store.for_job``) and handed to every task, it holds the storage options (which go to
remote filesystems only: a local path ignores them; the endpoint of the AWS environment, and its
credentials when asked to ship them, are folded into those of an ``s3://`` job) and the
``bpe-dask`` settings the tasks read (``bpe_dask.settings``), as the client had them. Local paths
are made absolute on the client; a missing filesystem package or an unreachable store becomes a
one-line ``BpeDaskError``.

>>> store = Store({"anon": True})
>>> store
Store()
>>> fs, path = store.fs("/tmp/a.txt")
>>> fs.protocol[0], path
('file', '/tmp/a.txt')
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import fsspec
from fsspec.utils import get_protocol

from bpe_dask import settings as config
from bpe_dask.errors import BpeDaskError
from bpe_dask.io.retries import Retries
from bpe_dask.io.web import reason, said

# Which package each protocol needs, for messages and for checking the workers.
PROTOCOL_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "http": "aiohttp",
    "https": "aiohttp",
    "az": "adlfs",
    "abfs": "adlfs",
}
COMPRESSION_PACKAGES = {"zstd": "zstandard"}
_AWS_ENVIRONMENT = {
    "key": "AWS_ACCESS_KEY_ID",
    "secret": "AWS_SECRET_ACCESS_KEY",
    "token": "AWS_SESSION_TOKEN",
}


def is_local(url: str) -> bool:
    return get_protocol(url) in ("file", "local")


def lower_scheme(url: str) -> str:
    """``url`` with its scheme in lower case, as fsspec knows them (a scheme's case is no matter).

    >>> lower_scheme("HTTPS://Example.org/Corpus.txt"), lower_scheme("corpus.txt")
    ('https://Example.org/Corpus.txt', 'corpus.txt')
    """
    scheme, sep, rest = url.partition("://")
    return scheme.lower() + sep + rest if sep else url


def absolute(url: str | os.PathLike) -> str:
    """``url`` as every process of a cluster must read it: a local path (a ``pathlib.Path`` too) made
    absolute here, on the client (a worker started in another directory would take a relative path
    from its own), and any other URL unchanged. Resolved once, before any task sees it."""
    url = os.fspath(url)
    if not is_local(url):
        return lower_scheme(url)
    path = url.split("://", 1)[1] if "://" in url else url
    resolved = os.path.abspath(os.path.expanduser(path))
    return resolved + "/" if url.endswith("/") and resolved != "/" else resolved


@dataclass(frozen=True)
class Store:
    """What a job's tasks need to reach its files: the storage options (``options``; they may hold
    credentials, so they never show in a ``repr``) and the ``bpe-dask`` settings the client had
    (``settings``; ``None``: this process's, for work outside a job). Frozen and picklable."""

    options: dict = field(default_factory=dict, repr=False)
    settings: dict | None = field(default=None, repr=False)

    @classmethod
    def for_job(
        cls, storage_options: dict | None, urls: Iterable[str | None], ship_credentials: bool = False
    ) -> Store:
        """The store of a job that reads and writes ``urls``, with the settings as they are now, on
        the client. Its options are those given, to ship to every worker, plus for an ``s3://`` job
        the endpoint this machine's environment names (which store the job means is part of the
        job). This machine's credentials go along only with ``ship_credentials``: on a real cluster
        the workers have their own (an instance role, their own environment), and a secret in a
        task's arguments is one more place for it to leak from (the scheduler, the dashboard, a
        worker's log)."""
        options = dict(storage_options or {})
        if any(get_protocol(url) in ("s3", "s3a") for url in urls if url):
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            given = {**options, **options.get("client_kwargs", {})}  # s3fs takes it in either
            if endpoint and "endpoint_url" not in given:
                options["endpoint_url"] = endpoint
            if ship_credentials and not options.get("anon"):
                for option, variable in _AWS_ENVIRONMENT.items():
                    if variable in os.environ and option not in options:
                        options[option] = os.environ[variable]
        return cls(options, config.snapshot())

    def fs(self, url: str) -> tuple[fsspec.AbstractFileSystem, str]:
        """The filesystem and path of ``url`` (a local path takes no storage options)."""
        options = {} if is_local(url) else dict(self.options)
        try:
            return fsspec.core.url_to_fs(url, **options)
        except ImportError:
            package = PROTOCOL_PACKAGES.get(get_protocol(url), "the fsspec implementation")
            raise BpeDaskError(
                f"{url}: reading {get_protocol(url)}:// needs {package} (pip install {package})"
            ) from None
        except ValueError as error:
            if "Protocol not known" not in str(error):
                raise
            raise BpeDaskError(
                f"{url}: no filesystem reads {get_protocol(url)}:// (fsspec's are listed by "
                "fsspec.available_protocols())"
            ) from None

    def setting(self, name: str) -> Any:
        return config.setting(name, self.settings)

    def size(self, name: str) -> int:
        return config.size(name, self.settings)

    @property
    def retries(self) -> Retries:
        """How the tasks try again (``bpe-dask.retries``, ``bpe-dask.retry-pause``)."""
        return Retries.configured(self.settings)


LOCAL = Store()  # no storage options, this process's settings: for work outside a job


def required_packages(urls: Iterable[str], compressions: Iterable[str | None] = ()) -> set[str]:
    """The packages beyond bpe-dask's own that reading and writing ``urls`` takes."""
    packages = {PROTOCOL_PACKAGES[p] for p in map(get_protocol, urls) if p in PROTOCOL_PACKAGES}
    return packages | {COMPRESSION_PACKAGES[c] for c in compressions if c in COMPRESSION_PACKAGES}


def describe(error: BaseException) -> str:
    """An exception as one line: its type where the message alone would be unclear, and an HTTP
    request's failure by its status (``web.reason``), any other by its message (``web.said``)."""
    text = reason(error) or said(error)
    return text if len(text) < 300 else text[:297] + "..."
