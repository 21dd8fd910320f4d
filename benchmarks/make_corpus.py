"""Deterministic synthetic benchmark inputs for bpe-dask: training text and word-count tables.

    python benchmarks/make_corpus.py text --kind openwebtext --size 65MB --seed 0 --out owt-65mb.txt
    python benchmarks/make_corpus.py text --kind tinystories --size 1GiB --out ts-1g.txt --jobs 8
    python benchmarks/make_corpus.py counts --unique 4000000 --seed 0 --out counts.parquet
    python benchmarks/make_corpus.py stats owt-65mb.txt   # unique GPT-2 pre-tokens (needs bpe_dask)

``text`` writes UTF-8 text of about ``--size`` bytes, documents separated by ``<|endoftext|>``:

- ``tinystories`` imitates TinyStoriesV2 (CS336's small corpus): short children's stories of
  about 600-1000 bytes from a few thousand simple words and names, short sentences, dialogue in
  straight or typographic quotes, one story per ``\\n<|endoftext|>\\n``-separated block.
- ``openwebtext`` imitates OpenWebText (CS336's 12 GB corpus): 2-8 KB web articles with titles,
  paragraphs and lists, a Zipf vocabulary of real English words followed by an unbounded tail of
  coined ones, proper nouns, numbers of every kind, URLs, hashtags, handles, contractions, and a
  sprinkling of non-ASCII (accented names, CJK and Cyrillic words, emoji, typographic punctuation).

``counts`` writes a table in bpe-dask's counts schema (``token: binary``, ``count: int64``) as
``bpe-dask count`` would for OpenWebText, for timing ``bpe-dask merge`` alone at full scale
without first producing and counting 12 GB of text.

What matters for timing BPE training, and so what these imitate:

- The number of unique pre-tokens. Counting cost grows with the text, but the merge loop's
  memory and time grow with the unique words: each merge revisits the words holding the pair.
  Real vocabularies keep growing with the corpus (Heaps' law, unique ~ K * N**beta), so the
  generators size their vocabulary from ``--size``: about 20-60 thousand unique pre-tokens for
  65 MB of tinystories, several hundred thousand for 65 MB of openwebtext, and larger files more.
- Their length distribution: long words hold more pairs and take more merges to finish. Rare
  words are coined from syllables (onset, vowel, coda, with prefixes and suffixes such as
  ``-ing``, ``-tion``, ``un-``) so that they share sub-strings the way real words do, rather than
  being random letter soup whose pairs never repeat; rarer words run longer.
- Frequency skew: Zipf word frequencies (a few pre-tokens such as ``" the"`` and ``","`` take
  several percent of the text, most unique ones occur once or a few times) decide which pairs win
  and how many words each merge touches.
- The pre-token forms: leading-space words, capitalised sentence starts, words after newlines and
  quotes without their space, contractions, digit runs, punctuation runs and whitespace runs are
  all separate pre-tokens under the GPT-2 pattern.

Measured with ``stats`` (seed 0): tinystories 10 MB -> 13 thousand unique pre-tokens, 65 MB -> 34
thousand; openwebtext 10 MB -> 138 thousand, 65 MB -> 419 thousand, 260 MB -> 925 thousand
(beta about 0.57); ``counts --unique 4000000`` -> 2.6 billion pre-tokens, the largest count 4%,
40% of rows counted once, 75% at most 10 times, median length 10 bytes.

Everything is a function of ``--seed`` and the size (``random.Random`` seeded per chunk with a
string, coined words from an integer hash), never of hash order or the number of ``--jobs``, so
the same command writes byte-identical output. Text is generated in chunks of a few MiB and written
as it goes; memory holds the vocabulary (which grows like the unique words) and a few chunks.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from synth import EOT
from synth.counts import write_counts
from synth.stories import Stories
from synth.webtext import WebText

KINDS = ("tinystories", "openwebtext")
CHUNK_BYTES = 4 << 20


# --------------------------------------------------------------------------------------------
# Text files.
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=2)
def _generator(kind: str, size: int) -> WebText | Stories:
    return WebText(size) if kind == "openwebtext" else Stories(size)


def _chunk(args: tuple[str, int, int, int, int]) -> bytes:
    """Chunk ``index`` of a corpus: whole documents totalling at least ``budget`` bytes."""
    kind, size, seed, index, budget = args
    generator = _generator(kind, size)
    rng = random.Random(f"bpe-dask:{kind}:{seed}:{index}")
    docs: list[bytes] = []
    total = 0
    while total < budget:
        doc = generator.document(rng).encode()
        docs.append(doc)
        total += len(doc)
    return b"".join(docs)


def chunk_plan(kind: str, size: int, seed: int) -> list[tuple[str, int, int, int, int]]:
    """The chunk tasks for a corpus of ``size`` bytes: the result does not depend on who runs them."""
    return [
        (kind, size, seed, index, min(CHUNK_BYTES, size - start))
        for index, start in enumerate(range(0, size, CHUNK_BYTES))
    ]


def iter_text(kind: str, size: int, seed: int = 0, jobs: int = 1) -> Iterator[bytes]:
    """The corpus as UTF-8 chunks, in order, generated by ``jobs`` processes."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    plan = chunk_plan(kind, size, seed)
    if jobs <= 1 or len(plan) <= 1:
        yield from map(_chunk, plan)
        return
    _generator(kind, size)  # build the vocabulary once; forked workers inherit it
    with multiprocessing.Pool(min(jobs, len(plan))) as pool:
        yield from pool.imap(_chunk, plan)


def write_text(kind: str, size: int, seed: int, out: str | Path, jobs: int = 1) -> int:
    """Write the corpus to ``out`` and return its size in bytes."""
    written = 0
    with open(out, "wb") as f:
        for chunk in iter_text(kind, size, seed, jobs):
            f.write(chunk)
            written += len(chunk)
    return written


# --------------------------------------------------------------------------------------------
# Measuring.
# --------------------------------------------------------------------------------------------


def pretoken_stats(path: str | Path, special: str = EOT) -> dict[str, int]:
    """Pre-tokens and unique pre-tokens of a text file, GPT-2 pattern, special token split out."""
    from bpe_dask.rules.pretokenize import Pretokenizer

    pretokenizer = Pretokenizer([special])
    counts: dict[str, int] = {}
    tail = ""
    documents = 0
    with open(path, encoding="utf-8") as f:
        while block := f.read(8 << 20):
            block = tail + block
            cut = block.rfind(special)
            if cut < 0:
                tail = block
                continue
            block, tail = block[:cut], block[cut + len(special) :]
            documents += block.count(special) + 1
            pretokenizer.count(block, counts)
    pretokenizer.count(tail, counts)
    return {
        "bytes": os.path.getsize(path),
        "pretokens": sum(counts.values()),
        "unique_pretokens": len(counts),
        "unique_count_1": sum(n == 1 for n in counts.values()),
        "documents": documents,
    }


# --------------------------------------------------------------------------------------------
# Command line.
# --------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """Bytes from ``65MB``, ``1GiB`` or ``65000000``."""
    try:
        from dask.utils import parse_bytes
    except ImportError:  # pragma: no cover - dask is a bpe-dask dependency
        return int(text)
    return int(parse_bytes(text))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    text = commands.add_parser("text", help="write a synthetic training text")
    text.add_argument("--kind", choices=KINDS, required=True)
    text.add_argument("--size", required=True, help="about this many bytes: 65MB, 1GiB, 65000000")
    text.add_argument("--seed", type=int, default=0)
    text.add_argument("--out", required=True)
    text.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: cores)")
    counts = commands.add_parser("counts", help="write a synthetic word-count table (Parquet)")
    counts.add_argument("--unique", type=int, required=True, help="rows (unique pre-tokens)")
    counts.add_argument("--seed", type=int, default=0)
    counts.add_argument("--out", required=True)
    stats = commands.add_parser("stats", help="count the GPT-2 pre-tokens of a text file")
    stats.add_argument("path")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    if args.command == "text":
        written = write_text(args.kind, parse_size(args.size), args.seed, args.out, args.jobs)
        summary: dict[str, object] = {"out": args.out, "bytes": written}
    elif args.command == "counts":
        summary = {"out": args.out, **write_counts(args.unique, args.seed, args.out)}
    else:
        summary = {"path": args.path, **pretoken_stats(args.path)}
    summary["seconds"] = round(time.perf_counter() - start, 2)
    print(json.dumps(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
