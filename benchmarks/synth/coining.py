"""Coined words: a vocabulary rank in, a made-up word out, a pure function of (salt, rank) so that
every process agrees; and the small word forms (capitals, articles, foreign spellings) the
generators share."""

from __future__ import annotations

import math
import random
from functools import lru_cache

from synth.words import OWT_COMMON, OWT_FOREIGN, TS_ADJECTIVES, TS_NOUNS, bars, words_of

_M64 = (1 << 64) - 1

# Syllable pieces, repeated to weight them; the first of each list are also the likeliest picks.
_ONSETS = bars(
    "|||t|s|r|l|n|m|d|c|p|b|h|f|g|w|v|k|j|t|s|r|l|n|m|d|c|p|b|st|tr|pr|br|ch|sh|th|cr|gr|pl|bl|fl|cl"
    "|dr|fr|sp|sc|qu|wh|ph|str|sl|sm|sn|sw|z|y"
)
_INNER_ONSETS = bars("t|s|r|l|n|m|d|c|p|b|v|g|f|t|r|l|n|m|d|st|tr|pr|ch|sh|th|gr|pl|bl|cl|qu")
_SIMPLE_ONSETS = bars("t|s|r|l|n|m|d|c|p|b|g|v|f")
_NUCLEI = bars("a|e|i|o|a|e|i|o|u|a|e|i|o|u|ea|ou|ai|ee|oo|y|ie|au|oi")
_CODAS = bars("|||n|r|s|t|l|d|m|n|r|s|t|nt|nd|st|ng|ck|ll|rt|ct|ss|x|sh|th|ch|mp|rd|nk")
_TS_ONSETS = bars("|b|d|f|g|h|j|k|l|m|n|p|r|s|t|w|b|d|l|m|p|s|t|sn|st|fl|gl|bl|pl|tr|sl|sp|z")
_TS_NUCLEI = bars("a|e|i|o|u|a|e|i|o|u|oo|ee|ay|ow")
_TS_CODAS = bars("|||n|t|p|g|m|d|n|t|ck|ll|sh|ng|mp|nd")
_PREFIXES = bars("re|un|in|de|dis|pre|con|com|pro|over|under|inter|anti|non|sub|mis|out|trans|co")
_SUFFIXES = bars(
    "s|s|s|ed|ed|ing|ing|er|ers|ly|s|ed|ing|ly|er|tion|tions|al|ity|ment|ness|ic|ous|ive|able|ist|ism|ize"
    "|ful|less|est|ian|ary|ory|ence|ance|ent|ant|ure|ology|ship|hood|ate|ated|ine|ia|ments|ings|ally"
)
_TS_SUFFIXES = bars("s|s|y|ie|er|le|ish|ing|ed|est|ly|s|y|er")
_NAME_ENDINGS = words_of("son ton ley ford man er ez ski berg stein a o i ia ina elli ova ov ard is us")
_VOWELS = frozenset("aeiouy")


def _mix(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of an integer."""
    x = (x * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


class _Hash:
    """A tiny generator seeded by integers: fast, stateless between words, platform-independent."""

    __slots__ = ("state",)

    def __init__(self, salt: int, key: int) -> None:
        self.state = _mix((salt << 48) ^ key)

    def uniform(self) -> float:
        """A float in [0, 1)."""
        self.state = state = (self.state * 6364136223846793005 + 1442695040888963407) & _M64
        return (state >> 11) * (1.0 / 9007199254740992.0)

    def pick(self, items: list[str], skew: float) -> str:
        """An item, the first ones more likely the larger ``skew`` (1 is uniform)."""
        self.state = state = (self.state * 6364136223846793005 + 1442695040888963407) & _M64
        return items[int(len(items) * ((state >> 11) * (1.0 / 9007199254740992.0)) ** skew)]


def _syllables(h: _Hash, count: int, onsets: list[str], nuclei: list[str], codas: list[str]) -> str:
    """``count`` syllables that join without vowel clashes or impossible consonant piles."""
    parts = []
    coda = ""
    for i in range(count):
        if i == 0:
            onset = h.pick(onsets, 1.3)
        elif coda:
            onset = "" if h.uniform() < 0.25 else h.pick(_SIMPLE_ONSETS, 1.5)
        else:
            onset = h.pick(_INNER_ONSETS, 1.5)
        nucleus = h.pick(nuclei, 1.3 if i == 0 and not onset else 1.0)
        last = i == count - 1
        coda = h.pick(codas, 1.2) if last or h.uniform() < 0.35 else ""
        if not last and len(coda) > 1:
            coda = coda[0]
        parts.append(onset + nucleus + coda)
    return "".join(parts)


def affix(word: str, suffix: str) -> str:
    """``word`` + ``suffix``, dropping a final vowel before a suffix's vowel (rate + ing)."""
    if word[-1] in _VOWELS and suffix[0] in _VOWELS:
        return word[:-1] + suffix
    if word[-1] == "s" and suffix == "s":
        return word + "es"
    return word + suffix


_OWT_BASES = [w for w in OWT_COMMON if len(w) >= 4]
_TS_BASES = [w for w in TS_NOUNS + TS_ADJECTIVES if len(w) >= 3]


def coined_word(rank: int, salt: int = 1) -> str:
    """A lowercase made-up word for a vocabulary rank: a real word with affixes or a string of
    syllables, maybe with a prefix and a suffix; rarer ranks tend to be longer."""
    h = _Hash(salt, rank)
    rarity = min(1.0, max(0.0, (math.log10(rank + 1) - 3) / 3))  # 0 at rank 1000, 1 at a million
    if h.uniform() < 0.3:
        word = h.pick(_OWT_BASES, 1.0)
        if h.uniform() < 0.2 + 0.3 * rarity:
            word = h.pick(_PREFIXES, 1.5) + word
        return affix(word, h.pick(_SUFFIXES, 1.3)) if h.uniform() < 0.8 else word
    u = h.uniform()
    count = (
        1 if u < 0.45 - 0.3 * rarity else 2 if u < 0.9 - 0.3 * rarity else 3 if u < 0.98 - 0.1 * rarity else 4
    )
    word = _syllables(h, count, _ONSETS, _NUCLEI, _CODAS)
    if h.uniform() < 0.04 + 0.1 * rarity:
        word = h.pick(_PREFIXES, 1.5) + word
    if h.uniform() < 0.2 + 0.25 * rarity:
        word = affix(word, h.pick(_SUFFIXES, 1.3))
    return word


def coined_simple_word(rank: int, salt: int = 2) -> str:
    """A short made-up or derived word of the kind children's stories use."""
    h = _Hash(salt, rank)
    if h.uniform() < 0.3:
        return affix(h.pick(_TS_BASES, 1.0), h.pick(_TS_SUFFIXES, 1.0))
    word = _syllables(h, 1 if h.uniform() < 0.3 else 2, _TS_ONSETS, _TS_NUCLEI, _TS_CODAS)
    if len(word) < 3:
        word += h.pick(_TS_CODAS[3:], 1.0)
    if h.uniform() < 0.2:
        word = affix(word, h.pick(_TS_SUFFIXES, 1.0))
    return word


def coined_name(rank: int, salt: int = 3) -> str:
    """A capitalised made-up proper noun (person, place, product)."""
    h = _Hash(salt, rank)
    word = _syllables(h, 1 if h.uniform() < 0.35 else 2, _ONSETS, _NUCLEI, _CODAS)
    if h.uniform() < 0.6:
        word = affix(word, h.pick(_NAME_ENDINGS, 1.3))
    return word[0].upper() + word[1:]


@lru_cache(maxsize=8)
def lexicon(real: tuple[str, ...], size: int, kind: str) -> list[str]:
    """Words by rank (index 0 unused): ``real`` ones first, then coined, ``size`` in all."""
    coin = {"word": coined_word, "simple": coined_simple_word, "name": coined_name}[kind]
    words = ["", *real]
    words.extend(coin(rank) for rank in range(len(words), size + 1))
    return words


def heaps(k: float, beta: float, tokens: float, floor: int) -> int:
    """Vocabulary size K * tokens**beta (Heaps' law), at least ``floor``."""
    return max(floor, int(k * max(tokens, 1.0) ** beta))


def cap(word: str) -> str:
    return word[:1].upper() + word[1:]


def article(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


_ACCENTS = {
    "a": "\u00e1\u00e0\u00e4\u00e2\u00e3\u00e5",
    "e": "\u00e9\u00e8\u00eb\u00ea\u0119",
    "i": "\u00ed\u00ef\u00ee",
    "o": "\u00f3\u00f6\u00f4\u00f8\u00f5",
    "u": "\u00fa\u00fc\u00fb\u016f",
    "n": "\u00f1\u0144",
    "c": "\u00e7\u010d",
    "s": "\u0161\u015b",
    "z": "\u017e\u017c",
}
_TO_CYRILLIC = str.maketrans(
    "abvgdezijklmnoprstufhcywqx",
    "\u0430\u0431\u0432\u0433\u0434\u0435\u0437\u0438\u0439\u043a\u043b\u043c\u043d"
    "\u043e\u043f\u0440\u0441\u0442\u0443\u0444\u0445\u0446\u044b\u0432\u043a\u0436",
)
_CJK = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对"
    "可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同"
    "東京都市場新聞社会経済政治日本語本当時間電話"
)
PUNCTUATION = bars(
    ".|,|\"|)|(|:|;|!|?|-|'|...|--|]|[|/|*|\u201d|\u201c|\u2019|\u2014|&|#|%|+|=|>|<|_|~|$|@|^|`|{|}|\\"
)
WHITESPACE = ("\n", "\n\n", "  ", "\t", "\n\n\n", " \n", "    ", "\u00a0", " \n\n", "\r\n", "\n  ")


def foreign_word(rng: random.Random, word: str) -> str:
    """A non-ASCII word: from a fixed list, or ``word`` accented, in Cyrillic, or a CJK run."""
    r = rng.random()
    if r < 0.3:
        return OWT_FOREIGN[int(rng.random() * len(OWT_FOREIGN))]
    if r < 0.7:
        letters = list(word)
        spots = [i for i, ch in enumerate(letters) if ch in _ACCENTS]
        for i in rng.sample(spots, min(len(spots), rng.randrange(1, 3))):
            letters[i] = rng.choice(_ACCENTS[letters[i]])
        word = "".join(letters)
        return cap(word) if rng.random() < 0.5 else word
    if r < 0.85:
        word = word.translate(_TO_CYRILLIC)
        return cap(word) if rng.random() < 0.5 else word
    return "".join(rng.choice(_CJK) for _ in range(rng.randrange(1, 5)))
