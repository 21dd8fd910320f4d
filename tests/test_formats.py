"""Output files: GPT-2 style vocab.json / merges.txt, and a tokenizer.json Hugging Face loads."""

from __future__ import annotations

import itertools
import json

import corpus
import pytest
import regex

from bpe_dask import train_bpe
from bpe_dask.io import tokenizer_formats
from conftest import CS336_DIR, gpt2_bytes_to_unicode

EOT = "<|endoftext|>"
PATTERN = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def reference_encode(text: str, vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]]) -> list[int]:
    """Plain GPT-2 encoding: split out specials, pre-tokenize, apply merges by rank."""
    ids = {token: i for i, token in vocab.items()}
    rank = {pair: r for r, pair in enumerate(merges)}
    out: list[int] = []
    for piece in regex.split(f"({regex.escape(EOT)})", text):
        if piece == EOT:
            out.append(ids[EOT.encode()])
            continue
        for match in PATTERN.finditer(piece):
            parts = [bytes([b]) for b in match.group().encode()]
            while len(parts) > 1:
                pairs = [(rank.get(p, len(rank)), i) for i, p in enumerate(itertools.pairwise(parts))]
                best, i = min(pairs)
                if best == len(rank):
                    break
                parts[i : i + 2] = [parts[i] + parts[i + 1]]
            out.extend(ids[p] for p in parts)
    return out


@pytest.fixture(scope="module")
def trained():
    path = CS336_DIR / "corpus.en"
    vocab, merges = train_bpe(path, 600, [EOT])
    return vocab, merges


def test_byte_table_is_gpt2s():
    assert tokenizer_formats.bytes_to_unicode() == gpt2_bytes_to_unicode()
    assert tokenizer_formats.token_to_str(b" \n") == "ĠĊ"


def test_files_match_the_cs336_reference_format(tmp_path):
    vocab, merges = train_bpe(CS336_DIR / "corpus.en", 500, [EOT])
    reference_merges = (CS336_DIR / "train-bpe-reference-merges.txt").read_text(encoding="utf-8")
    assert tokenizer_formats.merges_txt(merges) == reference_merges
    written = json.loads(tokenizer_formats.vocab_json(vocab, {EOT: 256}))
    reference = json.loads((CS336_DIR / "train-bpe-reference-vocab.json").read_text(encoding="utf-8"))
    assert set(written) == set(reference)
    assert list(written.values()) == list(range(500))
    assert written[EOT] == 256 and written["Ġ"] == 32


def test_tokenizer_json_encodes_like_plain_bpe(trained):
    tokenizers = pytest.importorskip("tokenizers")
    vocab, merges = trained
    hf = tokenizers.Tokenizer.from_str(tokenizer_formats.tokenizer_json(vocab, merges, {EOT: 256}))
    texts = [
        (CS336_DIR / "corpus.en").read_text(encoding="utf-8")[:5000],
        "Hello world" + EOT + " it's 2024!  \n\n\tdone" + EOT + EOT,
        corpus.mixed_corpus(5, 6),
    ]
    for text in texts:
        got = hf.encode(text).ids
        assert got == reference_encode(text, vocab, merges)
        assert hf.decode(got, skip_special_tokens=False) == text
    assert hf.token_to_id(EOT) == 256


@pytest.mark.parametrize("roles", [{}, {"pad_token": "<|pad|>", "bos_token": "<|pad|>"}])
def test_transformers_auto_tokenizer_loads_a_complete_tokenizer(tmp_path, roles):
    """AutoTokenizer.from_pretrained(out) loaded the tokenizer with eos_token None: tokenizer_config.json
    and special_tokens_map.json now say which special token is eos, bos and pad (GPT-2's
    <|endoftext|> as bos and eos unless told), and it encodes and decodes as bpe-dask does."""
    transformers = pytest.importorskip("transformers")
    from bpe_dask import Tokenizer, train

    train(CS336_DIR / "corpus.en", 400, tmp_path / "tok", [EOT, "<|pad|>"], **roles)
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path / "tok")
    ours = Tokenizer.load(tmp_path / "tok")
    assert (hf.eos_token, hf.eos_token_id) == (EOT, 256)
    assert hf.bos_token == roles.get("bos_token", EOT)
    assert hf.pad_token == roles.get("pad_token") and hf.pad_token_id == (257 if roles else None)
    text = corpus.mixed_corpus(7, 6) + f"  two  spaces ,{EOT}<|pad|> end"
    ids = hf.encode(text)
    assert ids == ours.encode(text)
    assert hf.decode(ids) == text  # no clean-up of spaces
    assert hf("a b", return_attention_mask=False)["input_ids"] == ours.encode("a b")  # no bos/eos added
