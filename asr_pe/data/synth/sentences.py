"""Deterministic English sentence generator over the fixed vocabulary.

Sentences come from small part-of-speech templates (statements, questions, commands,
compound sentences joined by a conjunction) with subject-verb agreement, so the speech
has plausible prosody and the language is learnable by a small model. All randomness
comes from the ``random.Random`` passed in, so the same seed gives the same text on
every platform and Python version that keeps ``Random``'s algorithm.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from asr_pe.data.synth import vocab as V

# Longest sentence (in words) a single template can produce is about 16; above this
# many remaining words the generator stops searching for a sentence of the right length.
_FREE_CHOICE_WORDS = 16
# Candidates drawn when the remaining word budget is small, to land close to it.
_CANDIDATES = 8
# Words starting with a vowel letter that take "a" (they start with a consonant sound).
_A_BEFORE = frozenset({"one", "useful"})


@dataclass(frozen=True)
class Sentence:
    """One sentence: its words (lowercase, no punctuation) and whether it is a question."""

    words: tuple[str, ...]
    question: bool = False

    def spoken(self) -> str:
        """Text for the synthesizer: punctuation gives sentence-final intonation and pauses."""
        return " ".join(self.words) + ("?" if self.question else ".")


def normalize_text(text: str) -> str:
    """Map text to what a character tokenizer expects: ``[a-z']`` words, single spaces.

    Anything else (punctuation, digits, other letters) becomes a word break; apostrophes
    survive only inside a word ("don't"), not at its edges.
    """
    text = re.sub(r"[^a-z']+", " ", text.lower())
    text = re.sub(r"(?<![a-z])'|'(?![a-z])", " ", text)
    return " ".join(text.split())


def transcript(sentences: list[Sentence]) -> str:
    """The reference transcript of a list of sentences (lowercase, no punctuation)."""
    return " ".join(" ".join(s.words) for s in sentences)


def spoken_text(sentences: list[Sentence]) -> str:
    """The text handed to espeak-ng for a list of sentences."""
    return " ".join(s.spoken() for s in sentences)


# ------------------------------------------------------------------ phrase builders
def _article(det: str, next_word: str) -> str:
    if det == "a" and next_word[0] in "aeiou" and next_word not in _A_BEFORE:
        return V.ARTICLE_AN
    return det


def _modified(rng: random.Random, noun: str, adj_prob: float) -> list[str]:
    words: list[str] = []
    if rng.random() < adj_prob:
        if rng.random() < 0.15:
            words.append(rng.choice(("very", "really", "quite")))
        words.append(rng.choice(V.ADJECTIVES))
    words.append(noun)
    return words


def _np_singular(rng: random.Random, nouns: tuple[str, ...], adj_prob: float = 0.4) -> list[str]:
    det = rng.choice(V.SINGULAR_DETERMINERS)
    words = _modified(rng, rng.choice(nouns), adj_prob)
    return [_article(det, words[0])] + words


def _np_plural(rng: random.Random, nouns: tuple[str, ...], adj_prob: float = 0.4) -> list[str]:
    det = rng.choice(V.PLURAL_DETERMINERS)
    return [det] + _modified(rng, rng.choice(nouns), adj_prob)


def _np_food(rng: random.Random) -> list[str]:
    if rng.random() < 0.25:
        container = rng.choice(("cup", "glass", "bowl", "jar", "bottle", "plate"))
        return ["a", container, "of"] + _modified(rng, rng.choice(V.FOOD_NOUNS), 0.2)
    det = rng.choice(("the", "some", "more", "my", "our", "their", "his", "her", "your"))
    return [det] + _modified(rng, rng.choice(V.FOOD_NOUNS), 0.3)


def _np_place(rng: random.Random) -> list[str]:
    det = rng.choice(("the", "the", "the", "a", "our", "my", "their", "that"))
    words = _modified(rng, rng.choice(V.PLACE_NOUNS), 0.3)
    return [_article(det, words[0])] + words


@dataclass(frozen=True)
class _Subject:
    words: list[str]
    third_singular: bool  # takes "reads", "is", "does"
    first_singular: bool = False  # "i" takes "am"


def _subject(rng: random.Random) -> _Subject:
    r = rng.random()
    if r < 0.45:
        nouns = V.PERSON_NOUNS if rng.random() < 0.7 else V.ANIMAL_NOUNS
        return _Subject(_np_singular(rng, nouns), True)
    if r < 0.7:
        nouns = V.PERSON_NOUNS_PLURAL if rng.random() < 0.7 else V.ANIMAL_NOUNS_PLURAL
        return _Subject(_np_plural(rng, nouns), False)
    pronoun = rng.choice(V.SUBJECT_PRONOUNS)
    return _Subject([pronoun], pronoun in V.THIRD_PERSON_PRONOUNS, pronoun == "i")


def _verb_phrase_parts(rng: random.Random) -> tuple[tuple[str, str, str], list[str]]:
    """A transitive verb triple with a fitting object."""
    r = rng.random()
    if r < 0.55:
        verb = rng.choice(V.THING_VERBS)
        if rng.random() < 0.75:
            obj = _np_singular(rng, V.THING_NOUNS)
        else:
            obj = _np_plural(rng, V.THING_NOUNS_PLURAL)
    elif r < 0.75:
        verb = rng.choice(V.FOOD_VERBS)
        obj = _np_food(rng)
    else:
        verb = rng.choice(V.PERSON_VERBS)
        if rng.random() < 0.3:
            obj = [rng.choice(V.OBJECT_PRONOUNS)]
        else:
            nouns = V.PERSON_NOUNS if rng.random() < 0.7 else V.ANIMAL_NOUNS
            obj = _np_singular(rng, nouns)
    return verb, obj


def _time_phrase(rng: random.Random) -> list[str]:
    r = rng.random()
    if r < 0.3:
        return [rng.choice(V.TIME_ADVERBS)]
    if r < 0.5:
        return ["in", "the", rng.choice(("morning", "afternoon", "evening"))]
    if r < 0.7:
        return [rng.choice(V.TIME_PHRASE_HEADS), rng.choice(V.TIME_NOUNS)]
    if r < 0.85:
        return ["on", rng.choice(V.TIME_NOUNS[-7:])]  # the weekdays
    return [rng.choice(("after", "before")), rng.choice(V.MEAL_NOUNS)]


def _adjunct(rng: random.Random, prob: float = 0.6) -> list[str]:
    """An optional place, time or manner phrase after the verb phrase."""
    if rng.random() >= prob:
        return []
    r = rng.random()
    if r < 0.45:
        return [rng.choice(V.PREPOSITIONS)] + _np_place(rng)
    if r < 0.75:
        return _time_phrase(rng)
    return [rng.choice(V.MANNER_ADVERBS)]


def _be(subject: _Subject, past: bool) -> str:
    if past:
        return "was" if subject.third_singular or subject.first_singular else "were"
    if subject.first_singular:
        return "am"
    return "is" if subject.third_singular else "are"


def _finite(verb: tuple[str, str, str], subject: _Subject, past: bool) -> str:
    if past:
        return verb[2]
    return verb[1] if subject.third_singular else verb[0]


# ------------------------------------------------------------------ templates
def _transitive(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    verb, obj = _verb_phrase_parts(rng)
    past = rng.random() < 0.5
    adverb = [rng.choice(("always", "often", "never", "sometimes", "usually", "also", "still"))] \
        if rng.random() < 0.1 else []
    return subject.words + adverb + [_finite(verb, subject, past)] + obj + _adjunct(rng)


def _intransitive(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    verb = rng.choice(V.INTRANSITIVE_VERBS)
    return subject.words + [_finite(verb, subject, rng.random() < 0.5)] + _adjunct(rng, 0.7)


def _copula(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    words = subject.words + [_be(subject, rng.random() < 0.5)]
    if rng.random() < 0.25:
        words.append("not")
    if rng.random() < 0.3:
        words.append(rng.choice(V.INTENSIFIERS))
    words.append(rng.choice(V.ADJECTIVES))
    if rng.random() < 0.2:
        words += ["and", rng.choice(V.ADJECTIVES)]
    return words + _adjunct(rng, 0.3)


def _there_is(rng: random.Random) -> list[str]:
    past = rng.random() < 0.5
    place = [rng.choice(V.PREPOSITIONS[:8])] + _np_place(rng)
    if rng.random() < 0.5:
        thing = _modified(rng, rng.choice(V.THING_NOUNS + V.ANIMAL_NOUNS), 0.5)
        return ["there", "was" if past else "is", _article("a", thing[0])] + thing + place
    count = rng.choice(V.NUMBER_WORDS[1:] + ("many", "some", "several"))
    thing = _modified(rng, rng.choice(V.THING_NOUNS_PLURAL + V.ANIMAL_NOUNS_PLURAL), 0.4)
    return ["there", "were" if past else "are", count] + thing + place


def _weather(rng: random.Random) -> list[str]:
    past = rng.random() < 0.5
    adj = rng.choice(V.WEATHER_ADJECTIVES)
    r = rng.random()
    if r < 0.4:
        subject = ["the", rng.choice(("weather", "sky", "night", "morning", "day", "evening"))]
        return subject + ["was" if past else "is", adj] + _time_phrase(rng)[:3]
    if r < 0.7:
        return ["it", "was" if past else "is", rng.choice(("very", "quite", "really")), adj,
                rng.choice(("today", "outside", "tonight", "again"))]
    noun = rng.choice(("rain", "snow", "fog", "storm", "sun", "cloud"))
    return ["the", noun] + (["came", "back"] if past else ["is", "coming"]) + _time_phrase(rng)


def _modal(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    words = subject.words + [rng.choice(V.MODALS)]
    if rng.random() < 0.2:
        words.append("not")
    if rng.random() < 0.7:
        verb, obj = _verb_phrase_parts(rng)
        return words + [verb[0]] + obj + _adjunct(rng, 0.5)
    return words + [rng.choice(V.INTRANSITIVE_VERBS)[0]] + _adjunct(rng, 0.7)


def _negative(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    r = rng.random()
    if r < 0.25 and subject.third_singular:
        be = rng.choice(("isn't", "wasn't"))
        return subject.words + [be, rng.choice(V.ADJECTIVES)] + _adjunct(rng, 0.3)
    if r < 0.45:
        aux = rng.choice(("can't", "won't"))
    elif r < 0.7:
        aux = "didn't"
    else:
        aux = "doesn't" if subject.third_singular else "don't"
    verb, obj = _verb_phrase_parts(rng)
    return subject.words + [aux, verb[0]] + obj + _adjunct(rng, 0.4)


def _going(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    past = rng.random() < 0.5
    if rng.random() < 0.6:
        verb = rng.choice((("go", "goes", "went"), ("walk", "walks", "walked"),
                           ("run", "runs", "ran"), ("hurry", "hurries", "hurried"),
                           ("come", "comes", "came"), ("travel", "travels", "traveled")))
        return subject.words + [_finite(verb, subject, past), "to"] + _np_place(rng) \
            + _adjunct(rng, 0.3)
    verb = rng.choice((("wait", "waits", "waited"), ("look", "looks", "looked")))
    target = _np_singular(rng, V.PERSON_NOUNS + V.THING_NOUNS)
    where = ["at"] + _np_place(rng) if rng.random() < 0.5 else []
    return subject.words + [_finite(verb, subject, past), "for"] + target + where


def _possession(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    if rng.random() < 0.5:
        verb = "had"
    else:
        verb = "has" if subject.third_singular else "have"
    if rng.random() < 0.5:
        obj = _np_singular(rng, V.THING_NOUNS + V.ANIMAL_NOUNS)
    else:
        obj = [rng.choice(V.NUMBER_WORDS[1:])] + _modified(
            rng, rng.choice(V.THING_NOUNS_PLURAL + V.ANIMAL_NOUNS_PLURAL), 0.4)
    return subject.words + [verb] + obj + _adjunct(rng, 0.4)


def _contracted(rng: random.Random) -> list[str]:
    r = rng.random()
    if r < 0.3:
        start = [rng.choice(("i'm", "we're", "they're", "she's", "he's"))]
        rest = [rng.choice(V.INTENSIFIERS)] if rng.random() < 0.3 else []
        return start + rest + [rng.choice(V.ADJECTIVES)] + _adjunct(rng, 0.5)
    if r < 0.55:
        noun = _modified(rng, rng.choice(V.THING_NOUNS + V.ANIMAL_NOUNS), 0.7)
        return [rng.choice(("it's", "that's")), _article("a", noun[0])] + noun
    if r < 0.8:
        noun = _modified(rng, rng.choice(V.THING_NOUNS + V.ANIMAL_NOUNS), 0.5)
        place = [rng.choice(V.PREPOSITIONS[:8])] + _np_place(rng)
        return ["there's", _article("a", noun[0])] + noun + place
    verb, obj = _verb_phrase_parts(rng)
    return [rng.choice(("let's", "don't", "please"))] + [verb[0]] + obj + _adjunct(rng, 0.5)


def _clause_report(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    verb = rng.choice(V.CLAUSE_VERBS)
    inner = rng.choice((_transitive, _intransitive, _copula))(rng)
    that = ["that"] if rng.random() < 0.5 else []
    return subject.words + [_finite(verb, subject, rng.random() < 0.5)] + that + inner


def _imperative(rng: random.Random) -> list[str]:
    verb, obj = _verb_phrase_parts(rng)
    please = ["please"] if rng.random() < 0.4 else []
    return please + [verb[0]] + obj + _adjunct(rng, 0.6)


def _yes_no_question(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    verb, obj = _verb_phrase_parts(rng)
    if rng.random() < 0.5:
        aux = "did"
    else:
        aux = "does" if subject.third_singular else "do"
    return [aux] + subject.words + [verb[0]] + obj + _adjunct(rng, 0.4)


def _wh_question(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    r = rng.random()
    if r < 0.35:
        verb, obj = _verb_phrase_parts(rng)
        wh = rng.choice(("where", "why", "when", "how"))
        return [wh, "did"] + subject.words + [verb[0]] + obj
    if r < 0.55:
        verb = rng.choice(V.THING_VERBS)
        aux = "does" if subject.third_singular else "do"
        return ["what", rng.choice((aux, "did"))] + subject.words + [verb[0]] + _adjunct(rng, 0.3)
    if r < 0.75:
        verb, obj = _verb_phrase_parts(rng)
        return ["who", verb[2]] + obj + _adjunct(rng, 0.4)
    if r < 0.9:
        return ["where", _be(subject, rng.random() < 0.5)] + subject.words
    return ["is", "there", "a", rng.choice(V.THING_NOUNS), rng.choice(("here", "there"))]


def _be_question(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    return [_be(subject, rng.random() < 0.5)] + subject.words + [rng.choice(V.ADJECTIVES)]


def _modal_question(rng: random.Random) -> list[str]:
    subject = _subject(rng)
    verb, obj = _verb_phrase_parts(rng)
    return [rng.choice(("can", "will", "should", "could", "would"))] + subject.words + [verb[0]] \
        + obj + _adjunct(rng, 0.4)


_STATEMENTS = (
    (_transitive, 6), (_intransitive, 3), (_copula, 2), (_going, 2), (_possession, 1),
    (_modal, 2), (_negative, 2), (_there_is, 1), (_weather, 1), (_contracted, 1),
    (_clause_report, 1), (_imperative, 1),
)
_QUESTIONS = ((_yes_no_question, 2), (_wh_question, 2), (_be_question, 1), (_modal_question, 1))
_QUESTION_PROB = 0.15
_COMPOUND_PROB = 0.2
_ANSWER_PROB = 0.04  # "yes ..." / "no ..." before a statement


def _weighted(rng: random.Random, table) -> object:
    total = sum(weight for _, weight in table)
    r = rng.random() * total
    for item, weight in table:
        r -= weight
        if r < 0:
            return item
    return table[-1][0]


def make_sentence(rng: random.Random, *, allow_compound: bool = True) -> Sentence:
    """One random sentence: a statement, a question, or two statements joined by a conjunction."""
    if rng.random() < _QUESTION_PROB:
        return Sentence(tuple(_weighted(rng, _QUESTIONS)(rng)), question=True)
    words = _weighted(rng, _STATEMENTS)(rng)
    if allow_compound and rng.random() < _COMPOUND_PROB:
        second = _weighted(rng, _STATEMENTS[:6])(rng)
        words = words + [rng.choice(V.CONJUNCTIONS)] + second
    if rng.random() < _ANSWER_PROB:
        words = [rng.choice(("yes", "no"))] + words
    return Sentence(tuple(words))


def generate_sentences(rng: random.Random, num_words: int) -> list[Sentence]:
    """Sentences totalling roughly ``num_words`` words (at least one sentence).

    While many words remain, sentences are drawn freely; near the end, the candidate
    whose length is closest to the remaining budget is taken, so short requests give
    short sentences and long requests overshoot by at most a word or two.
    """
    if num_words < 1:
        raise ValueError(f"num_words must be >= 1, got {num_words}")
    sentences: list[Sentence] = []
    total = 0
    while not sentences or num_words - total >= 2:
        remaining = num_words - total
        if remaining > _FREE_CHOICE_WORDS:
            sentence = make_sentence(rng)
        else:
            candidates = [make_sentence(rng, allow_compound=remaining >= 8)
                          for _ in range(_CANDIDATES)]
            sentence = min(candidates, key=lambda s: abs(len(s.words) - remaining))
        sentences.append(sentence)
        total += len(sentence.words)
    return sentences


def generate_text(rng: random.Random, num_words: int) -> str:
    """A lowercase transcript of roughly ``num_words`` words (no punctuation)."""
    return transcript(generate_sentences(rng, num_words))
