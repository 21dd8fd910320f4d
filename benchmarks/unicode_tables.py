"""Where a peer's ids differ from bpe-dask's because its Unicode tables differ.

bpe-dask classifies characters (letter, number, space) by the ``regex`` module's Unicode tables;
tiktoken by the Rust ``regex`` crate's, Hugging Face ``tokenizers`` by Oniguruma's. For every code
point c but the surrogates, the text ``a{c}b 1{c}2 {c}{c}x{c} {c}`` (c between letters, between
digits, beside itself and spaces) is encoded by each with the same vocabulary (every byte and every
pair of bytes, so that ids show where pre-tokens end) and the same split pattern: where the ids
differ, the pattern split the text differently there. Prints, per pattern and peer, how many code
points differ and where, and the versions compared (docs/reference/files.md holds the last run):

    python benchmarks/unicode_tables.py                  # gpt2, gpt4 and o200k
    python benchmarks/unicode_tables.py --patterns gpt2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import unicodedata
from importlib.metadata import version

from bpe_dask import Tokenizer
from bpe_dask.rules.patterns import split_pattern, unicode_tables


def pair_tokenizer(pattern: str) -> Tokenizer:
    """Every byte, then every pair of bytes as one merge each."""
    vocab = {i: bytes([i]) for i in range(256)}
    merges = [(bytes([a]), bytes([b])) for a in range(256) for b in range(256)]
    vocab.update({256 + k: a + b for k, (a, b) in enumerate(merges)})
    return Tokenizer(vocab, merges, [], pattern)


def texts() -> tuple[list[int], list[str]]:
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    return points, [f"a{chr(c)}b 1{chr(c)}2 {chr(c)}{chr(c)}x{chr(c)} {chr(c)}" for c in points]


def ranges(points: list[int]) -> list[str]:
    """``U+209F``, ``U+1F8B2-U+1F8BB``: consecutive code points as one range."""
    found: list[list[int]] = []
    for c in points:
        if found and found[-1][1] == c - 1:
            found[-1][1] = c
        else:
            found.append([c, c])
    return [f"U+{a:04X}" if a == b else f"U+{a:04X}-U+{b:04X}" for a, b in found]


def compare(pattern: str, points: list[int], inputs: list[str]) -> dict:
    import tiktoken
    import tokenizers

    ours = pair_tokenizer(pattern)
    expected = ours.encode_batch(inputs)
    regex, ranks = split_pattern(pattern).regex, ours.tiktoken_ranks()
    hf = tokenizers.Tokenizer.from_str(ours.files()["tokenizer.json"])
    peers = {
        "tiktoken": tiktoken.Encoding("pairs", pat_str=regex, mergeable_ranks=ranks, special_tokens={})
        .encode_ordinary_batch,
        "tokenizers": lambda batch: [e.ids for e in hf.encode_batch(batch, add_special_tokens=False)],
    }  # fmt: skip
    result = {}
    for name, encode in peers.items():
        got = encode(inputs)
        differ = [c for c, a, b in zip(points, expected, got, strict=True) if a != b]
        assigned = [c for c in differ if unicodedata.category(chr(c)) != "Cn"]
        result[name] = {"differ": differ, "assigned_in_python": len(assigned), "ranges": ranges(differ)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--patterns", default="gpt2,gpt4,o200k")
    args = parser.parse_args()
    started = time.perf_counter()
    points, inputs = texts()
    versions = {
        "regex": unicode_tables(),
        "tiktoken": version("tiktoken"),
        "tokenizers": version("tokenizers"),
        "python_unicodedata": unicodedata.unidata_version,
    }
    print(json.dumps({"versions": versions, "code_points": len(points)}))
    for pattern in args.patterns.split(","):
        compared = compare(pattern, points, inputs)
        for peer, found in compared.items():
            shown = ", ".join(found["ranges"][:12]) + (" ..." if len(found["ranges"]) > 12 else "")
            assigned = found["assigned_in_python"]
            print(f"{pattern:6s} {peer:10s} {len(found['differ']):6,d} code points differ "
                  f"({assigned:,} of them assigned in Python's tables): {shown}")  # fmt: skip
        same = "the same" if compared["tiktoken"]["differ"] == compared["tokenizers"]["differ"] else "other"
        print(f"{pattern:6s} tiktoken and tokenizers differ at {same} code points")
        sys.stdout.flush()
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
