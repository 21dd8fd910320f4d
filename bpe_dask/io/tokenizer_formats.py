"""The tokenizer's files: a vocabulary and merges in, the text of GPT-2-style files out, and back.

Takes ``vocab`` (id -> bytes), ``merges`` and the special tokens with their ids; gives the text of
``vocab.json`` and ``merges.txt`` (bytes mapped to printable characters as GPT-2 and the CS336
fixtures do, special tokens as their own text), of a Hugging Face ``tokenizer.json`` (with the split
pattern) and of a tiktoken rank file (``tiktoken_bpe``, with the ranks ``tiktoken_ranks`` finds for a
``Vocabulary``, or says why there are none); ``parse_vocab_json``, ``parse_merges_txt``,
``parse_tokenizer_json``, ``special_tokens_in`` and ``pattern_in`` read them back. ``tokenizer_files``
puts these together into the tokenizer directory's contract.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from bpe_dask.errors import BpeDaskError
from bpe_dask.rules.patterns import GPT2, SplitPattern, split_pattern
from bpe_dask.rules.reference import Merges, Vocab
from bpe_dask.rules.vocabulary import Vocabulary

EOT = "<|endoftext|>"  # GPT-2's one special token, the end of a document


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (space becomes ``Ġ``)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in mapping)
    mapping.update({b: chr(256 + n) for n, b in enumerate(shifted)})
    return dict(sorted(mapping.items()))


def token_to_str(token: bytes) -> str:
    """``token``'s bytes as GPT-2's ``vocab.json`` and ``merges.txt`` write them, each byte one printable
    character (``bytes_to_unicode``).

    >>> token_to_str(b" the\\n")
    'ĠtheĊ'
    """
    return token.decode("latin-1").translate(bytes_to_unicode())  # byte b read as chr(b), to its name


@functools.cache
def _untranslation() -> tuple[dict[int, str], re.Pattern]:
    """``token_to_str`` undone by ``str.translate`` (to latin-1 characters), and a pattern that finds
    a character outside GPT-2's 256 names."""
    names = bytes_to_unicode()
    outside = re.compile("[^" + re.escape("".join(names.values())) + "]")
    return {ord(char): chr(b) for b, char in names.items()}, outside


def str_to_token(text: str) -> bytes:
    """The bytes a ``vocab.json`` / ``merges.txt`` string stands for (``token_to_str`` undone);
    a string with characters that name no byte is taken as its UTF-8."""
    table, outside = _untranslation()
    if outside.search(text):
        return text.encode("utf-8")
    return text.translate(table).encode("latin-1")


def check_special_token_names(special_tokens: Iterable[str]) -> None:
    """Refuse a special token that ``vocab.json`` would confuse with a single byte."""
    single_bytes = set(bytes_to_unicode().values())
    for token in special_tokens:
        if token in single_bytes:
            raise BpeDaskError(f"special token {token!r} is the name of a single byte in vocab.json")


def vocab_json(vocab: Mapping[int, bytes], special_ids: Mapping[str, int]) -> str:
    """``{token: id}`` in id order; special tokens are written as their own text, as GPT-2 does."""
    return json.dumps(_vocab_entries(vocab, special_ids), indent=4, ensure_ascii=False)


def _vocab_entries(vocab: Mapping[int, bytes], special_ids: Mapping[str, int]) -> dict[str, int]:
    special_at = {i: token for token, i in special_ids.items()}
    entries: dict[str, int] = {}
    for token_id, token in sorted(vocab.items()):
        key = special_at.get(token_id) or token_to_str(token)
        if key in entries:
            raise BpeDaskError(
                f"special token {key!r} reads the same as a learned token in vocab.json's GPT-2 form; "
                "rename the special token"
            )
        entries[key] = token_id
    return entries


def merges_txt(merges: Sequence[tuple[bytes, bytes]]) -> str:
    """The text of ``merges.txt``: each merge's two tokens (``token_to_str``) on a line, in order."""
    return "".join(f"{token_to_str(a)} {token_to_str(b)}\n" for a, b in merges)


def parse_vocab_json(text: str, special_tokens: Iterable[str] = ()) -> Vocab:
    """The vocabulary of a GPT-2-style ``vocab.json``: id -> token bytes. Special tokens are
    written as their own text, so a key that is one stands for its UTF-8 ("<|fin|é>" would
    otherwise read as byte-mapped characters), except under ids 0-255, which are the bytes (GPT-2
    writes byte 0xE9 as "é": a special token "é" is not that key)."""
    specials = set(special_tokens)
    return {
        int(i): token.encode("utf-8") if token in specials and int(i) >= 256 else str_to_token(token)
        for token, i in json.loads(text).items()
    }


def special_tokens_of(vocab_json_text: str, merges: Merges) -> list[str]:
    """The special tokens of a ``vocab.json`` read without a ``tokenizer.json`` to name them: its
    entries that are neither a byte nor the result of one of ``merges``, in id order.

    >>> special_tokens_of('{"a": 97, "b": 98, "ab": 256, "<|endoftext|>": 257}', [(b"a", b"b")])
    ['<|endoftext|>']
    """
    made = {left + right for left, right in merges}
    entries = sorted(json.loads(vocab_json_text).items(), key=lambda entry: entry[1])
    return [key for key, _ in entries if len(data := str_to_token(key)) > 1 and data not in made]


def parse_merges_txt(text: str) -> Merges:
    """The merges of a GPT-2-style ``merges.txt``, in order (a ``#version`` line is skipped)."""
    merges = []
    for line in text.splitlines():
        if line and not line.startswith("#version"):
            left, right = line.split(" ")
            merges.append((str_to_token(left), str_to_token(right)))
    return merges


def tokenizer_json(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    special_ids: Mapping[str, int],
    pattern: SplitPattern = GPT2,
) -> str:
    """A Hugging Face ``tokenizers`` file that encodes with exactly these merges and split pattern.

    GPT-2's pattern is the ``ByteLevel`` pre-tokenizer's own. Any other is a ``Split`` on its regex
    (as Oniguruma must be given it, ``SplitPattern.hf_regex``) that keeps the matches, each a piece,
    and drops what no match covers, as ``regex.findall`` (and tiktoken) do: ``invert`` makes the
    matches the pieces kept and ``Removed`` drops the rest. ``ByteLevel`` then only maps bytes.
    """
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    added = [
        {"id": i, "content": token, **flags}
        for token, i in sorted(special_ids.items(), key=lambda item: item[1])
    ]
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    pre_tokenizer: dict = {"type": "ByteLevel", **byte_level}
    if pattern != GPT2:
        regex = pattern.hf_regex or pattern.regex
        split = {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Removed", "invert": True}
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [split, {**pre_tokenizer, "use_regex": False}]}
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": _vocab_entries(vocab, special_ids),
            "merges": [f"{token_to_str(a)} {token_to_str(b)}" for a, b in merges],
        },
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


ROLES = ("bos_token", "eos_token", "pad_token")  # what transformers calls a special token's role


def token_roles(
    special_tokens: Collection[str], given: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """Which special token is ``bos_token``, ``eos_token`` and ``pad_token`` for ``transformers``: those
    ``given`` (each one of the special tokens), else ``<|endoftext|>``, where it is one, as both bos
    and eos, as GPT-2's files say.

    >>> token_roles(["<|endoftext|>", "<|pad|>"], {"pad_token": "<|pad|>"})
    {'bos_token': '<|endoftext|>', 'eos_token': '<|endoftext|>', 'pad_token': '<|pad|>'}
    >>> token_roles(["<|endoftext|>"], {"eos_token": "<|eos|>"})
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: eos_token='<|eos|>' is not one of the special tokens (['<|endoftext|>'])
    """
    roles = {"bos_token": EOT, "eos_token": EOT} if EOT in special_tokens else {}
    for role, token in (given or {}).items():
        if token is None:
            continue
        if token not in special_tokens:
            raise BpeDaskError(
                f"{role}={token!r} is not one of the special tokens ({list(special_tokens)!r})"
            )
        roles[role] = token
    return {role: roles[role] for role in ROLES if role in roles}


def tokenizer_config_json(special_ids: Mapping[str, int], roles: Mapping[str, str]) -> str:
    """``transformers``' ``tokenizer_config.json`` beside ``tokenizer.json``: a fast tokenizer whose
    special tokens have ``roles``, and decoding that gives the text back as it was (no clean-up of
    spaces)."""
    flags = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
    config = {
        "added_tokens_decoder": {str(i): {"content": token, **flags} for token, i in special_ids.items()},
        **roles,
        "clean_up_tokenization_spaces": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def special_tokens_map_json(roles: Mapping[str, str]) -> str:
    """``transformers``' ``special_tokens_map.json``: each role's special token."""
    return json.dumps(dict(roles), indent=2, ensure_ascii=False) + "\n"


def special_tokens_in(tokenizer_json_text: str) -> list[str]:
    """The special tokens a Hugging Face ``tokenizer.json`` registers, in id order."""
    added = json.loads(tokenizer_json_text).get("added_tokens", [])
    return [t["content"] for t in sorted(added, key=lambda t: t["id"]) if t.get("special")]


def pattern_in(tokenizer_json_text: str) -> SplitPattern:
    """The split pattern of a ``tokenizer.json`` that ``tokenizer_json`` wrote (a built-in one when
    its regex is one's)."""
    pre_tokenizer = json.loads(tokenizer_json_text).get("pre_tokenizer") or {}
    if pre_tokenizer.get("type") == "ByteLevel" and pre_tokenizer.get("use_regex", True):
        return GPT2
    steps = (
        pre_tokenizer.get("pretokenizers", []) if pre_tokenizer.get("type") == "Sequence" else [pre_tokenizer]
    )
    regexes = [step.get("pattern", {}).get("Regex") for step in steps if step.get("type") == "Split"]
    if len(regexes) != 1 or not isinstance(regexes[0], str):
        raise ValueError("its pre_tokenizer is not a split pattern bpe-dask writes")
    return split_pattern(regexes[0])


# The model options of a tokenizer.json that encodes otherwise than its merges alone, and what each does.
_NOT_BYTE_LEVEL = {
    "ignore_merges": "words in its vocabulary are taken whole, merges ignored",
    "byte_fallback": "it falls back to byte tokens",
    "continuing_subword_prefix": "it marks word pieces with a prefix",
    "end_of_word_suffix": "it marks word ends with a suffix",
}


def parse_tokenizer_json(text: str) -> tuple[Vocab, Merges, list[str], SplitPattern]:
    """The vocabulary, merges, special tokens and split pattern of a Hugging Face ``tokenizer.json`` of
    the byte-level BPE kind (GPT-2's, or what ``tokenizer_json`` writes); a ``ValueError`` says why
    another kind is not one (a normalizer, merges ignored for words in the vocabulary, byte fallback:
    each encodes otherwise than its merges alone)."""
    document = json.loads(text)
    model = document.get("model") or {}
    if model.get("type") != "BPE":
        raise ValueError(f"its model is {model.get('type')!r}, not BPE")
    for key, what in _NOT_BYTE_LEVEL.items():
        if model.get(key):
            raise ValueError(f"{what} ({key}), not byte-level BPE")
    if document.get("normalizer"):
        raise ValueError("it normalizes text before splitting it, not byte-level BPE")
    pre_tokenizer = document.get("pre_tokenizer") or {}
    if any(step.get("add_prefix_space") for step in [pre_tokenizer, *pre_tokenizer.get("pretokenizers", [])]):
        raise ValueError("it adds a space before the text (add_prefix_space), which bpe-dask does not")
    special_tokens = special_tokens_in(text)
    vocab = parse_vocab_json(json.dumps(model.get("vocab", {})), special_tokens)
    for added in document.get("added_tokens", []):  # some files register them apart from the model's vocab
        if added.get("special"):
            vocab.setdefault(added["id"], added["content"].encode("utf-8"))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model.get("merges", [])]
    if any(len(m) != 2 for m in merges):
        raise ValueError("a merge is not two tokens")
    return vocab, [(str_to_token(a), str_to_token(b)) for a, b in merges], special_tokens, pattern_in(text)


def tiktoken_bpe(ranks: Mapping[bytes, int]) -> str:
    """The text of a tiktoken rank file (``tiktoken.load.load_tiktoken_bpe`` reads it): each token's
    bytes in base64, a space and its rank, one a line, by rank."""
    return "".join(
        f"{base64.b64encode(token).decode()} {rank}\n"
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    )


def parse_tiktoken_bpe(text: str) -> tuple[Vocab, Merges]:
    """The vocabulary and merges of a tiktoken rank file (``tiktoken_bpe``'s format, as
    ``load_tiktoken_bpe`` reads it): each rank an id, and each token of several bytes made by the
    merge of its last join when its bytes are merged by tiktoken's rule with the lower ranks alone.
    A token that is not the join of two of lower rank is a ``ValueError``.

    >>> parse_tiktoken_bpe(tiktoken_bpe({**{bytes([b]): b for b in range(256)}, b"hi": 256, b"hi!": 257}))[1]
    [(b'h', b'i'), (b'hi', b'!')]
    """
    ranks: dict[bytes, int] = {}
    for line in text.splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    merges: Merges = []
    lower: dict[bytes, int] = {}
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = _last_join(token, lower)
            if parts is None:
                raise ValueError(f"token {rank} ({token!r}) is not the join of two tokens of lower rank")
            merges.append(parts)
        lower[token] = rank
    return {rank: token for token, rank in ranks.items()}, merges


def _last_join(token: bytes, ranks: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
    """The two parts tiktoken's rule leaves of ``token``'s bytes with ``ranks`` (the neighbours whose
    join ranks lowest joined first, the leftmost of equals), or None for more than two."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        joins = [(ranks.get(a + b), i) for i, (a, b) in enumerate(itertools.pairwise(parts))]
        best = min(((r, i) for r, i in joins if r is not None), default=None)
        if best is None:
            return None
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def tiktoken_ranks(vocabulary: Vocabulary) -> dict[bytes, int]:
    """The ``mergeable_ranks`` of a ``tiktoken.Encoding`` that encodes as ``vocabulary`` does (its
    special tokens go apart: ``special_ids``), or a ``BpeDaskError`` saying why none does. The ids
    are the ranks when four conditions hold, checked here; why tiktoken then encodes as
    ``Vocabulary.merged`` does: docs/exactness.md#tiktokens-ranks.

    >>> vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"hi"}
    >>> tiktoken_ranks(Vocabulary(vocab, [(b"h", b"i")]))[b"hi"]
    256
    >>> tiktoken_ranks(Vocabulary({**vocab, 257: b"hi"}, [(b"h", b"i")]))
    Traceback (most recent call last):
    bpe_dask.errors.BpeDaskError: ids 256 and 257 hold the same bytes b'hi'
    """
    specials = set(vocabulary.special_ids.values())
    ranks: dict[bytes, int] = {}
    for i, token in sorted(vocabulary.vocab.items()):
        if i in specials:
            continue
        if token in ranks:
            raise BpeDaskError(f"ids {ranks[token]} and {i} hold the same bytes {token!r}")
        ranks[token] = i
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise BpeDaskError(f"byte {missing[0]} is not a token")
    longer = [token for token in ranks if len(token) > 1]  # in id order
    made = [a + b for a, b in vocabulary.merges]
    if longer != made:
        raise BpeDaskError("its tokens of several bytes are not, in id order, what its merges make")
    for (a, b), token in zip(vocabulary.merges, made, strict=True):
        rank = ranks[token]
        if not (ranks.get(a, rank) < rank and ranks.get(b, rank) < rank):
            raise BpeDaskError(f"merge {a!r} {b!r} joins what is no token before {token!r}")
        if vocabulary.merged(token) != (rank,):
            raise BpeDaskError(f"its merges do not make {token!r} from its own bytes")
    return ranks
