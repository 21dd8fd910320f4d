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
import math
import multiprocessing
import os
import random
import re
import sys
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

EOT = "<|endoftext|>"
KINDS = ("tinystories", "openwebtext")
CHUNK_BYTES = 4 << 20

# Heaps' law for each kind's vocabulary: size = K * words**beta, with words ~ bytes / BYTES_PER_WORD.
OWT_BYTES_PER_WORD = 5.9
OWT_WORDS_K, OWT_WORDS_BETA = 330.0, 0.42
OWT_NAMES_K, OWT_NAMES_BETA = 90.0, 0.42
TS_BYTES_PER_WORD = 5.2
TS_RARE_K, TS_RARE_BETA = 210.0, 0.3

# Counts tables: OpenWebText has about 2.5 billion pre-tokens and 4 million unique ones.
OWT_PRETOKENS, OWT_UNIQUE, COUNTS_HEAPS_BETA = 2.5e9, 4e6, 0.55
# The count curve ends below 1 (rounded up to 1), so the rarest third or so occur once.
LAST_RANK_COUNT = 0.45

_M64 = (1 << 64) - 1


# --------------------------------------------------------------------------------------------
# Word lists.  Real words first, roughly in order of frequency; coined words extend them.
# --------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """Whitespace-separated words, first occurrence kept, order preserved."""
    return list(dict.fromkeys(text.split()))


def _split_bars(text: str) -> list[str]:
    """``|``-separated items, repeats and empty ones kept (some items hold or are spaces)."""
    return text.split("|")


OWT_COMMON = _words(
    """
    the of and to a in is that for it as was with be by on not he I this are or his from at which
    but have an they you were her she there been one all we their has would when if so no will more
    can out up who them some what about said its into time than my only other new also two people
    like then these first could years any over after most may now just year made where much way many
    very did should back those even because well through before being three how our get world make
    between life day work both down own last here while good right see game team still government
    since great know around think say used long part off same number each high does another such
    going public under use go week school few found place home percent old city want season take need
    police company during every best without including little four five end million system several
    told until group help country show man next often although against university us called family
    point report according later health data second law set program local early among come away
    within left national political president business house things look something federal court war
    water power less money however might never days small put big side others came top past free
    already support again general case major too better real open per policy music story full market
    possible social rather series whether community student order lot film students making least
    women men children feel head development though information young research months history control
    having thing process almost half along known name below above today taking across move yet nothing
    far study area six enough keep started likely issue economic become once project level member
    private try form hard question close human job believe either food cost plan security fact means
    change got why really must lead players player games play going went took gave began seemed asked
    called based given shown held seen known become million billion percent dollars state states
    service services office officials official department military army forces attack death killed
    according reported including continue continued include includes provide provided making move
    moved return led let live living lives love went woman child children parents mother father son
    daughter wife husband friend friends member members leader leaders party parties vote votes voters
    election campaign candidate republican democratic senate congress bill rights freedom justice
    president minister prime foreign international global economy economic growth financial financial
    bank banks tax taxes trade jobs workers industry price prices cost costs pay paid income rate
    rates interest investment investors stock shares sales revenue profit profits deal deals contract
    technology software internet online digital data users user app apps phone phones computer
    network website site page post posts video videos media social news story stories article report
    reports science scientists study studies research researchers evidence results analysis model
    models energy climate environment environmental oil gas coal carbon emissions nuclear power
    health care medical hospital doctors patients disease drug drugs treatment cancer risk virus
    vaccine food water air land space earth sun light sea river island town village street road car
    cars train plane flight travel trip hotel restaurant coffee beer wine music song songs album band
    movie movies show shows series episode season character characters book books writer author
    art artist design style fashion sport sports football basketball baseball soccer league club
    coach fans win won lose lost match race title championship record score goal goals point points
    school schools teacher teachers students education college class classes course program programs
    church religious god faith culture language history future past present moment minute minutes hour
    hours night morning evening weekend month months today tomorrow yesterday early late recent recently
    young older new old small large big huge great good bad best worst better worse important
    different similar possible impossible likely available able free full simple easy difficult hard
    clear sure certain true false real main key strong weak serious special public private personal
    political economic social cultural human natural local national federal foreign american
    actually probably especially perhaps simply quickly usually finally certainly clearly nearly
    currently already directly exactly generally largely mostly quite rather together instead
    ago soon later often always sometimes never ever almost enough maybe indeed else anyway
    become becomes became bring brings brought build builds built buy bought call calls carry
    cause caused check choose chose come comes coming consider considered create created cut
    decide decided describe described design die died discuss discussed draw drive driving drop
    eat enjoy enter expect expected explain explained face fall fell fight fill finish follow
    following forget forgot gain grow grew grown happen happened hear heard hit hold hope hoped
    improve improved increase increased join joined kill learn learned leave leaving lie listen
    lose losing lost manage meet met miss mention mentioned need needed offer offered pass passed
    pick plan planned prepare prevent produce produced protect protected prove pull push raise
    raised reach reached read reduce reduced refuse release released remain remained remember
    remove removed replace replaced require required respond rise run running save saw seem sell
    send sent serve served share shared sign signed sit speak spoke spend spent stand stay stop
    stopped suggest suggested talk talked tell teach thought throw touch track treat turn turned
    understand wait walk watch wear win wish worry write wrote written
    ability access account action activity address advantage advice age agency agent agreement
    amount animal answer approach argument arm attention audience authority baby bag ball base
    basis battle bed behavior benefit bit blood board boat body box boy brain branch brand budget
    building camera capital career cell center century chance chapter charge chief choice citizen
    claim class client code collection color comment committee competition concern condition
    conference conflict connection context conversation copy corner council couple cover crime
    crisis crowd customer damage deal debate decade decision defense degree demand detail device
    difference difficulty direction director discussion distance doctor dog door dream duty
    effect effort element email employee end enemy engine entry episode equipment error event
    exchange exercise experience expert eye factor failure fall fan farm fear feature fee feeling
    figure file finger fire firm fish floor focus force forest frame friend fund gap garden gas
    gift girl glass goal gold ground growth guard guest guide gun hair hall hand heart heat hell
    help hero hole horse host hotel idea image impact income individual injury input insurance
    interview item key kid kind knowledge lack language leadership letter lie limit link list
    loss luck machine magazine management manager map mark mass material matter meal meaning
    measure meeting memory message method middle mission mistake mix mobile mode moment mouth
    movement nature neck network noise note object opinion opportunity option organization
    owner page pain paper parent partner path pattern peace period person phase photo piece
    pilot pitch planet plant platform pleasure pocket poem position pressure principle prison
    problem product production profile progress property proposal purpose quality quarter race
    radio range reader reality reason region relationship release religion rent request resource
    response rest review reward ring rock role room root rule safety sale sample scale scene
    screen sector self sense sentence sequence session shape shift shop shot sign signal silence
    size skill skin sky sleep slip smile solution son sound source speech speed staff stage star
    status step stone strategy strength stress structure style subject success summer surface
    survey target task taste teacher term test text theory thought threat ticket tool topic
    touch tour tower trade tradition traffic training transfer trial trouble trust truth unit
    version victim view violence voice volume wall weapon weather weight wheel while window
    winter wood word worker writing youth zone active afraid alive alone angry annual aware basic
    beautiful bright broad busy careful central cheap civil classic cold common complete complex
    correct critical cute dangerous dark dead dear deep democratic direct dirty double dry due
    eastern easy effective empty entire environmental equal essential exact excellent existing
    expensive extra extreme fair familiar famous fast fat final fine firm flat foreign formal
    former fresh friendly funny general giant glad global golden grand green guilty happy healthy
    heavy helpful hidden honest hot huge ideal illegal independent initial inner innocent
    interesting internal joint junior kind later leading legal level light limited living lonely
    loose loud lovely low lucky mad massive mental middle minor missing modern moral narrow
    negative nervous nice normal obvious official ordinary original overall perfect physical
    pink plain pleasant poor popular positive powerful pretty previous primary prior professional
    proper proud pure quick quiet rare raw ready recent regular relevant religious remote rich
    right rough round sad safe scared senior sensitive separate severe sharp short sick signal
    significant silly silver single slow smart soft solid southern specific spiritual square
    standard still strange strict structural stupid successful sudden sufficient suitable sweet
    tall technical terrible thick thin tiny tired total tough traditional typical ugly unable
    unique unusual upper urban useful usual valuable various vast visible visual warm weird western
    whole wide wild wise wonderful wooden wrong yellow
    """
)
OWT_COMMON = [w for w in OWT_COMMON if w.islower() or w == "I"]

OWT_NAMES = _words(
    """
    Trump Obama Clinton America United States New York China Russia Europe California Washington
    London Texas Florida Japan Germany France India Canada Britain Australia Israel Iran Syria Korea
    Mexico Brazil Africa Chicago Paris Google Apple Facebook Twitter Microsoft Amazon Tesla Netflix
    John David Michael James Robert William Mary Sarah Jennifer Elizabeth Smith Johnson Williams Brown
    Jones Miller Davis Wilson Anderson Taylor Thomas Moore Martin Jackson White Harris Thompson Garcia
    Martinez Robinson Clark Lewis Lee Walker Hall Allen Young King Wright Scott Green Baker Adams Nelson
    Hill Campbell Mitchell Roberts Carter Phillips Evans Turner Torres Parker Collins Edwards Stewart
    Morris Murphy Cook Rogers Morgan Peterson Cooper Reed Bailey Bell Gomez Kelly Howard Ward Cox Diaz
    Richardson Wood Watson Brooks Bennett Gray James Reyes Cruz Hughes Price Myers Long Foster Sanders
    Ross Morales Powell Sullivan Russell Ortiz Jenkins Gutierrez Perry Butler Barnes Fisher Henderson
    Coleman Simmons Patterson Jordan Reynolds Hamilton Graham Kim Gonzales Alexander Ramos Wallace
    Griffin West Cole Hayes Chavez Gibson Bryant Ellis Stevens Murray Ford Marshall Owens McDonald
    Harrison Ruiz Kennedy Wells Alvarez Woods Mendoza Castillo Olson Webb Washington Tucker Freeman
    Burns Henry Vasquez Snyder Simpson Crawford Jimenez Porter Mason Shaw Gordon Wagner Hunter Romero
    Hicks Dixon Hunt Palmer Robertson Black Holmes Stone Meyer Boyd Mills Warren Fox Rose Rice Moreno
    Schmidt Patel Ferguson Nichols Herrera Medina Ryan Fernandez Weaver Daniels Stephens Gardner Payne
    Kelley Dunn Pierce Arnold Tran Spencer Peters Hawkins Grant Hansen Castro Hoffman Hart Elliott
    Cunningham Knight Bradley Paul Peter George Mark Steve Chris Brian Kevin Jason Matt Daniel Paul
    Andrew Ryan Josh Emily Jessica Ashley Amanda Laura Lisa Anna Emma Olivia Sophia Linda Susan Karen
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June
    July August September October November December English Christian Muslim Republican Democrat
    Senate House Congress Court Supreme Department Army Navy Ukraine Moscow Beijing Berlin Toronto
    Boston Seattle Atlanta Denver Ohio Virginia Michigan Georgia Pennsylvania Arizona Oregon Iowa
    José Müller François Zoë Gómez Peña Núñez Renée Chloé Björn Øyvind São Paulo Zürich Kraków Łódź
    Dvořák Jürgen Gérard Hélène Ångström Bogotá Medellín Córdoba Málaga Reykjavík Montréal Québec
    """
)

# Capitalised abbreviations: \\p{L}+ keeps them whole, so each is a pre-token of its own.
OWT_ACRONYMS = _words(
    """
    US UK EU UN NASA FBI CIA CEO TV AI NFL NBA NHL MLB GDP USA NATO FDA EPA CDC WHO IRS DNA PC PhD
    BBC CNN NBC CBS ABC NPR HBO ESPN iPhone iOS MP IT HR PR LA NYC DC GOP NSA DOJ SEC IMF ISIS UFC
    """
)

OWT_FOREIGN = _words(
    """
    café naïve résumé fiancée déjà vu piñata jalapeño façade über doppelgänger crème brûlée coup
    señor señora mañana jamón hôtel élite rôle protégé attaché cliché soirée entrée
    東京 北京 中国 日本 上海 香港 台灣 大阪 한국 서울 日本語 中文 漢字 ありがとう こんにちは
    Путин Москва Россия Украина Киев спасибо привет да нет хорошо
    Ελλάδα Αθήνα שלום مرحبا القاهرة
    """
)

# Sentence openers (most sentences of real text start with one of a few dozen words).
OWT_STARTERS = _words(
    """
    the it in this but he we they a i that there and as if she for you when on after one so what at
    while some many according however now these his our those both more at last even by
    """
)
OWT_ODD_PUNCTUATION = _split_bars(
    "!!| --|...|?!| ***|:)| >>| &| +| =| /|.)|),|].| [|]|\u2026|\u2122|\u00ae| \u00b0|\u2019s|!!!| ~| "
)

EMOJI = _words("😂 ❤️ 👍 🔥 😭 😍 🙏 😊 💯 🎉 👀 🤔 😎 🙌 ✨ 👏 💪 🚀 😢 🤣 🥺 😡 🇺🇸 ☀️ ⚽ 🎶")

TLDS = ("com", "com", "com", "org", "net", "co.uk", "io", "gov", "edu", "de", "ca", "com.au")

TS_NOUNS = _words(
    """
    ball toy tree house box car flower cake book hat park garden sun sky water bird dog cat fish
    friend mom dad day home room bed door window table chair cup rock stick leaf grass sand boat kite
    balloon apple cookie candy bike truck train doll bear bunny duck frog bug bee butterfly shell star
    moon cloud rain snow hill river lake pond sea beach forest farm school shop store street bridge
    road fence gate wall floor bag basket bowl spoon plate jar bottle box blanket pillow picture
    paper pencil crayon paint drum song game puzzle block slide swing sandbox pool bath soap towel
    shoe sock coat dress shirt scarf glove ring necklace crown key lock map clock lamp light fire
    stone feather nest egg seed plant carrot banana orange grape pie bread milk juice soup sandwich
    pizza ice cream treat gift present party bell whistle rope wheel wagon tent flag button hole
    mud puddle wind storm rainbow castle tower cave tunnel sword shield wand magic spell dream story
    idea lesson secret surprise smile hug kiss tail ear nose eye hand foot head leg wing fur paw
    jacket helmet rocket robot dragon monster giant fairy princess prince king queen knight pirate
    ship treasure coin chest mirror brush comb vase jar sock mitten sled snowman pumpkin acorn nut
    berry mushroom pebble shell seashell crab worm snail ant spider owl fox wolf deer mouse rabbit
    squirrel horse cow pig sheep goat chicken hen lion tiger elephant monkey giraffe zebra bear
    turtle snake whale dolphin shark penguin puppy kitten pony lamb bunny otter
    """
)
TS_ANIMALS = _words(
    """
    dog cat bird bunny duck frog bear fox owl mouse rabbit squirrel horse cow pig sheep lion tiger
    elephant monkey turtle puppy kitten dragon fish bee butterfly ladybug deer wolf penguin dolphin
    whale giraffe zebra pony lamb chick goat otter raccoon hedgehog beaver crab snail ant spider
    """
)
TS_ADJECTIVES = _words(
    """
    big little small happy sad good nice kind red blue green yellow pink purple orange white black
    brown new old pretty beautiful funny silly shiny soft hard fast slow tall short long round warm
    cold hot wet dry dark bright loud quiet clean dirty brave scared tired hungry thirsty angry
    excited curious friendly gentle strong weak special favorite magic sparkly fluffy furry tiny
    huge giant sweet yummy smart careful careless busy lazy proud shy lonely bored sleepy sick
    healthy rich poor strange fancy plain colorful empty full heavy light sharp smooth rough sticky
    cozy grumpy jolly lucky messy neat noisy playful polite rude safe sour spicy tidy wild wise young
    amazing wonderful great perfect terrible horrible lovely gorgeous delicious creative helpful
    hopeful thankful cheerful careful graceful peaceful powerful precious
    """
)
TS_FEELINGS = _words(
    "happy sad scared excited surprised proud angry sorry worried glad tired curious upset lonely "
    "brave calm grateful shy nervous thankful jealous confused"
)
TS_COLORS = _words("red blue green yellow pink purple orange white black brown gold silver gray")
TS_FOODS = _words(
    "cookies cake apples soup pizza sandwiches candy ice cream bananas carrots bread pie grapes "
    "muffins pancakes berries cheese popcorn"
)
TS_DRINKS = _words("milk juice water lemonade tea cocoa")
TS_PLACES = _words(
    """
    park garden forest yard house kitchen school beach farm zoo store shop jungle castle town
    village meadow field river pond lake hill playground street library bakery cave island ocean
    sky woods backyard barn attic room
    """
)
TS_TOYS = _words("ball doll car truck kite teddy blocks train robot puzzle drum boat bike crayons")
TS_NAMES_GIRLS = _words(
    """
    Lily Sue Mia Lucy Amy Anna Sara Emma Zoe Kitty Jane Molly Ellie Sophie Daisy Rose Lola Ruby
    Grace Chloe Ava Ella Mila Mandy Bella Polly Rosie Susie Jenny Jill Katie Lisa Nina Tina Maya
    Olivia Sally Annie Millie Hannah Abby Lila Luna Penny Mary Alice Sophia Emily Jasmine
    """
)
TS_NAMES_BOYS = _words(
    """
    Tim Ben Tom Max Sam Jack Timmy Bob Leo Joe Mark Tommy Jake Billy Bobby Spot Buddy Toby Ollie
    Finn Alex Jim Johnny Danny Lucas Henry Charlie Oliver Peter Paul Mike Rex Teddy Benny Sammy
    Jimmy Roger Fred Ted Ned Dan Kevin Ryan Adam Eli Noah Jacob Owen Tony
    """
)
# base or base:past, so that irregular and consonant-doubling pasts are spelled right.
TS_VERBS = [
    tuple(item.split(":")) if ":" in item else (item, _past)
    for item, _past in (
        (item, item + ("d" if item.endswith("e") else "ed"))
        for item in _words(
            """
            play jump run:ran eat:ate help look find:found share climb swim:swam dance sing:sang
            draw:drew paint read:read build:built fly:flew catch:caught throw:threw kick push pull
            open close fix clean cook bake:baked hide:hid seek:sought explore laugh smile hug:hugged
            hold:held carry:carried make:made give:gave take:took see:saw hear:heard feel:felt
            touch watch wait walk ride:rode roll pick plant grow:grew water feed:fed wash dig:dug
            chase hop:hopped skip:skipped clap:clapped nap:napped shout whisper listen learn try:tried
            cry:cried smell taste bring:brought keep:kept win:won lose:lost
            follow visit save fetch splash race wave write:wrote color count stack sort wrap bounce
            tickle rescue
            """
        )
    )
]
TS_SAY = _words("said asked shouted replied whispered cried exclaimed yelled answered")
TS_INTERJECTIONS = ("Wow", "Oh no", "Look", "Yay", "Hi", "Hello", "Oh", "Hey", "Come on", "Please")
TS_NUMBERS = _words("two three four five six seven eight nine ten")


# --------------------------------------------------------------------------------------------
# Coined words: rank -> word, a pure function of (salt, rank) so every process agrees.
# --------------------------------------------------------------------------------------------

# Syllable pieces, repeated to weight them; the first of each list are also the likeliest picks.
_ONSETS = _split_bars(
    "|||t|s|r|l|n|m|d|c|p|b|h|f|g|w|v|k|j|t|s|r|l|n|m|d|c|p|b|st|tr|pr|br|ch|sh|th|cr|gr|pl|bl|fl|cl"
    "|dr|fr|sp|sc|qu|wh|ph|str|sl|sm|sn|sw|z|y"
)
_INNER_ONSETS = _split_bars("t|s|r|l|n|m|d|c|p|b|v|g|f|t|r|l|n|m|d|st|tr|pr|ch|sh|th|gr|pl|bl|cl|qu")
_SIMPLE_ONSETS = _split_bars("t|s|r|l|n|m|d|c|p|b|g|v|f")
_NUCLEI = _split_bars("a|e|i|o|a|e|i|o|u|a|e|i|o|u|ea|ou|ai|ee|oo|y|ie|au|oi")
_CODAS = _split_bars("|||n|r|s|t|l|d|m|n|r|s|t|nt|nd|st|ng|ck|ll|rt|ct|ss|x|sh|th|ch|mp|rd|nk")
_TS_ONSETS = _split_bars("|b|d|f|g|h|j|k|l|m|n|p|r|s|t|w|b|d|l|m|p|s|t|sn|st|fl|gl|bl|pl|tr|sl|sp|z")
_TS_NUCLEI = _split_bars("a|e|i|o|u|a|e|i|o|u|oo|ee|ay|ow")
_TS_CODAS = _split_bars("|||n|t|p|g|m|d|n|t|ck|ll|sh|ng|mp|nd")
_PREFIXES = _split_bars("re|un|in|de|dis|pre|con|com|pro|over|under|inter|anti|non|sub|mis|out|trans|co")
_SUFFIXES = _split_bars(
    "s|s|s|ed|ed|ing|ing|er|ers|ly|s|ed|ing|ly|er|tion|tions|al|ity|ment|ness|ic|ous|ive|able|ist|ism|ize"
    "|ful|less|est|ian|ary|ory|ence|ance|ent|ant|ure|ology|ship|hood|ate|ated|ine|ia|ments|ings|ally"
)
_TS_SUFFIXES = _split_bars("s|s|y|ie|er|le|ish|ing|ed|est|ly|s|y|er")
_NAME_ENDINGS = _words("son ton ley ford man er ez ski berg stein a o i ia ina elli ova ov ard is us")
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


def _affix(word: str, suffix: str) -> str:
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
        return _affix(word, h.pick(_SUFFIXES, 1.3)) if h.uniform() < 0.8 else word
    u = h.uniform()
    count = (
        1 if u < 0.45 - 0.3 * rarity else 2 if u < 0.9 - 0.3 * rarity else 3 if u < 0.98 - 0.1 * rarity else 4
    )
    word = _syllables(h, count, _ONSETS, _NUCLEI, _CODAS)
    if h.uniform() < 0.04 + 0.1 * rarity:
        word = h.pick(_PREFIXES, 1.5) + word
    if h.uniform() < 0.2 + 0.25 * rarity:
        word = _affix(word, h.pick(_SUFFIXES, 1.3))
    return word


def coined_simple_word(rank: int, salt: int = 2) -> str:
    """A short made-up or derived word of the kind children's stories use."""
    h = _Hash(salt, rank)
    if h.uniform() < 0.3:
        return _affix(h.pick(_TS_BASES, 1.0), h.pick(_TS_SUFFIXES, 1.0))
    word = _syllables(h, 1 if h.uniform() < 0.3 else 2, _TS_ONSETS, _TS_NUCLEI, _TS_CODAS)
    if len(word) < 3:
        word += h.pick(_TS_CODAS[3:], 1.0)
    if h.uniform() < 0.2:
        word = _affix(word, h.pick(_TS_SUFFIXES, 1.0))
    return word


def coined_name(rank: int, salt: int = 3) -> str:
    """A capitalised made-up proper noun (person, place, product)."""
    h = _Hash(salt, rank)
    word = _syllables(h, 1 if h.uniform() < 0.35 else 2, _ONSETS, _NUCLEI, _CODAS)
    if h.uniform() < 0.6:
        word = _affix(word, h.pick(_NAME_ENDINGS, 1.3))
    return word[0].upper() + word[1:]


@lru_cache(maxsize=8)
def _lexicon(real: tuple[str, ...], size: int, kind: str) -> list[str]:
    """Words by rank (index 0 unused): ``real`` ones first, then coined, ``size`` in all."""
    coin = {"word": coined_word, "simple": coined_simple_word, "name": coined_name}[kind]
    words = ["", *real]
    words.extend(coin(rank) for rank in range(len(words), size + 1))
    return words


def heaps(k: float, beta: float, tokens: float, floor: int) -> int:
    """Vocabulary size K * tokens**beta (Heaps' law), at least ``floor``."""
    return max(floor, int(k * max(tokens, 1.0) ** beta))


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


def _article(word: str) -> str:
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
_PUNCTUATION = _split_bars(
    ".|,|\"|)|(|:|;|!|?|-|'|...|--|]|[|/|*|\u201d|\u201c|\u2019|\u2014|&|#|%|+|=|>|<|_|~|$|@|^|`|{|}|\\"
)
_WHITESPACE = ("\n", "\n\n", "  ", "\t", "\n\n\n", " \n", "    ", "\u00a0", " \n\n", "\r\n", "\n  ")


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
        return _cap(word) if rng.random() < 0.5 else word
    if r < 0.85:
        word = word.translate(_TO_CYRILLIC)
        return _cap(word) if rng.random() < 0.5 else word
    return "".join(rng.choice(_CJK) for _ in range(rng.randrange(1, 5)))


# --------------------------------------------------------------------------------------------
# OpenWebText-like articles.
# --------------------------------------------------------------------------------------------

_OPEN_QUOTE = {'"': '"', "\u201c": "\u201d"}
_CONTRACTIONS = _words(
    """
    it's don't I'm that's can't didn't doesn't isn't there's you're we're they're I've we've
    won't wasn't I'll we'll you'll he's she's let's aren't couldn't wouldn't he'd I'd they've
    """
)


class WebText:
    """Documents like OpenWebText's, vocabulary sized for a corpus of ``target_bytes``."""

    def __init__(self, target_bytes: int) -> None:
        tokens = target_bytes / OWT_BYTES_PER_WORD
        self.words = _lexicon(tuple(OWT_COMMON), heaps(OWT_WORDS_K, OWT_WORDS_BETA, tokens, 2000), "word")
        self.names = _lexicon(tuple(OWT_NAMES), heaps(OWT_NAMES_K, OWT_NAMES_BETA, tokens, 500), "name")
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
            return "#" + "".join(_cap(self.word(rng)) for _ in range(rng.randrange(1, 4)))
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
        ws[0] = _cap(ws[0])
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
            title = " ".join(_cap(self.word(rng)) for _ in range(rng.randrange(3, 11)))
            parts.append(title + rng.choice(("", "", ":", "?")))
        size = 0
        while size < target:
            paragraph = self.paragraph(rng)
            parts.append(paragraph)
            size += len(paragraph) + 2
        return "\n\n".join(parts) + EOT


# --------------------------------------------------------------------------------------------
# TinyStories-like stories.
# --------------------------------------------------------------------------------------------

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
        self.rare = _lexicon((), heaps(TS_RARE_K, TS_RARE_BETA, tokens, 300), "simple")
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
            return base, _affix(base, "ed")
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
                out.append(_article(self._pick(rng, TS_ADJECTIVES) + " " + self._pick(rng, TS_NOUNS)))
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
        hero = names[int(len(names) * rng.random() ** 1.5)] if rng.random() > 0.03 else _cap(self._rare(rng))
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
            "a_animal": _article(animal),
            "place": self._pick(rng, TS_PLACES),
            "adj": self._pick(rng, TS_ADJECTIVES, 1.3),
            "open": "\u201c" if typographic else '"',
            "close": "\u201d" if typographic else '"',
        }
        cast["a_adj_thing"] = _article(f"{cast['adj']} {cast['thing']}")
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
# Word-count tables.
# --------------------------------------------------------------------------------------------


# The commonest GPT-2 pre-tokens of English web text, most frequent first.
HEAD_PRETOKENS = _split_bars(
    ",| the|.| of| and| to| a| in|\n\n| is| that| for|-| on| with| it| was| as|'s| The| be| are| I|"
    " by| at| this| have| from| (| you| not|)| an| or| he| his| but| they|:|\n| we| has| their| will|"
    " were| more| \"| which| one| been| can| all| her| would| \u201c| had| about| said| It|'t| she| there|"
    ' so| out| if|\u201d| who| up|?| also| In| when| time| than| its| what| people| like|"| new| just|'
    ' do|."| them| other| some| over| into| only| He| my| after| could| A| our| first| two| years|'
    " no|'| This| how| But| any| most| We| these| get|/| $|!| year| 1| 2| made| even| because| make|"
    " where| through| There| back| many| well|.\u201d|;| 3| much| And| If| 10| way| They|%| 2017| You|"
    " 2016|The| me| very| It|I| going| she|\u2019|s| -| \u2014|...| right| really| day| 5| 4|"
    "'re|'ve|'ll|'m|'d| 2018| 20| world| US| said| 2015| used| being"
)


def zipf_counts(unique: int, total: float, rng: random.Random) -> list[int]:
    """Counts for ranks 1..unique: ~1/(rank+1) for the head, a steeper power in the tail down to
    ``LAST_RANK_COUNT`` at the last rank (at least 1 once rounded), scaled to about ``total``, and
    jittered so that neighbouring ranks interleave."""
    head = max(10, unique // 40)
    # c(r) = c1 / (r + 1) up to ``head``, then c1 / (head + 1) * (r / head) ** -slope; choose slope
    # so that c(unique) = LAST_RANK_COUNT with c1 fixed by the total (integral approximation, bisection).
    low, high = 1.05, 6.0
    for _ in range(60):
        slope = (low + high) / 2
        tail = head**slope * ((head + 0.5) ** (1 - slope) - (unique + 0.5) ** (1 - slope)) / (slope - 1)
        c1 = total / (math.log((head + 1.5) / 1.5) + tail / (head + 1))
        last = c1 / (head + 1) * (unique / head) ** -slope
        low, high = (slope, high) if last > LAST_RANK_COUNT else (low, slope)
    counts = []
    for rank in range(1, unique + 1):
        c = c1 / (rank + 1) if rank <= head else c1 / (head + 1) * (rank / head) ** -slope
        if rank > 20:
            c *= math.exp(rng.gauss(0.0, 0.3))
        counts.append(max(1, int(c + rng.random())))
    return counts


class _PretokenStream:
    """Unique pre-tokens (UTF-8 bytes), commonest first, in OpenWebText's mix of kinds: words with
    their space, capitalised and unspaced forms, names, then (more so among the rarer ones) digit
    runs, capitals, punctuation runs, non-ASCII words, emoji and whitespace runs."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[bytes] = set()
        self.words = [""]  # by rank, as emitted
        self.name_rank = 0

    @property
    def word_rank(self) -> int:
        return len(self.words) - 1

    def word(self, rank: int) -> str:
        if rank < len(self.words):
            return self.words[rank]
        return OWT_COMMON[rank - 1] if rank <= len(OWT_COMMON) else coined_word(rank)

    def name(self, rank: int) -> str:
        return OWT_NAMES[rank - 1] if rank <= len(OWT_NAMES) else coined_name(rank)

    def earlier_word(self) -> str:
        """A word already emitted, the commoner likelier (for capitalised and unspaced forms)."""
        return self.word(int(math.exp(self.rng.random() * math.log(self.word_rank + 1))) or 1)

    def candidate(self) -> str:
        rng = self.rng
        space = " " if rng.random() < 0.75 else ""
        # Exotic kinds take a growing share down the ranks: about 20% of the rarest rows.
        if rng.random() < 0.2 * min(1.0, math.log10(len(self.seen) + 10) / 6.6):
            r = rng.random()
            if r < 0.45:
                digits = 1 + int(rng.expovariate(1 / 3.5))
                return space + str(rng.randrange(10 ** (digits - 1), 10**digits))
            if r < 0.6:
                word = self.earlier_word()
                return space + (word.upper() if rng.random() < 0.7 else _cap(word) + word.upper())
            if r < 0.74:
                pieces = [_PUNCTUATION[int(len(_PUNCTUATION) * rng.random() ** 1.5)] for _ in range(3)]
                return space + "".join(pieces[: rng.randrange(1, 4)])
            if r < 0.96:
                return space + foreign_word(rng, self.word(rng.randrange(1, self.word_rank + 2)))
            if r < 0.99:
                return space + "".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 4)))
            return rng.choice(_WHITESPACE)
        r = rng.random()
        if r < 0.62:
            word = self.word(len(self.words))
            self.words.append(word)
            return " " + word
        if r < 0.72:
            self.name_rank += 1
            return space + self.name(self.name_rank)
        if r < 0.84:
            return " " + _cap(self.earlier_word())
        word = self.earlier_word()
        return word if rng.random() < 0.6 else _cap(word)

    def take(self, unique: int) -> list[bytes]:
        """The first ``unique`` distinct pre-tokens."""
        out: list[bytes] = []
        for token in HEAD_PRETOKENS:
            data = token.encode()
            if data not in self.seen and len(out) < unique:
                self.seen.add(data)
                out.append(data)
        while len(out) < unique:
            data = self.candidate().encode()
            if data not in self.seen:
                self.seen.add(data)
                out.append(data)
        return out


def make_counts(unique: int, seed: int = 0) -> pa.Table:
    """A pyarrow Table in bpe-dask's counts schema with ``unique`` rows of OpenWebText statistics."""
    rng = random.Random(f"bpe-dask:counts:{seed}")
    total = OWT_PRETOKENS * (unique / OWT_UNIQUE) ** (1 / COUNTS_HEAPS_BETA)
    tokens = _PretokenStream(rng).take(unique)
    counts = zipf_counts(unique, max(total, 2.0 * unique), rng)
    schema = pa.schema([("token", pa.binary()), ("count", pa.int64())])
    return pa.table(
        {"token": pa.array(tokens, pa.binary()), "count": pa.array(counts, pa.int64())}, schema=schema
    )


def write_counts(unique: int, seed: int, out: str | Path) -> dict[str, float]:
    """Write the counts table to ``out`` (Parquet) and return a summary."""
    table = make_counts(unique, seed)
    pq.write_table(table, str(out))
    counts = table.column("count").to_pylist()
    lengths = sorted(len(t) for t in table.column("token").to_pylist())
    return {
        "rows": table.num_rows,
        "total_count": sum(counts),
        "max_count": max(counts, default=0),
        "share_count_1": sum(c == 1 for c in counts) / max(1, len(counts)),
        "share_count_le_10": sum(c <= 10 for c in counts) / max(1, len(counts)),
        "median_token_bytes": lengths[len(lengths) // 2] if lengths else 0,
        "p99_token_bytes": lengths[int(len(lengths) * 0.99)] if lengths else 0,
    }


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
