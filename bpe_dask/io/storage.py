"""Storage: URLs and storage options in, fsspec filesystems out.

The one place that decides how a URL is opened. Storage options go to remote filesystems
only (a local path ignores them); the endpoint of the AWS environment (and its credentials, when
asked to ship them) is folded into the options of an ``s3://`` job; local paths are made absolute
on the client; a missing filesystem package or an unreachable store becomes a one-line
``BpeDaskError``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import fsspec
from fsspec.utils import get_protocol

from bpe_dask.errors import BpeDaskError

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


def absolute(url: str) -> str:
    """``url`` as every process of a cluster must read it: a local path made absolute here, on the
    client (a worker started in another directory would take a relative path from its own), and
    any other URL unchanged. Resolved once, before any task sees it."""
    if not is_local(url):
        return url
    path = url.split("://", 1)[1] if "://" in url else url
    resolved = os.path.abspath(os.path.expanduser(path))
    return resolved + "/" if url.endswith("/") and resolved != "/" else resolved


def filesystem(url: str, storage_options: dict | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem and path of ``url``."""
    options = {} if is_local(url) else dict(storage_options or {})
    try:
        return fsspec.core.url_to_fs(url, **options)
    except ImportError:
        package = PROTOCOL_PACKAGES.get(get_protocol(url), "the fsspec implementation")
        raise BpeDaskError(
            f"{url}: reading {get_protocol(url)}:// needs {package} (pip install {package})"
        ) from None


def required_packages(urls: Iterable[str], compressions: Iterable[str | None] = ()) -> set[str]:
    """The packages beyond bpe-dask's own that reading and writing ``urls`` takes."""
    packages = {PROTOCOL_PACKAGES[p] for p in map(get_protocol, urls) if p in PROTOCOL_PACKAGES}
    return packages | {COMPRESSION_PACKAGES[c] for c in compressions if c in COMPRESSION_PACKAGES}


def job_storage_options(
    storage_options: dict | None, urls: Iterable[str], ship_credentials: bool = False
) -> dict:
    """The options given, to ship to every worker, plus for an ``s3://`` job the endpoint this
    machine's environment names (which store the job means is part of the job). This machine's
    credentials go along only with ``ship_credentials``: on a real cluster the workers have
    their own (an instance role, their own environment), and a secret in a task's arguments
    is one more place for it to leak from (the scheduler, the dashboard, a worker's log)."""
    options = dict(storage_options or {})
    if not any(get_protocol(url) in ("s3", "s3a") for url in urls):
        return options
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and "endpoint_url" not in options and "endpoint_url" not in options.get("client_kwargs", {}):
        options["endpoint_url"] = endpoint
    if ship_credentials and not options.get("anon"):
        for option, variable in _AWS_ENVIRONMENT.items():
            if variable in os.environ and option not in options:
                options[option] = os.environ[variable]
    return options


def describe(error: BaseException) -> str:
    """An exception as one line: its type where the message alone would be unclear."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) < 300 else text[:297] + "..."
