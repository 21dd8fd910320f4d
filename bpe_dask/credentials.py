"""What a message shows of a web URL: its credentials hidden.

Takes a URL, or a text naming URLs (an error line, a log line, other libraries' words); gives them
with a web URL's query (a signed URL's signature, an access token) and the user and password before
its host as ``<hidden>``: every ``BpeDaskError``'s message goes through ``hide_credentials``, and the
job's reports and log lines name inputs ``shown``. The job itself reads with the whole URL.
"""

from __future__ import annotations

import re

_WEB = re.compile(r"https?://", re.IGNORECASE)  # a scheme's case is no matter

HIDDEN = "<hidden>"  # what ``shown`` puts in place of a query or a user's name and password
# A web URL in a message, ``HIDDEN`` included: hiding a message's URLs again leaves it as it is.
_WEB_URL = re.compile(rf"https?://(?:{re.escape(HIDDEN)}|[^\s'\"<>])+", re.IGNORECASE)


def shown(url: str) -> str:
    """``url`` as logs, error lines and reports show it: a web URL's query (a signed URL's
    signature, an access token) and the user and password before its host are credentials, and
    are hidden (its fragment, which no server sees, is left out); every other URL as it is.

    >>> shown("https://b.s3.amazonaws.com/train.parquet?X-Amz-Credential=AKIA&X-Amz-Signature=9f")
    'https://b.s3.amazonaws.com/train.parquet?<hidden>'
    >>> shown("https://user:secret@example.org/corpus.txt"), shown("s3://bucket/a?b.txt")
    ('https://<hidden>@example.org/corpus.txt', 's3://bucket/a?b.txt')
    >>> shown(shown("https://u:p@h.org/a.txt?sig=1")) == shown("https://u:p@h.org/a.txt?sig=1")
    True

    A password holding ``/``, ``?`` or ``#`` unescaped, a malformed host: hidden all the same.

    >>> shown("https://user:p/s?s#@h.org/x"), shown("HTTPS://[::1/x?sig=1"), shown("https://h.org/@a/b")
    ('https://<hidden>@h.org/x', 'HTTPS://[::1/x?<hidden>', 'https://h.org/@a/b')
    """
    if not _WEB.match(url):
        return url
    scheme, _, rest = url.partition("://")
    # The user and password end at the last "@" of the authority (before the first "/", "?" or "#"),
    # or, where they hold one of those unescaped, at the last "@" of a "user:..." before one.
    authority = re.match(r"[^/?#]*", rest).group()
    before, at, _ = rest.rpartition("@")
    if "@" in authority:
        rest = f"{HIDDEN}@{rest[authority.rindex('@') + 1 :]}"
    elif at and ":" in before.partition("/")[0].partition("?")[0].partition("#")[0]:
        rest = f"{HIDDEN}@{rest[len(before) + 1 :]}"
    rest = rest.partition("#")[0]
    path, question, query = rest.partition("?")
    return f"{scheme}://{path}" + (f"?{HIDDEN}" if question and query else "")


def hide_credentials(text: str) -> str:
    """``text`` with every web URL in it ``shown``: for messages made of other libraries' words
    (aiohttp's and fsspec's name the URL they requested, query and all).

    >>> said = hide_credentials("404, message='Not Found', url='https://h.org/a.txt?token=s3cr3t'")
    >>> said, hide_credentials(said) == said
    ("404, message='Not Found', url='https://h.org/a.txt?<hidden>'", True)
    >>> hide_credentials("cannot read https://h.org/x?sig=1: HTTP 403")
    'cannot read https://h.org/x?<hidden>: HTTP 403'
    """
    return _WEB_URL.sub(_shown_in_text, text)


def _shown_in_text(found: re.Match) -> str:
    url = found.group()
    kept = len(url.rstrip(":;,.)"))  # punctuation after a URL in a sentence is the sentence's
    return shown(url[:kept]) + url[kept:]
