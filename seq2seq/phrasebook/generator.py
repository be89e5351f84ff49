"""The phrasebook: a seeded English–French corpus with gold word alignments.

It is generated English→French; ``data.src_lang=fr data.tgt_lang=en`` reads it the
other way (``reverse_columns``: sides swapped, every link transposed).

A small grammar over the lexicon in ``lexicon.py`` writes each sentence in both
languages at once, so every French token knows the English tokens it came from. The
phenomena are chosen to need non-monotonic attention:

- adjectives after the noun with agreement (``the small blue chairs`` → ``les petites
  chaises bleues``; petit/grand/beau/nouveau/vieux/jeune/joli stay before it, with
  bel/nouvel/vieil);
- compounds that reverse (``the meeting room`` → ``la salle de réunion``);
- object pronouns before the verb (``I love you`` → ``je t'aime``, ``she sees them`` →
  ``elle les voit``), with participle agreement in compound tenses (``elle les a vus``);
- negation around the verb and compound tenses (``Felix did not leave the blue notebook
  in the meeting room yesterday`` → ``Felix n'a pas laissé le carnet bleu dans la salle
  de réunion hier``), and ``un`` → ``de`` under negation;
- time adverbs (``two days ago`` → ``il y a deux jours``, ``last week`` → ``la semaine
  dernière``), locative phrases with contractions (``au``, ``du``), names copied
  unchanged.

Text is lowercase but for names and ``I``; tokens are separated by single spaces and
every sentence ends with `` .``. An elided form (``t'aime``, ``l'école``) is one token
linked to every English token of its parts. Alignments are Pharaoh ``i-j`` (sure) and
``i?j`` (possible: do-support, the auxiliary of a simple past, ``de`` in compounds),
source index first. Every token on both sides has at least one link.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from datasets import Dataset, DatasetDict

from seq2seq.phrasebook.lexicon import Adjective, Noun, Verb, lexicon

VOWELS = frozenset("aeiouhéèêàâîôûœ")
# subject, object, French subject, French object, person index 0..5, gender
PRONOUNS = (
    ("I", "me", "je", "me", 0, "m"),
    ("you", "you", "tu", "te", 1, "m"),
    ("he", "him", "il", "le", 2, "m"),
    ("she", "her", "elle", "la", 2, "f"),
    ("we", "us", "nous", "nous", 3, "m"),
    ("they", "them", "ils", "les", 5, "m"),
)
LOCATIONS = frozenset({"room", "building", "outdoor", "furniture", "container", "stop"})
PLACES = frozenset({"room", "building", "outdoor", "stop"})
AVOIR = ("ai", "as", "a", "avons", "avez", "ont")
ETRE = (("am", "suis"), ("are", "es"), ("is", "est"), ("are", "sommes"),
        ("are", "êtes"), ("are", "sont"))  # fmt: skip
ETRE_PAST = (("was", "étais"), ("were", "étais"), ("was", "était"), ("were", "étions"),
             ("were", "étiez"), ("were", "étaient"))  # fmt: skip
PREPS = {  # English tokens, French tokens, links (en, fr, sure)
    "in": (("in",), ("dans",), ((0, 0, True),)),
    "on": (("on",), ("sur",), ((0, 0, True),)),
    "under": (("under",), ("sous",), ((0, 0, True),)),
    "near": (("near",), ("près", "de"), ((0, 0, True), (0, 1, True))),
    "behind": (("behind",), ("derrière",), ((0, 0, True),)),
    "front": (
        ("in", "front", "of"),
        ("devant",),
        ((0, 0, True), (1, 0, True), (2, 0, True)),
    ),
    "next": (
        ("next", "to"),
        ("à", "côté", "de"),
        ((0, 0, True), (0, 1, True), (1, 2, True)),
    ),
    "at": (("at",), ("à",), ((0, 0, True),)),
}
NUMBERS = (("two", "deux"), ("three", "trois"), ("four", "quatre"), ("five", "cinq"),
           ("six", "six"), ("ten", "dix"))  # fmt: skip
PRESENT_TIMES = (
    (("today",), ("aujourd'hui",), ((0, 0, True),)),
    (("now",), ("maintenant",), ((0, 0, True),)),
    (("every", "day"), ("chaque", "jour"), ((0, 0, True), (1, 1, True))),
    (("every", "morning"), ("chaque", "matin"), ((0, 0, True), (1, 1, True))),
    (("this", "evening"), ("ce", "soir"), ((0, 0, True), (1, 1, True))),
    (("on", "mondays"), ("le", "lundi"), ((0, 0, False), (1, 1, True), (1, 0, True))),
    (
        ("on", "sundays"),
        ("le", "dimanche"),
        ((0, 0, False), (1, 1, True), (1, 0, True)),
    ),
)
PAST_TIMES = (
    (("yesterday",), ("hier",), ((0, 0, True),)),
    (("this", "morning"), ("ce", "matin"), ((0, 0, True), (1, 1, True))),
    (("last", "night"), ("hier", "soir"), ((0, 0, True), (1, 1, True))),
    (
        ("last", "week"),
        ("la", "semaine", "dernière"),
        ((0, 2, True), (1, 1, True), (1, 0, False)),
    ),
    (
        ("last", "year"),
        ("la", "année", "dernière"),
        ((0, 2, True), (1, 1, True), (1, 0, False)),
    ),
    (("on", "monday"), ("lundi",), ((0, 0, False), (1, 0, True))),
)


@dataclass
class Tok:
    """A French token: its word, its English indices, and how it may change."""

    word: str
    sure: set[int] = field(default_factory=set)
    possible: set[int] = field(default_factory=set)
    kind: str = ""  # art | prep | elide | ...: what contraction and elision may do
    vowel_form: str = ""  # the form before a vowel (bel, cet, mon)


@dataclass
class Sentence:
    """English tokens, appended in order, and French tokens assembled separately."""

    en: list[str] = field(default_factory=list)

    def add(self, words: tuple[str, ...] | list[str]) -> list[int]:
        start = len(self.en)
        self.en.extend(words)
        return list(range(start, len(self.en)))


def _tok(
    word: str, sure: list[int] | tuple[int, ...] = (), kind: str = "", **kw
) -> Tok:
    return Tok(word, set(sure), kind=kind, **kw)


def _phrase(
    s: Sentence, en: tuple[str, ...], fr: tuple[str, ...], links, kind=""
) -> list[Tok]:
    idx = s.add(en)
    toks = [Tok(w, kind=kind) for w in fr]
    for i, j, sure in links:
        (toks[j].sure if sure else toks[j].possible).add(idx[i])
    return toks


class Generator:
    """Draws one aligned sentence pair at a time from a seeded ``random.Random``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lex = lexicon()
        self.perfect = False  # English present perfect: no definite past time adverb
        self._nouns: dict[frozenset[str], list[Noun]] = {}
        self._adjectives: dict[Noun, tuple[list[Adjective], list[Adjective]]] = {}

    # --- noun phrases -----------------------------------------------------------------
    def pick_noun(self, tags: frozenset[str]) -> Noun:
        if tags not in self._nouns:
            self._nouns[tags] = [n for n in self.lex.nouns if n.tags & tags]
        return self.rng.choice(self._nouns[tags])

    def adjectives_for(self, noun: Noun) -> tuple[list[Adjective], list[Adjective]]:
        """Adjectives that fit ``noun``: (before the noun, after it)."""
        if noun not in self._adjectives:
            fits = [a for a in self.lex.adjectives if a.tags & noun.tags]
            pre = [a for a in fits if a.pre]
            self._adjectives[noun] = pre, [a for a in fits if not a.pre]
        return self._adjectives[noun]

    def noun_phrase(
        self, s: Sentence, noun: Noun, plural: bool, det: str
    ) -> tuple[list[Tok], str]:
        """Det + adjectives + noun; returns the French tokens and gender+number."""
        rng, number = self.rng, 1 if plural else 0
        pre_fits, post_fits = self.adjectives_for(noun)
        pre = [rng.choice(pre_fits)] if pre_fits and rng.random() < 0.3 else []
        post = [rng.choice(post_fits)] if post_fits and rng.random() < 0.45 else []
        det_toks = self.determiner(s, det, noun.gender, plural)
        pre_toks = [self.adjective(s, a, noun.gender, plural) for a in pre]
        post_toks = [self.adjective(s, a, noun.gender, plural) for a in post]
        noun_toks = _phrase(s, noun.en[number], noun.fr[number], noun.links)
        post_flat = [t for group in post_toks for t in group]
        pre_flat = [t for group in pre_toks for t in group]
        return det_toks + pre_flat + noun_toks + post_flat, noun.gender + "sp"[number]

    def determiner(self, s: Sentence, det: str, gender: str, plural: bool) -> list[Tok]:
        if det == "none":
            return []
        (i,) = s.add((det if not plural or det != "this" else "these",))
        if det == "the":
            word = "les" if plural else ("le" if gender == "m" else "la")
            return [_tok(word, [i], kind="art")]
        if det == "a":
            return [_tok("un" if gender == "m" else "une", [i], kind="indef")]
        if det == "my":
            if plural:
                return [_tok("mes", [i])]
            if gender == "m":
                return [_tok("mon", [i])]
            return [_tok("ma", [i], vowel_form="mon")]
        if plural:
            return [_tok("ces", [i])]
        if gender == "m":
            return [_tok("ce", [i], vowel_form="cet")]
        return [_tok("cette", [i])]

    def adjective(
        self, s: Sentence, adj: Adjective, gender: str, plural: bool
    ) -> list[Tok]:
        (i,) = s.add((adj.en,))
        form = adj.fr[(2 if plural else 0) + (gender == "f")]
        vowel_form = adj.vowel_form if form == adj.fr[0] and not plural else ""
        return [_tok(w, [i], vowel_form=vowel_form) for w in form.split("_")]

    def subject(
        self, s: Sentence, allow_pronoun: bool = True
    ) -> tuple[list[Tok], int, str]:
        """French tokens, person (0..5) and gender+number of a subject."""
        roll = self.rng.random()
        if allow_pronoun and roll < 0.4:
            en, _, fr, _, person, gender = self.rng.choice(PRONOUNS)
            (i,) = s.add((en,))
            return (
                [_tok(fr, [i], kind="elide" if fr == "je" else "")],
                person,
                gender + "s",
            )
        if roll < 0.7:
            name, gender = self.rng.choice(self.lex.names)
            (i,) = s.add((name,))
            return [_tok(name, [i])], 2, gender + "s"
        plural = self.rng.random() < 0.35
        noun = self.pick_noun(frozenset({"person"}))
        toks, gn = self.noun_phrase(
            s, noun, plural, self.rng.choice(("the", "the", "my", "this"))
        )
        return toks, 5 if plural else 2, gn

    def locative(self, s: Sentence, place_only: bool = False) -> list[Tok]:
        """``in the meeting room`` → ``dans la salle de réunion``; ``with Anna``."""
        if self.rng.random() < 0.15:
            (i,) = s.add(("with",))
            name, _ = self.rng.choice(self.lex.names)
            (j,) = s.add((name,))
            return [_tok("avec", [i]), _tok(name, [j])]
        noun = self.pick_noun(PLACES if place_only else LOCATIONS)
        en, fr, links = PREPS[self.rng.choice(noun.preps)]
        prep = _phrase(s, en, fr, links, kind="prep")
        det = self.rng.choice(("the", "the", "the", "my", "this"))
        np, _ = self.noun_phrase(s, noun, self.rng.random() < 0.15, det)
        return prep + np

    def time(self, s: Sentence, past: bool) -> list[Tok]:
        if self.perfect:  # "has seen ... yesterday" is not English
            return _phrase(s, *PAST_TIMES[1])
        if past and self.rng.random() < 0.25:
            en, fr = self.rng.choice(NUMBERS)
            return _phrase(
                s, (en, "days", "ago"), ("il", "y", "a", fr, "jours"),
                ((2, 0, True), (2, 1, True), (2, 2, True), (0, 3, True), (1, 4, True)),
            )  # fmt: skip
        return _phrase(s, *self.rng.choice(PAST_TIMES if past else PRESENT_TIMES))

    # --- clauses ----------------------------------------------------------------------
    def verb_group(
        self,
        s: Sentence,
        verb: Verb,
        person: int,
        tense: str,
        neg: bool,
        obj: Tok | None,
    ) -> list[Tok]:
        """French ``ne [obj] verb pas`` or ``ne [obj] aux pas pp``."""
        third = person in (2,)
        base, third_form, past, participle = verb.en
        ne = [_tok("ne", kind="elide")] if neg else []
        pas = [_tok("pas")] if neg else []
        if tense == "present":
            if neg:
                (do,) = s.add(("does" if third else "do",))
                ne[0].sure.add(s.add(("not",))[0])
                pas[0].sure |= ne[0].sure
                words = s.add(tuple(base.split()))
                main = _tok(verb.fr[person], words, possible={do})
            else:
                main = _tok(
                    verb.fr[person],
                    s.add(tuple((third_form if third else base).split())),
                )
            head, tail = [main], []
        else:
            perfect = self.perfect = self.rng.random() < 0.3
            if perfect:
                (aux_i,) = s.add(("has" if third else "have",))
                aux = _tok(AVOIR[person], [aux_i])
            elif neg:
                aux = _tok(AVOIR[person], possible=set(s.add(("did",))))
            if neg:
                ne[0].sure.add(s.add(("not",))[0])
                pas[0].sure |= ne[0].sure
            form = participle if perfect else base if neg else past
            words = s.add(tuple(form.split()))
            if not perfect and not neg:
                aux = _tok(AVOIR[person], possible=set(words))
            head, tail = [aux], [_tok(self.agree(verb.participle, obj), words)]
        pron = [obj] if obj is not None else []
        return ne + pron + head + pas + tail

    @staticmethod
    def agree(participle: str, obj: Tok | None) -> str:
        """Participle agreement with a preceding direct object pronoun (la, les)."""
        if obj is None or obj.word not in ("la", "les"):
            return participle
        word = participle + "e" if obj.word == "la" else participle
        return word if obj.word == "la" or word.endswith("s") else word + "s"

    def transitive(
        self, s: Sentence, subj_person: int, tense: str, neg: bool
    ) -> list[Tok]:
        """Verb group and object (a pronoun before the verb or a noun phrase after)."""
        rng = self.rng
        verb = rng.choice(self.lex.verbs)
        pron = (
            self.object_pronoun(verb, subj_person, tense)
            if rng.random() < 0.3
            else None
        )
        if pron is not None:
            obj = _tok(
                pron[3], kind="elide" if pron[3] in ("me", "te", "le", "la") else ""
            )
            group = self.verb_group(s, verb, subj_person, tense, neg, obj)
            obj.sure.add(s.add((pron[1],))[0])
            return group
        group = self.verb_group(s, verb, subj_person, tense, neg, None)
        noun = self.pick_noun(verb.tags)
        plural = rng.random() < 0.25
        det = rng.choice(
            ("the", "the", "a", "my", "this") if not plural else ("the", "my", "this")
        )
        np, _ = self.noun_phrase(s, noun, plural, det)
        if neg and det == "a":  # je n'ai pas de voiture
            np[0].word, np[0].kind = "de", "elide"
        return group + np

    def object_pronoun(self, verb: Verb, subj_person: int, tense: str) -> tuple | None:
        options = []
        for pron in PRONOUNS:
            person = pron[4]
            if {person, subj_person} in ({0}, {1}, {3}, {0, 3}):  # no reflexives
                continue
            if tense == "past" and pron[3] not in ("le", "la", "les"):
                continue  # gender of me/te/nous unknown for the participle
            if "person" in verb.tags or (pron[0] == "they" and "small" in verb.tags):
                options.append(pron)
        return self.rng.choice(options) if options else None

    def clause(self, s: Sentence) -> list[Tok]:
        """One sentence; French tokens in French order, before contraction/elision."""
        rng = self.rng
        kind = rng.random()
        tense = "past" if rng.random() < 0.5 else "present"
        neg = rng.random() < 0.3
        self.perfect = False
        subj, person, gn = self.subject(s, allow_pronoun=kind >= 0.15)
        if kind < 0.15:
            body = self.copula(s, person, gn, tense, neg)
        elif kind < 0.3:
            verb = rng.choice(self.lex.intransitive)
            body = self.verb_group(s, verb, person, tense, neg, None) + self.locative(
                s, True
            )
        else:
            body = self.transitive(s, person, tense, neg)
            if rng.random() < 0.4:
                body += self.locative(s)
        if rng.random() < 0.5:
            body += self.time(s, tense == "past")
        (dot,) = s.add((".",))
        return subj + body + [_tok(".", [dot])]

    def copula(
        self, s: Sentence, person: int, gn: str, tense: str, neg: bool
    ) -> list[Tok]:
        """``the chairs are not small`` → ``les chaises ne sont pas petites``."""
        en, fr = (ETRE if tense == "present" else ETRE_PAST)[person]
        be = _tok(fr, s.add((en,)))
        group = [be]
        if neg:
            (i,) = s.add(("not",))
            group = [_tok("ne", [i], kind="elide"), be, _tok("pas", [i])]
        if self.rng.random() < 0.5:
            return group + self.locative(s)
        adj = self.rng.choice([a for a in self.lex.adjectives if "person" in a.tags])
        (i,) = s.add((adj.en,))
        form = adj.fr[(2 if gn[1] == "p" else 0) + (gn[0] == "f")]
        return group + [_tok(w, [i]) for w in form.split("_")]


# --- French surface rules -------------------------------------------------------------
ELIDABLE = frozenset({"je", "me", "te", "le", "la", "ne", "de"})
CONTRACTIONS = {
    ("à", "le"): "au",
    ("à", "les"): "aux",
    ("de", "le"): "du",
    ("de", "les"): "des",
}


def _merge(first: Tok, second: Tok, word: str) -> Tok:
    return Tok(
        word, first.sure | second.sure, first.possible | second.possible, second.kind
    )


def french_surface(toks: list[Tok]) -> list[Tok]:
    """Vowel forms (cet, bel, mon), elision (l'école, n'a) and contraction (au, du)."""
    toks = list(toks)
    for k in range(len(toks) - 1):
        if toks[k].vowel_form and toks[k + 1].word[0] in VOWELS:
            toks[k] = Tok(
                toks[k].word and toks[k].vowel_form, toks[k].sure, toks[k].possible
            )
    for k in range(len(toks) - 2, -1, -1):
        tok, nxt = toks[k], toks[k + 1]
        if tok.word in ELIDABLE and nxt.word[0].lower() in VOWELS:
            toks[k : k + 2] = [_merge(tok, nxt, tok.word[:-1] + "'" + nxt.word)]
    out: list[Tok] = []
    for tok in toks:
        if out and (out[-1].word, tok.word) in CONTRACTIONS and tok.kind == "art":
            out[-1] = _merge(out[-1], tok, CONTRACTIONS[out[-1].word, tok.word])
        else:
            out.append(tok)
    return out


def english_surface(words: list[str]) -> list[str]:
    """``a`` becomes ``an`` before a vowel letter."""
    return [
        "an" if w == "a" and k + 1 < len(words) and words[k + 1][0] in "aeiou" else w
        for k, w in enumerate(words)
    ]


def pharaoh(toks: list[Tok]) -> str:
    """Links ``i-j`` (sure) and ``i?j`` (possible), source index first, sorted."""
    links = []
    for j, tok in enumerate(toks):
        links += [(i, j, "-") for i in tok.sure]
        links += [(i, j, "?") for i in tok.possible - tok.sure]
    return " ".join(f"{i}{sep}{j}" for i, j, sep in sorted(links))


def sample_pair(gen: Generator) -> tuple[str, str, str]:
    """One ``(english, french, alignment)`` triple."""
    s = Sentence()
    toks = french_surface(gen.clause(s))
    return (
        " ".join(english_surface(s.en)),
        " ".join(t.word for t in toks),
        pharaoh(toks),
    )


def transpose_links(links: str) -> str:
    """Pharaoh links read from the other side: ``i-j`` → ``j-i``, ``i?j`` → ``j?i``
    (sure and possible kept), sorted source index first."""
    flipped = []
    for link in links.split():
        sep = "?" if "?" in link else "-"
        i, j = link.split(sep)
        flipped.append((int(j), int(i), sep))
    return " ".join(f"{i}{sep}{j}" for i, j, sep in sorted(flipped))


def reverse_columns(
    columns: dict[str, dict[str, list[str]]],
) -> dict[str, dict[str, list[str]]]:
    """French→English: each split's sides swapped and its gold links transposed."""
    return {
        split: {
            "src": cols["tgt"],
            "tgt": cols["src"],
            "alignment": [transpose_links(links) for links in cols["alignment"]],
        }
        for split, cols in columns.items()
    }


def phrasebook_columns(
    train_size: int, validation_size: int, test_size: int, seed: int
) -> dict[str, dict[str, list[str]]]:
    """Columns src/tgt/alignment per split, English→French (``reverse_columns`` for
    French→English); no English sentence occurs in two splits.

    Validation and test are drawn first, so they do not depend on ``train_size``.
    """
    gen, seen = Generator(seed), set()
    sizes = {"validation": validation_size, "test": test_size, "train": train_size}
    out = {}
    for split, size in sizes.items():
        cols: dict[str, list[str]] = {"src": [], "tgt": [], "alignment": []}
        misses = 0
        while len(cols["src"]) < size:
            en, fr, links = sample_pair(gen)
            if en in seen:
                misses += 1
                if misses > 100 * (size + 1):
                    raise RuntimeError(
                        f"phrasebook: cannot draw {size} distinct {split} pairs"
                    )
                continue
            seen.add(en)
            cols["src"].append(en)
            cols["tgt"].append(fr)
            cols["alignment"].append(links)
        out[split] = cols
    return {split: out[split] for split in ("train", "validation", "test")}


def generate_phrasebook(
    train_size: int = 20000,
    validation_size: int = 500,
    test_size: int = 500,
    seed: int = 1234,
) -> DatasetDict:
    """The phrasebook as ``DatasetDict(train, validation, test)``."""
    columns = phrasebook_columns(train_size, validation_size, test_size, seed)
    return DatasetDict(
        {split: Dataset.from_dict(cols) for split, cols in columns.items()}
    )
