"""Sampling: an input file in, the first text it holds out, for checks the client makes before any work.

Takes an ``InputFile`` and a size; gives the first documents of the file, about ``size`` bytes of
their UTF-8 in all: the start of a text file (decompressed, invalid UTF-8 read as U+FFFD), or the
texts of the first records of a JSON Lines or Parquet file, read as the map tasks read them
(``records``: a bad record stops the sample as it would stop the job, unless skipped). Reads only
that much, whatever the file's size. ``first_texts`` takes as much of documents already in hand
(an iterable's, a Dask partition's). ``first_look`` reads the start of a text or JSON Lines file as
its first map task will, before any cluster starts.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from contextlib import closing

from bpe_dask.io.documents import Documents
from bpe_dask.io.inputs import InputFile
from bpe_dask.io.plan import ByteRange, plan_row_groups
from bpe_dask.io.records import iter_documents
from bpe_dask.io.storage import LOCAL, Store
from bpe_dask.io.text import iter_texts, read_blocks
from bpe_dask.rules.pretokenize import Pretokenizer

SAMPLE_BYTES = 1 << 16


def sample_documents(file: InputFile, store: Store = LOCAL, size: int = SAMPLE_BYTES) -> list[str]:
    """The first documents of ``file``, about ``size`` bytes of UTF-8 in all (a text file is one).

    >>> from pathlib import Path
    >>> _ = Path("in.txt").write_text("Hello, world!")
    >>> sample_documents(InputFile(Path("in.txt").resolve().as_uri(), 13, "v1"), size=5)
    ['Hello']
    """
    whole = ByteRange(file, 0, file.size)
    if not file.has_records:
        with closing(read_blocks(whole, store, size)) as blocks:
            data = next(blocks)
        return [codecs.getincrementaldecoder("utf-8")("replace").decode(data)]  # a cut character: dropped
    # One part for the whole file (a Parquet file's row counts come from its footer); its first batch.
    part = plan_row_groups(file, max(file.size, 1), store)[0] if file.format == "parquet" else whole
    with closing(iter_documents(part, store, utf8_errors="replace", batch_bytes=size)) as batches:
        first = next(batches, None)
    return [] if first is None else first.texts()


def first_look(file: InputFile, store: Store, utf8_errors: str, pretokenizer: Pretokenizer) -> None:
    """Read the first block of a text or JSON Lines ``file`` (``size`` bytes or so) as its first map
    task will, so that a mistake there (text that is not UTF-8, a record without its field) is the
    task's one line before any cluster starts. A Parquet file's footer said what it holds already.

    >>> from pathlib import Path
    >>> _ = Path("bad.txt").write_bytes(b"hello \\xff world")
    >>> bad = InputFile(Path("bad.txt").resolve().as_uri(), 13, "v1")
    >>> first_look(bad, LOCAL, "strict", Pretokenizer([]))
    Traceback (most recent call last):
    bpe_dask.errors.InputError: ...bad.txt: invalid UTF-8 at byte offset 6 (utf8_errors="replace" ...)
    """
    if file.format == "parquet":
        return
    whole = ByteRange(file, 0, file.size)
    if file.has_records:
        reading = iter_documents(whole, store, utf8_errors=utf8_errors, batch_bytes=SAMPLE_BYTES)
    else:
        reading = iter_texts(whole, pretokenizer, store, utf8_errors=utf8_errors, block_size=SAMPLE_BYTES)
    with closing(reading):
        next(reading, None)


def first_texts(batches: Iterable[Documents], size: int = SAMPLE_BYTES) -> list[str]:
    """The first documents of ``batches``, about ``size`` bytes of UTF-8 in all; read no further.

    >>> first_texts([Documents.joined([b"ab", b"cd"]), Documents.joined([b"ef"])], size=3)
    ['ab', 'cd']
    """
    sample: list[str] = []
    for documents in batches:
        for text in documents.texts():
            if size <= 0:
                return sample
            sample.append(text)
            size -= len(text.encode())
    return sample
