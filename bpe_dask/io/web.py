"""Web servers: what an HTTP(S) input's server can serve, and its failures as a few words.

fsspec reads ``http://`` and ``https://`` through aiohttp, but takes a server at its word: a server that
ignores ``Range`` answers a ranged read with the whole file, which fsspec's ``cat_file`` hands back
as if it were the bytes asked for, and fsspec's ``info`` turns every failure, a 404 and a refused
connection alike, into a ``FileNotFoundError``. Takes a URL and its fsspec filesystem; gives its
``info`` with failures as ``BpeDaskError`` lines (``file_info``), whether the server serves byte
ranges (``serves_ranges``: one small ranged request, whose body is never read), a file in one
streamed request, up to a bound (``read_whole``: a Parquet file from a server without ranges), and
HTTP failures described (``reason``); the path a URL's name is read from (``path_of``: no query); and a URL as
logs, errors and reports show it (``credentials.shown``).

>>> is_http("https://example.org/corpus.txt"), is_http("s3://bucket/corpus.txt")
(True, False)
>>> reason(FileNotFoundError("http://example.org/x"))  # fsspec's word for a 404 of a file it reads
'HTTP 404 Not Found'
>>> reason(ValueError("not from a request")) is None  # said as it is
True
"""

from __future__ import annotations

import re
from http import HTTPStatus
from urllib.parse import urlsplit

import fsspec
from fsspec.asyn import sync
from fsspec.utils import get_protocol

from bpe_dask.credentials import hide_credentials, shown
from bpe_dask.errors import BpeDaskError, TransientError
from bpe_dask.io.retries import is_transient
from bpe_dask.wording import format_bytes

HTTP_PROTOCOLS = ("http", "https")


def is_http(url: str) -> bool:
    return get_protocol(url).lower() in HTTP_PROTOCOLS  # a URL's scheme may be in capitals


def file_info(fs: fsspec.AbstractFileSystem, path: str) -> dict:
    """fsspec's ``info`` of an HTTP(S) URL (a HEAD, or a GET whose body is not read; redirects
    followed): ``size`` is ``None`` when the server does not say it. A missing file, or a server that
    cannot be reached, is one line naming the URL and why."""
    try:
        return fs.info(path)
    except Exception as error:
        why = reason(error) or said(error)
        if _status(error) in (404, 410):
            raise BpeDaskError(f"input not found: {shown(path)} ({why})") from None
        raise BpeDaskError(f"cannot read {shown(path)}: {why}") from None


def serves_ranges(fs: fsspec.AbstractFileSystem, path: str) -> bool:
    """Whether the server answers a request for a byte range of ``path`` with that range (206),
    rather than with the whole file (200), asking for its first byte. The answer's body is never
    read: closing the response drops whatever the server sends."""

    async def probe() -> bool:
        session = await fs.set_session()
        headers = {**fs.kwargs.get("headers", {}), "Range": "bytes=0-0"}
        options = {k: v for k, v in fs.kwargs.items() if k != "headers"}
        async with session.get(fs.encode_url(path), headers=headers, **options) as response:
            fs._raise_not_found_for_status(response, path)
            return response.status == 206

    try:
        return sync(fs.loop, probe)
    except Exception as error:
        kind = TransientError if is_transient(error) else BpeDaskError  # tried again by the caller's retries
        raise kind(f"cannot read {shown(path)}: {reason(error) or said(error)}") from None


WHOLE_READ_BLOCK = 1 << 20


def read_whole(fs: fsspec.AbstractFileSystem, path: str, limit: int, name: str) -> bytearray:
    """The whole of ``path`` in one GET, streamed and never seeking (fsspec's ``HTTPStreamFile``):
    how a file is read from a server that serves no byte ranges when its end is needed first (a
    Parquet footer). More than ``limit`` bytes is refused in one line (``too_large``), as soon as
    they arrive: a server need not say the size. The blocks go into one ``bytearray`` as they come:
    joining a list of them would hold the file twice at the end."""
    data = bytearray()
    with fs.open(path, "rb", block_size=0) as stream:
        while block := stream.read(WHOLE_READ_BLOCK):
            if len(data) + len(block) > limit:
                raise too_large(name, None, limit)
            data += block
    return data


def too_large(name: str, size: int | None, limit: int) -> BpeDaskError:
    """The line for a file ``read_whole`` will not hold: ``size`` bytes (``None``: more than ``limit``)."""
    held = f"its {format_bytes(size)} are" if size is not None else "it holds"
    return BpeDaskError(
        f"{name}: the server does not serve byte ranges, so reading this Parquet file (its footer is at "
        f"its end) means downloading it whole into memory, and {held} more than "
        f"bpe-dask.whole-file-limit ({format_bytes(limit)}): download the file first, serve it from a "
        "server that does, or raise the setting"
    )


def reason(error: BaseException) -> str | None:
    """An HTTP request's failure in a few words (``None`` for anything else): the status the server
    answered, or that it could not be reached. fsspec's ``info`` hides the failure behind a
    ``FileNotFoundError`` naming only the URL: its cause is the failure."""
    cause = error.__cause__ if isinstance(error, FileNotFoundError) and error.__cause__ else error
    names = {kind.__name__ for kind in type(cause).__mro__}
    status = _status(cause)
    if status is not None:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = getattr(cause, "message", "") or ""
        return f"HTTP {status} {phrase}".rstrip()
    if "ClientConnectorError" in names:  # aiohttp's: refused, no such host, ...
        os_error = getattr(cause, "os_error", None)
        why = (
            "connection refused" if isinstance(os_error, ConnectionRefusedError) else said(os_error or cause)
        )
        return f"cannot connect to {cause.host}:{cause.port} ({why})"
    if isinstance(error, FileNotFoundError) and cause is error:  # a 404 as fsspec's files raise it
        return "HTTP 404 Not Found" if is_http(str(error)) else None
    if names & {"ClientPayloadError", "ServerDisconnectedError"}:
        # aiohttp's words name a status of its own (a "400" no server sent): say what was received.
        received = re.search(r"received \d+ of \d+ bytes", str(cause))
        return "the server stopped sending before the end" + (f" ({received.group()})" if received else "")
    return None


def path_of(url: str) -> str:
    """The path of ``url`` without the query or fragment a web URL may end with, whose name says
    the file's format and compression (``data.jsonl.gz?download=true``, a signed URL's ``?X-Amz-...``).

    >>> path_of("https://example.org/data/part-0.jsonl.gz?download=true"), path_of("s3://b/a?b.txt")
    ('/data/part-0.jsonl.gz', 's3://b/a?b.txt')
    """
    return urlsplit(url).path if is_http(url) else url


def _status(error: BaseException) -> int | None:
    """The HTTP status of aiohttp's ``ClientResponseError`` (a 404 hidden in a ``FileNotFoundError``
    too), else ``None``."""
    if isinstance(error, FileNotFoundError) and error.__cause__ is not None:
        error = error.__cause__
    if any(kind.__name__ == "ClientResponseError" for kind in type(error).__mro__):
        status = getattr(error, "status", None)
        return status if isinstance(status, int) else None
    return None


def said(error: BaseException) -> str:
    """Any exception's message in one line, credentials hidden; its type where it has none."""
    return hide_credentials(" ".join(str(error).split())) or type(error).__name__
