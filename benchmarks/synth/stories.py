"""TinyStories-like stories: short children's stories from a few thousand simple words and names,
short sentences and dialogue."""

from __future__ import annotations

import random
import re

from synth import EOT
from synth.coining import affix, article, cap, heaps, lexicon
from synth.words import (
    TS_ADJECTIVES,
    TS_ANIMALS,
    TS_COLORS,
    TS_DRINKS,
    TS_FEELINGS,
    TS_FOODS,
    TS_INTERJECTIONS,
    TS_NAMES_BOYS,
    TS_NAMES_GIRLS,
    TS_NOUNS,
    TS_NUMBERS,
    TS_PLACES,
    TS_SAY,
    TS_TOYS,
    TS_VERBS,
)

TS_BYTES_PER_WORD = 5.2
TS_RARE_K, TS_RARE_BETA = 210.0, 0.3

TS_OPENINGS = (
    "Once upon a time, there was a {a} {kid} named {N}.",
    "Once upon a time there was a little {kid} named {N}.",
    "Once upon a time, in a {a} {place}, there lived {a_animal} named {N}.",
    "One day, a {a} {kid} named {N} went to the {place}.",
    "There was once a {a} {kid} called {N}.",
    "{N} was a {a} {kid} who loved to {v}.",
    "Once upon a time, there was a {kid} named {N}. {He} was {num} years old.",
    "Once there was {a_animal} named {N}. {He} lived in a {a} {place}.",
)
TS_BODY = (
    "{N} loved to play with {his} {toy}.",
    "One day, {N} saw {a_adj_thing} in the {place}.",
    "{He} wanted to {v} it, but it was too {a}.",
    "{He} said, {q}",
    "{N}'s mom said, {q}",
    "{q} said {N}.",
    "{F} smiled and said, {q}",
    "{F} {say}, {q}",
    "{N} {say}, {q}",
    "They played together all day.",
    "The {thing} was very {adj}.",
    "{He} felt {f}.",
    "{N} and {F} went to the {place} to {v}.",
    "{He} looked at the {thing} and smiled.",
    "Suddenly, {a_n} came out of the {place}.",
    "{He} did not know what to do.",
    "{He} didn't want to {v} the {thing}.",
    "{N} tried to {v}, but {he} couldn't.",
    "The {animal} was {f} and ran away.",
    "{He} ran to {his} mom and told her about the {thing}.",
    "They {vd} and {vd} until the sun went down.",
    "{N} thought, {q}",
    "It was {a_n}!",
    "{He} found {a_n} under the {n}.",
    "The {animal} said, {q}",
    "{N} gave the {thing} to {F}.",
    "{F} was very {f}.",
    "They had lots of fun.",
    "{He} put the {thing} in {his} {n}.",
    "Every day, {N} would {v} with {his} {toy}.",
    "{N} {vd} the {thing} and it was {a}.",
    "The sun was shining and the birds were singing.",
    "{He} was so {f} that {he} {vd} all the way home.",
    "{N} asked {F}, {q}",
    "{F} nodded and they {vd} together.",
    "The {thing} was {color} and {a}.",
    "{N} picked up the {thing} and took it home.",
    "{He} showed it to {his} dad.",
    "Mom said, {q}",
    "{He} was scared, but {he} was also brave.",
    "They ate {food} and drank {drink}.",
    "{N} saw {a_animal}. The {animal} was {a} and {a}.",
    "{He} {vd} the {n} and the {n}.",
    "But the {thing} was not {adj} anymore.",
    "{N} had an idea.",
    "{He} went to the {place} and {vd}.",
    "The {n} was {a}, and {N} liked it very much.",
    "{N} and {his} {animal} played in the {place}.",
    "{He} said sorry to {F}.",
)
TS_ENDINGS = (
    "From that day on, {N} and {F} played together every day.",
    "{N} was very happy and {he} never forgot the {thing}.",
    "And they all lived happily ever after.",
    "The end.",
    "{N} learned to always {v} and to be {a}.",
    "That night, {N} went to bed with a big smile on {his} face.",
    "{He} learned that it is important to {v} and to be {a}.",
    "From then on, {N} always remembered to {v}.",
)
TS_QUOTES = (
    "{I}, look at the {thing}!",
    "Can I {v} with you?",
    "I want to {v} the {thing}!",
    "Let's go to the {place}!",
    "Thank you, {F}!",
    "Don't worry, I will help you.",
    "I'm sorry, {F}. I didn't mean to {v}.",
    "It's so {a}!",
    "We can {v} together.",
    "Be careful, {N}!",
    "What is that?",
    "Yes, you can {v} the {thing}.",
    "I'll {v} it for you.",
    "You're my best friend.",
    "We've got to {v}!",
    "I'm {f}.",
    "Where is my {thing}?",
    "{I}! The {thing} is so {a}.",
    "Please, can you help me {v}?",
    "Who are you?",
    "He's {a}!",
    "They're {vd} the {n}!",
)


_A_BEFORE_VOWEL = re.compile(r"\b([Aa]) (?=[aeiou])")


def _compile(template: str) -> list[tuple[bool, str]]:
    """A template as (is_slot, text) parts."""
    parts: list[tuple[bool, str]] = []
    rest = template
    while "{" in rest:
        before, _, rest = rest.partition("{")
        slot, _, rest = rest.partition("}")
        if before:
            parts.append((False, before))
        parts.append((True, slot))
    if rest:
        parts.append((False, rest))
    return parts


class Stories:
    """Stories like TinyStoriesV2's, rare-word tail sized for a corpus of ``target_bytes``."""

    RARE = 0.1  # chance that a freshly drawn noun, adjective or verb is a rare one

    def __init__(self, target_bytes: int) -> None:
        tokens = target_bytes / TS_BYTES_PER_WORD
        self.rare = lexicon((), heaps(TS_RARE_K, TS_RARE_BETA, tokens, 300), "simple")
        self.openings = [_compile(t) for t in TS_OPENINGS]
        self.body = [_compile(t) for t in TS_BODY]
        self.endings = [_compile(t) for t in TS_ENDINGS]
        self.quotes = [_compile(t) for t in TS_QUOTES]

    def _rare(self, rng: random.Random) -> str:
        """A rare word; P(rank) ~ rank**-0.5, flatter than Zipf, as if each story were prompted
        with a few words drawn from a long list (as TinyStories' were)."""
        return self.rare[1 + int((len(self.rare) - 1) * rng.random() ** 2)]

    def _pick(self, rng: random.Random, items: list[str], skew: float = 1.7) -> str:
        """A list item, the first ones likelier; now and then a rare word instead."""
        if rng.random() < self.RARE:
            return self._rare(rng)
        return items[int(len(items) * rng.random() ** skew)]

    def _verb(self, rng: random.Random) -> tuple[str, str]:
        if rng.random() < self.RARE:
            base = self._rare(rng)
            return base, affix(base, "ed")
        return TS_VERBS[int(len(TS_VERBS) * rng.random() ** 1.7)]

    def _fill(self, parts: list[tuple[bool, str]], cast: dict[str, str], rng: random.Random) -> str:
        out = []
        for is_slot, text in parts:
            if not is_slot:
                out.append(text)
            elif text in cast:
                out.append(cast[text])
            elif text == "a":
                out.append(self._pick(rng, TS_ADJECTIVES))
            elif text == "n":
                out.append(self._pick(rng, TS_NOUNS))
            elif text == "a_n":
                out.append(article(self._pick(rng, TS_ADJECTIVES) + " " + self._pick(rng, TS_NOUNS)))
            elif text == "v":
                out.append(self._verb(rng)[0])
            elif text == "vd":
                out.append(self._verb(rng)[1])
            elif text == "f":
                out.append(self._pick(rng, TS_FEELINGS, 1.3))
            elif text == "q":
                out.append(self._quote(cast, rng))
            else:
                items = {
                    "color": TS_COLORS,
                    "food": TS_FOODS,
                    "drink": TS_DRINKS,
                    "toy": TS_TOYS,
                    "num": TS_NUMBERS,
                    "I": TS_INTERJECTIONS,
                    "say": TS_SAY,
                }[text]
                out.append(items[int(len(items) * rng.random() ** 1.5)])
        return "".join(out)

    def _quote(self, cast: dict[str, str], rng: random.Random) -> str:
        inner = self._fill(self.quotes[int(rng.random() * len(self.quotes))], cast, rng)
        return cast["open"] + inner + cast["close"]

    def document(self, rng: random.Random) -> str:
        """One story of a few short paragraphs, then ``\\n<|endoftext|>\\n``."""
        girl = rng.random() < 0.5
        names = TS_NAMES_GIRLS if girl else TS_NAMES_BOYS
        hero = names[int(len(names) * rng.random() ** 1.5)] if rng.random() > 0.03 else cap(self._rare(rng))
        friends = TS_NAMES_BOYS if rng.random() < 0.5 else TS_NAMES_GIRLS
        friend = friends[int(len(friends) * rng.random() ** 1.5)]
        if friend == hero:
            friend = "Max" if hero != "Max" else "Sue"
        animal = self._pick(rng, TS_ANIMALS)
        typographic = rng.random() < 0.35
        cast = {
            "N": hero,
            "F": friend,
            "He": "She" if girl else "He",
            "he": "she" if girl else "he",
            "his": "her" if girl else "his",
            "kid": "girl" if girl else "boy",
            "thing": self._pick(rng, TS_NOUNS, 1.3),
            "animal": animal,
            "a_animal": article(animal),
            "place": self._pick(rng, TS_PLACES),
            "adj": self._pick(rng, TS_ADJECTIVES, 1.3),
            "open": "\u201c" if typographic else '"',
            "close": "\u201d" if typographic else '"',
        }
        cast["a_adj_thing"] = article(f"{cast['adj']} {cast['thing']}")
        target = int(rng.uniform(550, 1050))
        paragraphs = [[self._fill(self.openings[int(rng.random() * len(self.openings))], cast, rng)]]
        size = len(paragraphs[0][0])
        while size < target:
            sentence = self._fill(self.body[int(rng.random() * len(self.body))], cast, rng)
            if rng.random() < 0.25:
                paragraphs.append([])
            paragraphs[-1].append(sentence)
            size += len(sentence) + 1
        paragraphs[-1].append(self._fill(self.endings[int(rng.random() * len(self.endings))], cast, rng))
        text = _A_BEFORE_VOWEL.sub(r"\1n ", "\n".join(" ".join(p) for p in paragraphs))
        return text + "\n" + EOT + ("\n\n" if rng.random() < 0.02 else "\n")
