"""A seeded generator of English sentences with gold dependency arcs and subject-verb agreement.

Method: a small hand-written grammar builds each sentence left to right as a list of words and
records an arc whenever a word is attached, so the arcs are gold by construction. The subject
noun phrase can carry prepositional phrases and relative clauses whose nouns usually have the
other number (attractors: "the author of the books is ..."), which spreads the subject-verb
distance from 1 to 12+ words and makes agreement a real test: a head that tracks the subject
must skip the nearer, wrongly numbered noun. The main verb always has distinct singular and
plural forms (is/are, was/were, has/have, runs/run), so every sentence carries an
:class:`Agreement` with the form the text has and the form of the other number.

Relations (Stanford-basic style, one convention for the whole suite):

- ``nsubj``: subject noun (or relative "that") -> its verb
- ``obj``: object noun (or relative "that" standing for one) -> its verb
- ``det``: determiner -> noun; ``amod``: adjective -> noun
- ``prep``: preposition -> the noun or verb it attaches to; ``pobj``: noun -> its preposition

Punctuation is its own word (the final period, the comma after a fronted phrase) and has no arc;
adverbs ("often") have none either, since no relation above covers them.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from interp.probes.base import SYNTAX, Agreement, Arc, Sentence, Suite
from interp.probes.prose import suite_card

# (singular, plural) pairs; every form is one common English word.
ANIMATE = [
    ("man", "men"),
    ("woman", "women"),
    ("child", "children"),
    ("teacher", "teachers"),
    ("author", "authors"),
    ("doctor", "doctors"),
    ("farmer", "farmers"),
    ("student", "students"),
    ("pilot", "pilots"),
    ("singer", "singers"),
    ("neighbor", "neighbors"),
    ("owner", "owners"),
    ("friend", "friends"),
    ("dog", "dogs"),
    ("cat", "cats"),
]
THINGS = [
    ("key", "keys"),
    ("book", "books"),
    ("box", "boxes"),
    ("letter", "letters"),
    ("bag", "bags"),
    ("picture", "pictures"),
    ("map", "maps"),
    ("cup", "cups"),
    ("bottle", "bottles"),
    ("ticket", "tickets"),
    ("lamp", "lamps"),
    ("coat", "coats"),
]
PLACES = [
    ("table", "tables"),
    ("cabinet", "cabinets"),
    ("door", "doors"),
    ("window", "windows"),
    ("shelf", "shelves"),
    ("desk", "desks"),
    ("house", "houses"),
    ("bridge", "bridges"),
    ("garden", "gardens"),
    ("tree", "trees"),
    ("wall", "walls"),
    ("bench", "benches"),
]
# Nouns that take an "of" complement, and which nouns make a sensible complement.
OF_COMPLEMENTS = {
    "author": [("book", "books"), ("letter", "letters"), ("map", "maps")],
    "owner": [
        ("dog", "dogs"),
        ("cat", "cats"),
        ("house", "houses"),
        ("garden", "gardens"),
        ("box", "boxes"),
    ],
    "friend": [
        ("teacher", "teachers"),
        ("doctor", "doctors"),
        ("pilot", "pilots"),
        ("singer", "singers"),
    ],
    "picture": [("child", "children"), ("dog", "dogs"), ("bridge", "bridges"), ("tree", "trees")],
    "box": [("letter", "letters"), ("cup", "cups"), ("key", "keys"), ("ticket", "tickets")],
    "bag": [("book", "books"), ("bottle", "bottles"), ("coat", "coats"), ("map", "maps")],
}
ADJ_ANIMATE = ["old", "young", "tall", "happy", "tired", "quiet", "kind", "busy"]
ADJ_THING = ["old", "small", "red", "heavy", "new", "empty", "broken", "blue"]
DET = {False: ["the", "a", "this"], True: ["the", "these", "some", "two", "many"]}
LOC_PREPS = ["on", "near", "under", "behind", "beside"]
NEAR_PREPS = ["near", "behind", "beside"]  # for people and animals: nobody sits "under the man"
ADVERBS = ["often", "usually", "still", "always", "rarely"]
FRONTED = [
    ("in", "the", "morning"),
    ("at", None, "night"),
    ("after", None, "lunch"),
    ("during", "the", "day"),
]
# (singular, plural) verbs; both forms are single words and differ.
COPULA = [("is", "are"), ("was", "were")]
TRANS_THING = [
    ("holds", "hold"),
    ("carries", "carry"),
    ("keeps", "keep"),
    ("needs", "need"),
    ("wants", "want"),
    ("finds", "find"),
    ("likes", "like"),
    ("sees", "see"),
]
TRANS_ANIMATE = [
    ("knows", "know"),
    ("helps", "help"),
    ("follows", "follow"),
    ("likes", "like"),
    ("sees", "see"),
    ("watches", "watch"),
    ("remembers", "remember"),
]
INTRANS = [
    ("runs", "run"),
    ("sleeps", "sleep"),
    ("waits", "wait"),
    ("sits", "sit"),
    ("works", "work"),
    ("smiles", "smile"),
    ("sings", "sing"),
    ("rests", "rest"),
]
# Subject-noun modifier plans: weights chosen so that every distance from 1 to 12+ is common.
MODIFIER_PLANS = [
    ((), 4),
    (("pp",), 5),
    (("rc",), 3),
    (("rc_pp",), 3),
    (("pp", "pp"), 2),
    (("pp", "rc"), 3),
    (("pp", "rc_pp"), 3),
    (("pp", "pp", "rc"), 2),
    (("pp", "pp", "rc_pp"), 2),
]
_PLANS = [plan for plan, _ in MODIFIER_PLANS]
_PLAN_WEIGHTS = list(itertools.accumulate(w for _, w in MODIFIER_PLANS))
ANIMATE_SET = set(ANIMATE)
PUNCT = {".", ","}
Pair = tuple[str, str]


class _Builder:
    """Words and arcs of one sentence under construction; ``add`` returns the new word's index."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.words: list[str] = []
        self.arcs: list[Arc] = []

    def add(self, word: str) -> int:
        self.words.append(word)
        return len(self.words) - 1

    def arc(self, dep: int, head: int, relation: str) -> None:
        self.arcs.append(Arc(dep, head, relation))

    def noun_phrase(self, pair: Pair, plural: bool, p_bare: float = 0.0) -> int:
        """Determiner (none for a bare plural, with probability ``p_bare``), optional adjective,
        noun; returns the noun's index."""
        rng = self.rng
        adj = (
            rng.choice(ADJ_ANIMATE if pair in ANIMATE_SET else ADJ_THING)
            if rng.random() < 0.35
            else None
        )
        det = None if plural and rng.random() < p_bare else rng.choice(DET[plural])
        if det == "a" and (adj or pair[0])[0] in "aeiou":
            det = "an"
        d = self.add(det) if det else None
        a = self.add(adj) if adj else None
        n = self.add(pair[plural])
        if d is not None:
            self.arc(d, n, "det")
        if a is not None:
            self.arc(a, n, "amod")
        return n

    def prep_phrase(
        self, head: int, prep: str, pair: Pair, plural: bool, p_bare: float = 0.0
    ) -> int:
        """A preposition attached to ``head`` and its object noun phrase; returns the noun's index."""
        p = self.add(prep)
        self.arc(p, head, "prep")
        n = self.noun_phrase(pair, plural, p_bare)
        self.arc(n, p, "pobj")
        return n


def _attractor(rng: random.Random, plural: bool) -> bool:
    # Mostly the other number: a same-number noun in between makes agreement trivially easy.
    return (not plural) if rng.random() < 0.8 else plural


def _other(rng: random.Random, pool: list[Pair], avoid: Pair) -> Pair:
    # "the authors that some authors know" reads like a typo; draw a different noun.
    while (pair := rng.choice(pool)) == avoid:
        pass
    return pair


def _noun_pp(b: _Builder, noun: int, pair: Pair, subject_plural: bool) -> tuple[int, Pair]:
    """Attach "of X" (if the noun takes it) or a locative phrase to ``noun``; returns X's index and pair."""
    rng = b.rng
    plural = _attractor(rng, subject_plural)
    if pair[0] in OF_COMPLEMENTS and rng.random() < 0.7:
        comp = rng.choice(OF_COMPLEMENTS[pair[0]])
        # Bare plurals ("the author of books is") give the 3-word subject-verb distance.
        return b.prep_phrase(noun, "of", comp, plural, p_bare=0.4), comp
    prep = rng.choice(NEAR_PREPS if pair in ANIMATE_SET else LOC_PREPS)
    comp = _other(rng, PLACES, pair)
    return b.prep_phrase(noun, prep, comp, plural, p_bare=0.25), comp


def _relative_clause(b: _Builder, head_pair: Pair, head_plural: bool, with_pp: bool) -> None:
    """An object relative "that the man (near the doors) holds" with an attractor subject, or,
    for a person or animal, a subject relative "that likes the dogs" with an attractor object."""
    rng = b.rng
    that = b.add("that")
    other = _attractor(rng, head_plural)
    animate = head_pair in ANIMATE_SET
    if animate and rng.random() < 0.4:
        v = b.add(
            rng.choice(TRANS_ANIMATE)[head_plural]
        )  # agrees with the head noun through "that"
        b.arc(that, v, "nsubj")
        obj_pair = _other(rng, ANIMATE, head_pair)
        obj = b.noun_phrase(obj_pair, other)
        b.arc(obj, v, "obj")
        if with_pp:
            _noun_pp(b, obj, obj_pair, other)
        return
    subj_pair = _other(rng, ANIMATE, head_pair)
    subj = b.noun_phrase(subj_pair, other)
    if with_pp:
        _noun_pp(b, subj, subj_pair, other)
    if rng.random() < 0.25:
        b.add(rng.choice(ADVERBS))
    v = b.add(rng.choice(TRANS_ANIMATE if animate else TRANS_THING)[other])
    b.arc(subj, v, "nsubj")
    b.arc(that, v, "obj")  # UD convention: the relativizer fills the object gap


def _predicate(b: _Builder, subj_pair: Pair, plural: bool) -> tuple[int, Pair]:
    """The main verb and what follows it; returns the verb's index and its (sg, pl) forms."""
    rng = b.rng
    animate = subj_pair in ANIMATE_SET
    kind = rng.choice(
        ("copula", "copula", "has", "trans", "intrans")
        if animate
        else ("copula", "copula", "stays", "belongs")
    )
    if kind in ("has", "trans", "intrans", "stays") and rng.random() < 0.4:
        b.add(rng.choice(ADVERBS))  # "the dogs often sleep": one more word between subject and verb
    choices = {
        "copula": COPULA,
        "has": [("has", "have")],
        "stays": [("stays", "stay")],
        "belongs": [("belongs", "belong")],
        "trans": TRANS_THING,
        "intrans": INTRANS,
    }[kind]
    forms = rng.choice(choices)
    v = b.add(forms[plural])
    if kind in ("has", "trans"):
        obj = b.noun_phrase(rng.choice(THINGS), rng.random() < 0.5, p_bare=0.3)
        b.arc(obj, v, "obj")
    elif kind == "belongs":
        b.prep_phrase(v, "to", rng.choice(ANIMATE), rng.random() < 0.5)
    else:  # copula, stays, intrans: a locative phrase on the verb
        b.prep_phrase(v, rng.choice(LOC_PREPS), rng.choice(PLACES), rng.random() < 0.5)
    return v, forms


def _sentence(rng: random.Random) -> Sentence:
    """One sentence: [fronted phrase ,] subject NP + modifiers, main predicate, period."""
    b = _Builder(rng)
    fronted = None  # (preposition, noun) of "In the morning ,": attached to the verb once it exists
    if rng.random() < 0.15:
        prep, det, noun = rng.choice(FRONTED)
        p, d, n = b.add(prep), b.add(det) if det else None, b.add(noun)
        if d is not None:
            b.arc(d, n, "det")
        b.arc(n, p, "pobj")
        b.add(",")
        fronted = p
    subj_pair = rng.choice(ANIMATE if rng.random() < 0.6 else THINGS)
    plural = rng.random() < 0.5
    subj = b.noun_phrase(subj_pair, plural)
    last, last_pair = subj, subj_pair
    for step in rng.choices(_PLANS, cum_weights=_PLAN_WEIGHTS)[0]:
        if step == "pp":  # a second PP attaches to the nearest noun, the usual reading
            last, last_pair = _noun_pp(b, last, last_pair, plural)
        else:
            _relative_clause(b, subj_pair, plural, with_pp=step == "rc_pp")
    verb, forms = _predicate(b, subj_pair, plural)
    b.arc(subj, verb, "nsubj")
    if fronted is not None:
        b.arc(fronted, verb, "prep")
    b.add(".")
    b.words[0] = b.words[0][0].upper() + b.words[0][1:]
    text, spans = _layout(b.words)
    agreement = Agreement(verb=verb, subject=subj, correct=forms[plural], wrong=forms[not plural])
    return Sentence(
        text=text, words=spans, arcs=tuple(b.arcs), agreement=agreement, source="syntax"
    )


def _layout(words: list[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Join words by single spaces, punctuation attached to the word before; return text and spans."""
    text, spans = "", []
    for w in words:
        if text and w not in PUNCT:
            text += " "
        spans.append((len(text), len(text) + len(w)))
        text += w
    return text, tuple(spans)


def vocabulary() -> tuple[str, ...]:
    """Every word (lower-cased) and punctuation mark the generator can produce, in a fixed order:
    a word-level tokenizer over these covers every generated sentence."""
    pairs = ANIMATE + THINGS + PLACES + [p for comps in OF_COMPLEMENTS.values() for p in comps]
    pairs += (
        COPULA
        + TRANS_THING
        + TRANS_ANIMATE
        + INTRANS
        + [("has", "have"), ("stays", "stay"), ("belongs", "belong")]
    )
    words = [w for pair in pairs for w in pair]
    words += (
        ADJ_ANIMATE + ADJ_THING + DET[False] + DET[True] + ["an"] + LOC_PREPS + NEAR_PREPS + ADVERBS
    )
    words += [w for phrase in FRONTED for w in phrase if w] + ["of", "to", "that"] + sorted(PUNCT)
    return tuple(dict.fromkeys(words))


def generate_syntax(n: int, seed: int = 0) -> list[Sentence]:
    """``n`` grammar sentences from one ``random.Random(seed)``; the same seed gives the same list,
    and a shorter list is a prefix of a longer one with the same seed."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return list(itertools.islice(stream_syntax(random.Random(seed)), n))


def stream_syntax(rng: random.Random) -> Iterator[Sentence]:
    """Grammar sentences drawn from ``rng``, one after another, without end."""
    while True:
        yield _sentence(rng)


def syntax_suite(n: int, seed: int = 0) -> Suite:
    """The generated syntax suite (kind SYNTAX) with its card from interp/data/CARDS.md."""
    sentences = tuple(generate_syntax(n, seed))
    return Suite(name="syntax", kind=SYNTAX, sentences=sentences, card=suite_card("syntax"))
