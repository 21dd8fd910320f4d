"""User-facing errors: what the CLI turns into one line and a non-zero exit.

``BpeDaskError`` is a problem with the user's input or options (``UsageError``: options that cannot
be read as a job's); ``InputError`` the kind no retry can fix (the input's bytes themselves are
unusable); ``TransientError`` one that may pass if tried again (which failures are retried, and
how: ``io.retries``).

>>> str(BpeDaskError("vocab size 10 is below 256"))
'vocab size 10 is below 256'
"""

from __future__ import annotations

from bpe_dask.credentials import hide_credentials


class BpeDaskError(Exception):
    """A problem with the user's input or options, explained in one line.

    >>> from bpe_dask import train_bpe
    >>> train_bpe("corpus.txt", 100)
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: vocab size 100 is below 256 (256 bytes + 0 special tokens)

    A web URL's credentials in the line (a signed URL's query, a password) are hidden, whoever
    wrote it (``credentials.shown``):

    >>> str(BpeDaskError("cannot read https://user:pw@h.org/x.txt?sig=1: HTTP 403 Forbidden"))
    'cannot read https://<hidden>@h.org/x.txt?<hidden>: HTTP 403 Forbidden'
    """

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            args = (hide_credentials(args[0]), *args[1:])
        super().__init__(*args)


class UsageError(BpeDaskError):
    """A command line or config file that does not say a job: an option missing, unknown or not of
    its kind. The CLI exits with 2 for it, as for any malformed command line."""


class TransientError(BpeDaskError):
    """A failure explained in one line that may go away if tried again (a read of the input that a
    dropped connection cut short)."""


class InputError(BpeDaskError):
    """The input's content cannot be counted (invalid UTF-8, a giant pre-token): retrying cannot help."""
