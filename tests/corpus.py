"""Deterministic generators of nasty test corpora for BPE training.

Every generator takes a seed and uses its own `random.Random`, so the same
arguments always give the same text. All output is plain `str`; tests write it
with ``newline=""`` so CR/CRLF survive unchanged.
"""

from __future__ import annotations

import random

EOT = "<|endoftext|>"
OVERLAPPING_SPECIALS = [EOT, EOT + EOT]
WEIRD_SPECIALS = ["<|end of text|>", "<|fin|é>"]
# Self-overlapping ("<|>" is both prefix and suffix) and mutually overlapping specials:
# which occurrences match depends on the left-to-right, longest-first scan.
BORDERED_SPECIALS = ["<|>|<|>", "|><|"]

LATIN = [
    "café",
    "naïve",
    "Zürich",
    "façade",
    "Ångström",
    "straße",
    "ǅemal",
    "crème",
    "brûlée",
    "élan",
]
CYRILLIC = ["Привет", "мир", "хорошо", "ёжик", "Съешь", "ещё", "этих", "булок"]
GREEK = ["Καλημέρα", "κόσμε", "ψυχή", "Ωμέγα", "λόγος", "ΣΊΣΥΦΟΣ"]
CJK = ["你好世界", "日本語のテキスト", "한국어", "漢字", "カタカナ", "中文，标点。"]
ARABIC = ["مرحبا", "بالعالم", "السلام عليكم", "كتاب"]
DEVANAGARI = ["नमस्ते", "दुनिया", "हिन्दी", "क्षत्रिय"]
ASTRAL = ["𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𐍈𐌰𐌹", "𝟘𝟙𝟚"]
EMOJI = [
    "👍",
    "👍🏽",
    "👋🏿",
    "👨\u200d👩\u200d👧\u200d👦",
    "🏳️\u200d🌈",
    "❤️",
    "🇺🇸",
    "1️⃣",
    "🤷\u200d♀️",
    "😀😀😀",
]
COMBINING = [
    "e\u0301",
    "n\u0303o",
    "a\u0308\u0304",
    "Z\u0335\u0321\u0327a\u0336lgo",
    "\u0301\u0301",
]
CONTRACTIONS = [
    "it's",
    "don't",
    "they're",
    "we've",
    "I'm",
    "you'll",
    "he'd",
    "IT'S",
    "DON'T",
    "'S",
    "'s",
    "'ll've",
    "rock'n'roll",
    "o'clock",
    "’s",
    "''",
    "'",
    "'re's",
    "y'all'd",
]
NUMBERS = [
    "123",
    "3.14",
    "1,000,000",
    "٣٤٥",
    "²³",
    "½",
    "Ⅻ",
    "abc123def",
    "0x1F",
    "2024-01-01",
    "v2",
    "42nd",
    "00000",
]
PUNCT = [
    "...",
    "!!!",
    "?!",
    "—",
    "–-",
    "«»",
    "「」",
    "、",
    "。",
    "$$$",
    "<<>>",
    "<|",
    "|>",
    "<|endoftext",
    "|endoftext|>",
    "<|endof<|endoftext|>text|>",
    "(){}[]",
    "#@!",
    "\\",
    '"quoted"',
    "`code`",
    "~~",
    "*",
]
WHITESPACE = [
    " ",
    "  ",
    "   ",
    "\t",
    "\t\t",
    "\n",
    "\n\n",
    "\n\n\n",
    "\r\n",
    "\r\n\r\n",
    "\r",
    " \r ",
    "\u00a0",
    "\u2003",
    "\u3000",
    "\u2028",
    "\u2029",
    "\u0085",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x1f",
    " \n ",
    "\n ",
    " \t\n",
    "\u00a0 ",
    " \u00a0",
    "\u200b",
    "\ufeff",
]
CONTROL = ["\x00", "\x01", "\x07", "\x1b[0m", "\x7f", "\x00\x00", "a\x00b"]

FRAGMENT_POOLS = [
    LATIN,
    CYRILLIC,
    GREEK,
    CJK,
    ARABIC,
    DEVANAGARI,
    ASTRAL,
    EMOJI,
    COMBINING,
    CONTRACTIONS,
    NUMBERS,
    PUNCT,
    CONTROL,
]


def make_vocabulary(rng: random.Random, n: int) -> list[str]:
    """Random 'words' built from syllables of several scripts (mostly Latin)."""
    syllables = [
        "th",
        "e",
        "an",
        "in",
        "er",
        "on",
        "re",
        "st",
        "ing",
        "al",
        "ed",
        "ou",
        "s",
        "t",
        "a",
        "o",
        "ка",
        "но",
        "ре",
        "λο",
        "γο",
        "é",
        "ü",
        "日",
        "本",
        "न",
        "म",
        "स्",
        "12",
        "7",
    ]
    words: list[str] = []
    while len(words) < n:
        w = "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.1:
            w = w.capitalize()
        if rng.random() < 0.05:
            w += rng.choice(["'s", "'S", "'ll", "'re", "n't", "'ve", "'m", "'d"])
        if w not in words:
            words.append(w)
    return words


def zipf_words(rng: random.Random, vocab: list[str], k: int, s: float = 1.1) -> list[str]:
    """Draw `k` words from `vocab` with Zipf-like weights 1 / rank**s."""
    weights = [1.0 / (r + 1) ** s for r in range(len(vocab))]
    return rng.choices(vocab, weights=weights, k=k)


def nasty_document(rng: random.Random, vocab: list[str], n_items: int) -> str:
    """One document mixing frequent words with fragments from every nasty pool."""
    parts: list[str] = []
    for _ in range(n_items):
        r = rng.random()
        if r < 0.55:
            parts.append(zipf_words(rng, vocab, 1)[0])
        else:
            parts.append(rng.choice(rng.choice(FRAGMENT_POOLS)))
        r = rng.random()
        if r < 0.6:
            parts.append(" ")
        elif r < 0.75:
            parts.append(rng.choice(WHITESPACE))
        elif r < 0.85:
            parts.append(rng.choice(PUNCT[:10]) + " ")
        # else: glue the next item directly to this one
    return "".join(parts)


def join_with_specials(rng: random.Random, docs: list[str], specials: list[str]) -> str:
    """Join docs with special tokens: adjacent runs, next to whitespace, at both ends."""

    def sep() -> str:
        t = rng.choice(specials)
        return rng.choice(
            [
                t,
                t,
                t + rng.choice(specials),
                "\n" + t,
                t + "\n",
                " " + t + " ",
                t * 3,
                "\r\n" + t + "\r\n",
                "\u00a0" + t,
                t + "\t",
                "\n\n" + t + "\n\n",
            ]
        )

    out = [sep()]
    for i, doc in enumerate(docs):
        if i:
            out.append(sep())
        out.append(doc)
    out.append(sep())
    return "".join(out)


def mixed_corpus(seed: int, n_docs: int, special: str | None = EOT) -> str:
    """Multilingual/emoji/whitespace/control-char documents joined by `special`.

    With `special=None` the documents are joined by blank lines (the literal text
    "<|endoftext|>" may still occur inside documents, as ordinary text).
    """
    rng = random.Random(seed)
    vocab = make_vocabulary(rng, 120)
    docs = [nasty_document(rng, vocab, rng.randint(0, 60)) for _ in range(n_docs)]
    if special is None:
        return "\n\n".join(docs)
    return join_with_specials(rng, docs, [special])


def words_corpus(seed: int, n_words: int, special: str | None = EOT, vocab_words: int = 300) -> str:
    """Zipf-distributed words (so BPE has real frequent pairs), with light punctuation."""
    rng = random.Random(seed)
    vocab = make_vocabulary(rng, vocab_words)
    parts: list[str] = []
    for w in zipf_words(rng, vocab, n_words):
        parts.append(w)
        r = rng.random()
        if special is not None and r < 0.02:
            parts.append(rng.choice([special, "\n" + special + "\n", special + special]))
        elif r < 0.08:
            parts.append(rng.choice([".", ",", "!", "?", ";"]) + rng.choice([" ", "\n", "\r\n", "\n\n"]))
        elif r < 0.1:
            parts.append(rng.choice(["  ", "\t", "\n", "\u00a0", "\r"]))
        else:
            parts.append(" ")
    return "".join(parts)


def multi_special_corpus(seed: int, n_docs: int, specials: list[str]) -> str:
    """Like `mixed_corpus`, but documents are separated by a random choice of `specials`."""
    rng = random.Random(seed)
    vocab = make_vocabulary(rng, 100)
    docs = [nasty_document(rng, vocab, rng.randint(0, 50)) for _ in range(n_docs)]
    return join_with_specials(rng, docs, specials)


def overlapping_specials_corpus(seed: int, n_docs: int) -> str:
    """Corpus for specials `OVERLAPPING_SPECIALS` (one is a prefix/repeat of the other)."""
    return multi_special_corpus(seed, n_docs, OVERLAPPING_SPECIALS)


def weird_specials_corpus(seed: int, n_docs: int) -> str:
    """Corpus for `WEIRD_SPECIALS` (special tokens containing a space and non-ASCII)."""
    text = multi_special_corpus(seed, n_docs, WEIRD_SPECIALS)
    # Near-misses that must stay ordinary text.
    return text + " <|end of text| <|fin|e> <|fin|é <|end\u00a0of text|>" + WEIRD_SPECIALS[1]


def bordered_specials_corpus(seed: int, n_docs: int) -> str:
    """Corpus for `BORDERED_SPECIALS`: documents separated by runs of overlapping occurrences."""
    rng = random.Random(seed)
    vocab = make_vocabulary(rng, 80)
    pieces = [*BORDERED_SPECIALS, "<|>", "|", "<", ">", "|<|>|", " ", "\n", "a"]
    out: list[str] = []
    for _ in range(n_docs):
        out.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))))
        out.append(nasty_document(rng, vocab, rng.randint(0, 30)))
    return "".join(out)


NASTY_ALPHABET = [
    "a",
    "b",
    "e",
    "s",
    "S",
    "t",
    "1",
    "2",
    " ",
    " ",
    " ",
    "\n",
    "\r",
    "\r\n",
    "\t",
    "\u00a0",
    "'",
    "'",
    "é",
    "e\u0301",
    "👍",
    "👍🏽",
    "\u3000",
    ".",
    "!",
    "\x00",
]


def nasty_string(seed: int, length: int, special: str | None = EOT) -> str:
    """A short random string over `NASTY_ALPHABET` (plus `special`, if given)."""
    rng = random.Random(seed)
    alphabet = NASTY_ALPHABET + ([special, special] if special else [])
    return "".join(rng.choice(alphabet) for _ in range(length))


def random_lowercase_words(n_bytes: int = 4_000_000) -> bytes:
    """Random lowercase words (letters at English-like rates, one space in about seven bytes, a line
    end in 500): 4 MB hold some 300,000 unique words, seconds to count and to merge."""
    import numpy as np

    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"etaoinshrdlucmfwypvbgkjqxz", np.uint8)
    weights = 1 / np.arange(1, 27) ** 0.9
    text = letters[rng.choice(26, size=n_bytes, p=weights / weights.sum())]
    text[rng.random(text.size) < 0.14] = ord(" ")
    text[rng.random(text.size) < 0.002] = ord("\n")
    return text.tobytes()
