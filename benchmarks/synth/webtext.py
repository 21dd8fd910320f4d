"""OpenWebText-like articles: 2-8 KB web documents with titles, paragraphs and lists, a Zipf
vocabulary sized by Heaps' law for the corpus, names, numbers, URLs and some non-ASCII."""

from __future__ import annotations

import math
import random

from synth import EOT
from synth.coining import cap, foreign_word, heaps, lexicon
from synth.words import (
    EMOJI,
    OWT_ACRONYMS,
    OWT_COMMON,
    OWT_NAMES,
    OWT_ODD_PUNCTUATION,
    OWT_STARTERS,
    TLDS,
    words_of,
)

# Heaps' law for each kind's vocabulary: size = K * words**beta, with words ~ bytes / BYTES_PER_WORD.
OWT_BYTES_PER_WORD = 5.9
OWT_WORDS_K, OWT_WORDS_BETA = 330.0, 0.42
OWT_NAMES_K, OWT_NAMES_BETA = 90.0, 0.42

_OPEN_QUOTE = {'"': '"', "\u201c": "\u201d"}
_CONTRACTIONS = words_of(
    """
    it's don't I'm that's can't didn't doesn't isn't there's you're we're they're I've we've
    won't wasn't I'll we'll you'll he's she's let's aren't couldn't wouldn't he'd I'd they've
    """
)


class WebText:
    """Documents like OpenWebText's, vocabulary sized for a corpus of ``target_bytes``."""

    def __init__(self, target_bytes: int) -> None:
        tokens = target_bytes / OWT_BYTES_PER_WORD
        self.words = lexicon(tuple(OWT_COMMON), heaps(OWT_WORDS_K, OWT_WORDS_BETA, tokens, 2000), "word")
        self.names = lexicon(tuple(OWT_NAMES), heaps(OWT_NAMES_K, OWT_NAMES_BETA, tokens, 500), "name")
        self.log_words = math.log(len(self.words))
        self.log_names = math.log(len(self.names))

    def word(self, rng: random.Random) -> str:
        """A Zipf-distributed word (log-uniform rank: P(rank) ~ 1/rank)."""
        return self.words[int(math.exp(rng.random() * self.log_words))]

    def name(self, rng: random.Random) -> str:
        """A Zipf-distributed proper noun, sometimes a two-word one."""
        name = self.names[int(math.exp(rng.random() * self.log_names))]
        if rng.random() < 0.25:
            name += " " + self.names[int(math.exp(rng.random() * self.log_names))]
        return name

    @staticmethod
    def number(rng: random.Random) -> str:
        """Years, counts, decimals, prices, percentages, phone numbers, dates, times, IDs."""
        r = rng.random()
        if r < 0.22:
            return str(max(1200, 2024 - int(rng.expovariate(1 / 18))))
        if r < 0.50:
            return str(int(math.exp(rng.random() * math.log(1001))))
        if r < 0.58:
            return f"{int(math.exp(rng.random() * 5))}.{rng.randrange(100)}"
        if r < 0.66:
            dollars = int(math.exp(rng.random() * 12))
            symbol = rng.choice("$$$$\u20ac\u00a3")
            return (
                f"{symbol}{dollars:,}"
                if rng.random() < 0.6
                else f"{symbol}{dollars}.{rng.randrange(100):02d}"
            )
        if r < 0.73:
            return f"{rng.randrange(1, 100)}{'.' + str(rng.randrange(10)) if rng.random() < 0.3 else ''}%"
        if r < 0.80:
            return f"{int(math.exp(rng.random() * 21)):,}"
        if r < 0.84:
            area, mid, last = rng.randrange(200, 999), rng.randrange(100, 999), rng.randrange(10000)
            return f"({area}) {mid}-{last:04d}" if rng.random() < 0.4 else f"{area}-{mid}-{last:04d}"
        if r < 0.90:
            month, day = rng.randrange(1, 13), rng.randrange(1, 29)
            return rng.choice((f"{month}/{day}/{rng.randrange(1990, 2025)}", f"{month}:{day * 2 % 60:02d}"))
        return str(rng.randrange(10 ** rng.randrange(3, 12)))

    def url(self, rng: random.Random) -> str:
        """A web address built from words, sometimes with a date path or query."""
        host = self.word(rng) + (self.word(rng) if rng.random() < 0.5 else "")
        path = "-".join(self.word(rng) for _ in range(rng.randrange(1, 7)))
        if rng.random() < 0.3:
            path = f"{rng.randrange(2005, 2025)}/{rng.randrange(1, 13):02d}/{path}"
        url = f"http{'s' if rng.random() < 0.7 else ''}://{'www.' if rng.random() < 0.6 else ''}"
        url += f"{host}.{rng.choice(TLDS)}/{path}"
        if rng.random() < 0.15:
            url += f"?id={rng.randrange(10**6)}"
        return url

    def tag(self, rng: random.Random) -> str:
        """A hashtag or an @handle."""
        if rng.random() < 0.5:
            return "#" + "".join(cap(self.word(rng)) for _ in range(rng.randrange(1, 4)))
        handle = self.name(rng).replace(" ", "") + (str(rng.randrange(100)) if rng.random() < 0.4 else "")
        return "@" + (handle if rng.random() < 0.5 else handle.lower())

    def sentence(self, rng: random.Random) -> str:
        """One sentence: Zipf words with names, numbers, commas, contractions and other noise."""
        rand = rng.random
        words, log_words, exp = self.words, self.log_words, math.exp
        n = min(60, 3 + int(rng.lognormvariate(2.75, 0.5)))
        ws = [words[int(exp(rand() * log_words))] for _ in range(n)]
        while rand() < 0.5:
            ws[int(rand() * n)] = self.name(rng)
        while rand() < 0.25:
            ws[int(rand() * n)] = self.number(rng)
        while rand() < 0.15:
            ws[int(rand() * n)] = _CONTRACTIONS[int(len(_CONTRACTIONS) * rand() ** 2)]
        if rand() < 0.12:
            i = int(rand() * n)
            ws[i] = OWT_ACRONYMS[int(len(OWT_ACRONYMS) * rand() ** 2)]
        if rand() < 0.12:
            i = int(rand() * n)
            ws[i] += "'s" if rand() < 0.85 else "\u2019s"
        if rand() < 0.1:
            i = int(rand() * n)
            ws[i] = f"{ws[i]}-{words[int(exp(rand() * log_words))]}"
        if rand() < 0.015:
            i = int(rand() * n)
            ws[i] = foreign_word(rng, ws[i])
        while rand() < 0.55:
            i = int(rand() * (n - 1))
            if ws[i][-1].isalnum():
                ws[i] += ","
        if n > 6 and rand() < 0.06:
            i = int(rand() * (n - 3))
            ws[i] = "(" + ws[i]
            ws[i + 2] += ")"
        if n > 6 and rand() < 0.06:
            ws[int(rand() * (n - 1))] += rng.choice((" \u2014", "\u2014", " -", ";", ":", " \u2013"))
        if rand() < 0.6:
            ws[0] = OWT_STARTERS[int(len(OWT_STARTERS) * rand() ** 2)]
        if rand() < 0.02:
            i = int(rand() * n)
            ws[i] += OWT_ODD_PUNCTUATION[int(rand() * len(OWT_ODD_PUNCTUATION))]
        ws[0] = cap(ws[0])
        r = rand()
        end = "." if r < 0.86 else "?" if r < 0.92 else "!" if r < 0.96 else "..." if r < 0.98 else ":"
        if rand() < 0.004:
            end += " " + EMOJI[int(len(EMOJI) * rand() ** 2)]
        text = " ".join(ws) + end
        if rand() < 0.07:
            open_ = '"' if rand() < 0.7 else "\u201c"
            said = rng.choice(("said", "says", "told", "added", "wrote", "explained"))
            text = f"{open_}{text[:-1]},{_OPEN_QUOTE[open_]} {said} {self.name(rng)}."
        return text

    def paragraph(self, rng: random.Random) -> str:
        """A few sentences; now and then a list, a link or a tag."""
        if rng.random() < 0.06:
            marker = rng.choice(("-", "*", "\u2022", "#"))
            items = []
            for i in range(rng.randrange(2, 8)):
                item = self.sentence(rng)
                items.append(f"{i + 1}. {item}" if marker == "#" else f"{marker} {item}")
            return "\n".join(items)
        text = " ".join(self.sentence(rng) for _ in range(1 + int(rng.expovariate(1 / 2.5))))
        if rng.random() < 0.05:
            text += rng.choice((" Read more: ", " Source: ", " (", " See ", "\n\n")) + self.url(rng)
            if text.endswith(")"):
                text += ")"
        if rng.random() < 0.03:
            text += " " + " ".join(self.tag(rng) for _ in range(rng.randrange(1, 4)))
        return text

    def document(self, rng: random.Random) -> str:
        """An article of about 2-8 KB, maybe with a title line, ending with ``<|endoftext|>``."""
        target = min(20000, max(600, int(rng.lognormvariate(math.log(3800), 0.55))))
        parts = []
        if rng.random() < 0.6:
            title = " ".join(cap(self.word(rng)) for _ in range(rng.randrange(3, 11)))
            parts.append(title + rng.choice(("", "", ":", "?")))
        size = 0
        while size < target:
            paragraph = self.paragraph(rng)
            parts.append(paragraph)
            size += len(paragraph) + 2
        return "\n\n".join(parts) + EOT
