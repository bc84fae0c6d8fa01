"""How far the best results support an answer: ``high``, ``low`` or ``none``, and why.

An agent reading search results or research evidence needs to know whether to answer, to look
further, or to say that it does not know. Ranking scores do not tell it: a search returns its
best k however poor they are. This reads the best lines (results or evidence, best first, at
most TOP_LINES) against the question:

* the question's *subject*: the people it names who speak in the lines read (transcripts label
  each turn ``Caroline (D2:3): …``), else the names it mentions ("LiFePO4");
* its *content words*: the rest, stop words and the verbs that frame a question (FRAME_VERBS:
  "say", "show", "use" …) removed ("realize", "charity", "race"); Chinese and Japanese text
  gives its bigrams, as search does;
* **subject share**: the share of the lines' retrieval score held by lines about the subject —
  said by a person the question names, or naming what it names (in the line, the title of
  its page or its section's heading path: "People > Jonas Berg");
* **support**: the largest share of content words in one line about the subject (the line,
  its headings and its page title without date words: "Küche: Gusseisen" says what a line is
  about, "Session 3 — 8 May, 2023" only when it was said).

A question about something the memory holds finds it said by, or of, the one it asks about. A
question that swaps the person ("What did Caroline realize after her charity race?" when the
race was Melanie's) finds its words in someone else's lines: the subject share drops although
every word may match. So: ``none`` when nothing was found, a name of the question appears in no
line, the subject share is under ``none_share``, or no line about the subject the question
names holds any of two or more content words (one word alone may be said otherwise: "when did
we *pick* LiFePO4" is answered by "the team *chose*");
``none`` too when the question has no word to check the lines against ("???", "the of and");
``low`` when the question names nobody and no line holds any of its content words: the lines
are then only as much about the question as the search made them, and a vector hit may say it
in other words ("espresso machine descaling" for "coffee maker maintenance");
``high`` when the subject share reaches ``high_share`` and a line about the subject holds
``high_support`` of the content words; ``low`` otherwise. The reason says which. The score
margin (best over runner-up) is reported too; it did not separate answerable from unanswerable
questions on LoCoMo, so it decides nothing. Thresholds (RESEARCH, SEARCH): bench/confidence.py
(LoCoMo dev, leave-one-conversation-out figures beside the in-sample ones; BENCHMARKS.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .index.cjk import cjk_query_terms, has_cjk
from .index.keyword import STOP_WORDS, query_terms
from .markdown import below_title
from .salience import names

__all__ = ["DEFAULT", "LEVELS", "RESEARCH", "SEARCH", "Confidence", "Line", "Signals",
           "Thresholds", "assess", "classify", "signals"]

LEVELS = ("high", "low", "none")
TOP_LINES = 8
"""Best lines (results or evidence, best first) that are read."""

FRAME_VERBS = frozenset({
    "say", "says", "said", "saying", "tell", "tells", "told", "mention", "mentions",
    "mentioned", "describe", "describes", "described", "explain", "explains", "explained",
    "show", "shows", "showed", "shown", "use", "uses", "used", "using",
})
"""Verbs that frame a question ("what did the heat test *show*?", "what sensors does the
controller *use*?", "what did Caroline *say* about …") rather than name its content: the line
that answers seldom repeats them, so they are not content words (support would call such a
line lacking)."""

_SPEAKER = re.compile(
    r"^\s*(?:\*\*|__)?([A-Z][\w'’ .-]{0,40}?)(?:\*\*|__)?\s*(?:\([^)]{0,30}\))?\s*:(?:\*\*|__)?\s")
"""A transcript turn's label ("Caroline (D2:3): ", "**Ana:** " in Markdown). Not a list
item's: "- InSAR: radar interferometry" defines a term, nobody says it."""
NOT_SPEAKERS = frozenset({"when", "who", "topic", "project", "related"})
"""Labels of the context paragraph the memorizer writes ("When: unknown. Who: Ana and Ben.
Topic: …"): nobody called "When" speaks there."""
_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
"""Search operators a user may type ("stake AND melt"): capitalised, but no names."""
_POSSESSIVE = re.compile(r"['’]s$")
_LEADING_LOWER = re.compile(r"^(?:[a-z]+\s+)+")


class Line(NamedTuple):
    """One line read: its text, its retrieval score, the title of its page and the heading
    path of its section ("People > Jonas Berg": what the line is about may be named there
    only)."""

    text: str
    score: float
    title: str = ""
    heading: str = ""


@dataclass(frozen=True)
class Thresholds:
    none_share: float = 0.7
    """Subject share under this: none."""
    high_share: float = 0.8
    """Subject share at least this, with ``high_support``: high."""
    high_support: float = 0.75
    """Share of content words a line about the subject must hold for high (fixed, not tuned)."""


RESEARCH = Thresholds(none_share=0.7, high_share=0.8)
"""For research evidence. Tuned on LoCoMo dev by bench/confidence.py (its table in
docs/BENCHMARKS.md has the rates): none_share maximises none on unanswerable (category 5) minus
none on answerable questions; high_share is the lowest giving high to at most 2% of
unanswerable questions. The value each leave-one-conversation-out fold picks is in that table."""
SEARCH = Thresholds(none_share=0.7, high_share=0.95)
"""For search results, tuned the same way. high_share 0.95 keeps high under 2% of unanswerable
questions with a margin (the in-sample best, 0.9, gives it to more of them and to more
answerable ones); the folds' picks, and what they score held out, are in docs/BENCHMARKS.md."""
DEFAULT = RESEARCH


@dataclass(frozen=True)
class Signals:
    """What the best lines say about the question (see the module docstring)."""

    lines: int
    entities: tuple[str, ...]
    subject: tuple[str, ...]
    """The entities the lines are matched against (speakers among them, if any)."""
    by_speaker: bool
    """Whether the subject is people who speak in the lines (a line is theirs if they say it)."""
    words: tuple[str, ...]
    entities_missing: tuple[str, ...]
    subject_share: float
    support: float
    words_missing: tuple[str, ...]
    """Content words the best line about the subject lacks."""
    margin: float
    """(best score - runner-up score) / best score; 0 with fewer than two lines."""
    others: tuple[str, ...]
    """Speakers of the other lines, most weight first."""

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "entities": list(self.entities),
                "subject": list(self.subject), "words": list(self.words),
                "entities_missing": list(self.entities_missing),
                "subject_share": round(self.subject_share, 3),
                "support": round(self.support, 3), "words_missing": list(self.words_missing),
                "margin": round(self.margin, 3)}


@dataclass(frozen=True)
class Confidence:
    level: str
    """high | low | none"""
    reason: str
    signals: Signals

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "reason": self.reason, "signals": self.signals.to_json()}


def _stem(word: str) -> str:
    """Plural and tense endings off, and a final e, so "realized" meets "realize" and
    "painted" "painting", but "grandpa" is not "grandma"."""
    for ending, root in (("ies", 3), ("ing", 4), ("ed", 3), ("es", 3), ("s", 3)):
        if word.endswith(ending) and len(word) - len(ending) >= root:
            word = word[: -len(ending)] + ("y" if ending == "ies" else "")
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


_DATE_WORD = re.compile(
    r"\b(?:\d[\d:./-]*|[ap]m|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b", re.IGNORECASE)


def _undated(title: str) -> str:
    """A page title without its date words: "Küche: Gusseisen" says what its lines are about,
    "Session 3 — 1:56 pm on 8 May, 2023" only when they were said (and would support any
    question about May)."""
    return _DATE_WORD.sub(" ", title)


def _speaker(line: str) -> str:
    match = _SPEAKER.match(line)
    who = match.group(1).strip().lower() if match else ""
    return "" if who in NOT_SPEAKERS else who


OPENING_VERBS = frozenset({
    "plan", "tell", "summarize", "summarise", "describe", "list", "explain", "show", "give",
    "find", "write", "draft", "remind", "check", "compare", "prepare", "review", "recall",
    "outline", "help", "make", "book", "schedule", "update", "create", "get", "name", "note",
    "ask", "email", "call", "send", "fix", "answer", "look", "search", "see", "read", "let",
    "remember", "suggest", "recommend", "organize", "organise", "say", "brief", "catch",
})
"""Verbs that open a task or request ("Plan Lena's garden work", "Tell Ben …"): capitalised
only because they start the sentence, they are no part of the name after them ("Plan Lena"
is Lena). "New York", "San Diego" keep their first word: it is no such verb."""


def _without_opening_verb(name: str, question: str) -> str:
    """``name`` without a sentence-opening verb glued to it (see OPENING_VERBS)."""
    first, _, rest = name.partition(" ")
    if not rest or first.lower() not in OPENING_VERBS:
        return name
    opens = re.search(rf"(?:^|[.!?:]\s+){re.escape(first)}\s", question)
    return rest if opens else name


def question_terms(question: str) -> tuple[list[str], list[str]]:
    """(entities, content words) of a question."""
    entities = []
    # The verb that opens a task frames it, as FRAME_VERBS do ("Summarize what Lena did").
    opening = re.match(r"\s*([A-Za-z]+)", question)
    framing = {opening.group(1).lower()} & OPENING_VERBS if opening else set()
    for found in names(question):  # the whole word: names() stops at digits ("LiFePO4")
        name = _without_opening_verb(found, question)
        if name != found:
            framing.add(found.split()[0].lower())
        whole = re.search(rf"{re.escape(name)}[\w-]*", question)
        entities.append(_LEADING_LOWER.sub("", _POSSESSIVE.sub("", whole.group(0) if whole
                                                                 else name)))
    entities = [" ".join(w for w in e.split() if w not in _OPERATORS) for e in entities]
    entities = [e for e in dict.fromkeys(entities) if e]
    entity_words = {w for e in entities for w in query_terms(e)}
    # Stop words are no content words even when nothing else is left ("the of and"):
    # query_terms keeps them then, for search's sake.
    words = [w for w in query_terms(question) if w not in entity_words and len(w) > 1
             and w not in FRAME_VERBS and w not in STOP_WORDS and w not in framing]
    # Chinese and Japanese have no spaces: their words are the bigrams search uses (cjk.py).
    return entities, words + cjk_query_terms(question)


def _present(words: set[str], text: str) -> set[str]:
    """Which of the question's (stemmed) ``words`` ``text`` holds."""
    found = {_stem(w) for w in query_terms(text)} & words
    cjk = {w for w in words if has_cjk(w) and w in text}
    # "电池安全" gives 电池, 池安, 安全: the middle bigram spans two words, and a line that says
    # 电池 … 安全 holds the question's words without it. It counts as held where the bigrams
    # either side of it are.
    joins = {w for w in words if has_cjk(w) and len(w) == 2 and w not in cjk
             and any(p[-1] == w[0] for p in cjk) and any(p[0] == w[-1] for p in cjk)}
    return found | cjk | joins


def signals(question: str, lines: Sequence[Line]) -> Signals:
    """The signals of ``lines`` (best first) for ``question``."""
    entities, words = question_terms(question)
    # A page's H1 repeats its title (counted already); a transcript's holds only its date
    # ("Session 3 — 8 May, 2023"), whose words would support any question about that month.
    top = [line._replace(score=max(0.0, line.score), heading=below_title(line.heading, line.title))
           for line in lines[:TOP_LINES]]
    said = [(_speaker(line.text), f"{line.title}\n{line.heading}\n{line.text}".lower())
            for line in top]
    speakers = {who for who, _text in said if who}
    subject = [e for e in entities if e.lower() in speakers]
    named = {e: re.compile(rf"\b{re.escape(e.lower())}\b") for e in entities}
    missing = tuple(e for e in entities
                    if not any(e.lower() == who or named[e].search(text) for who, text in said))
    stems = {_stem(w) for w in words}
    total = about = 0.0
    support = -1.0
    lacking: tuple[str, ...] = tuple(words)
    others: dict[str, float] = {}
    for line, (who, lowered) in zip(top, said, strict=True):
        weight = line.score or 1e-9  # all-zero scores: count lines
        total += weight
        if subject:
            tied = who in {e.lower() for e in subject}
        else:
            tied = not entities or any(named[e].search(lowered) for e in entities)
        if not tied:
            if who:
                others[who] = others.get(who, 0.0) + weight
            continue
        about += weight
        present = _present(stems, f"{_undated(line.title)}\n{line.heading}\n{line.text}")
        share = len(present) / len(stems) if stems else 1.0
        if share > support:
            support, lacking = share, tuple(w for w in words if _stem(w) not in present)
    scores = [line.score for line in top]
    margin = (scores[0] - scores[1]) / scores[0] if len(scores) > 1 and scores[0] > 0 else 0.0
    return Signals(len(top), tuple(entities), tuple(subject or entities), bool(subject),
                   tuple(words), missing, about / total if total else 0.0, max(0.0, support),
                   lacking, margin, tuple(sorted(others, key=lambda w: -others[w])))


def classify(found: Signals, thresholds: Thresholds = DEFAULT) -> tuple[str, str]:
    """(level, reason) for ``found`` under ``thresholds``."""
    if not found.lines:
        return "none", "nothing was found"
    if not found.entities and not found.words:
        # Nothing says the lines are about the question: they matched stop words at most.
        return "none", "the question has no word to check the results against"
    if found.entities_missing:
        return "none", f"no result mentions {_join(found.entities_missing)}"
    subject = _join(found.subject)
    theirs = f"said by {subject}" if found.by_speaker else f"about {subject}"
    percent = f"{found.subject_share:.0%}"
    if found.subject and found.subject_share < thresholds.none_share:
        others = f"; the others are {_join(found.others)}'s" if found.by_speaker and found.others \
            else ""
        return "none", (f"only {percent} of the best results' weight is in lines {theirs}"
                        f"{others}")
    where = f" {theirs}" if found.subject else ""
    if len(found.words) >= 2 and found.support == 0:
        if found.subject:
            return "none", f"no line{where} holds any of: {', '.join(found.words)}"
        # Naming nobody, the lines are only as much about the question as the search made
        # them, and a vector hit may say it in other words ("espresso machine descaling" for
        # "coffee maker maintenance"): look further rather than give up.
        return "low", (f"no line holds any of: {', '.join(found.words)} (a match by meaning "
                       "at most)")
    if (found.subject_share >= thresholds.high_share
            and found.support >= thresholds.high_support):
        held = "every question word" if not found.words_missing else \
            f"all question words but {', '.join(found.words_missing)}"
        if not found.subject:
            return "high", f"a line holds {held}"
        return "high", (f"{percent} of the best results' weight is in lines {theirs}, one of "
                        f"which holds {held}")
    if found.subject_share < thresholds.high_share:
        return "low", f"{percent} of the best results' weight is in lines {theirs}"
    return "low", f"the best line{where} lacks: {', '.join(found.words_missing)}"


def assess(question: str, lines: Sequence[Line],
           thresholds: Thresholds = DEFAULT) -> Confidence:
    """The confidence ``lines`` (best first) give an answer to ``question``."""
    found = signals(question, lines)
    level, reason = classify(found, thresholds)
    return Confidence(level, reason, found)


def _join(items: Sequence[str]) -> str:
    shown = [i.title() if i.islower() else i for i in items]
    if not shown:
        return ""
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
