"""The heuristic researcher: GAM's plan → search → integrate → reflect loop without a model.

Plan: the question itself is searched three ways — hybrid chunk search, pure vector search
(meaning: "activities" finds "went swimming") and page search (the best chunk of each of the
best pages, for answers spread over many pages) — then by an entity-focused keyword query per
name in it and a keyword query of its content words; page names or uuids in the question are
read directly (page_id tool). The ``lines`` tool ranks the question's lines on their own
(deepfield.line_rank); its order is fused with the votes at the end (research/evidence.py).
Without an embedder only the keyword tools run.
Fields whose model has a sparse head are also searched by latent terms (research/latent.py):
the kind a question names ("sports") shares features with its instances ("went surfing").
Reflect: the evidence covers the question when every entity appears in it, most content words
do, and the expected answer type is present (a date for "when", a number for "how many",
a name for "who"). If not, the next round follows *bridge entities* — names that the best
evidence mentions but the question does not (multi-hop: "the city where X's sister lives"
finds the sister first) — and asks again for whatever is still missing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..index.keyword import query_terms
from ..salience import has_date, has_number, names
from . import evidence
from .evidence import Evidence

_QUESTION_WORDS = frozenset({"What", "When", "Where", "Who", "Whom", "Whose", "Why", "How",
                             "Which", "Did", "Does", "Do", "Is", "Are", "Was", "Were", "Has",
                             "Have", "Can", "Could", "Would", "Should", "Will", "In", "On"})
_PAGE_REF = re.compile(r"\b([a-z0-9]+(?:-[a-z0-9]+)+)(?:\.md)?\b|\b([0-9a-f]{8}-[0-9a-f-]{27,})\b")
COVERED_KEYWORDS = 0.6
"""Share of the question's content words the evidence must contain to count as covering it."""
TOP_EVIDENCE = 12
"""Evidence items (best first) that reflection reads, about what a 1,000-token context holds."""
MAX_BRIDGES = 3
LATENT_TOOLS = ("latent", "latent_lines")
"""Latent-term searches of chunks and of single record lines (research/latent.py)."""
LATENT_SKIPS = ("date",)
"""Answer types whose questions skip them: a date question names its event exactly."""
LIST_PAGES = 6
"""Distinct pages the top evidence must span before a list question counts as covered."""


@dataclass
class QuestionPlan:
    question: str
    entities: list[str]
    keywords: list[str]
    answer_type: str
    page_refs: list[str] = field(default_factory=list)
    breadth: bool = False
    """The answer is several things found in several places ("what books has X read", "what
    do X and Y both like", "how many times …"): packing then trades words per line for lines."""

    def to_json(self) -> dict[str, Any]:
        return {"entities": self.entities, "keywords": self.keywords,
                "answer_type": self.answer_type, "page_refs": self.page_refs,
                "breadth": self.breadth}


@dataclass
class Coverage:
    entities_missing: list[str]
    keywords_missing: list[str]
    keyword_share: float
    answer_found: bool

    @property
    def complete(self) -> bool:
        return (not self.entities_missing and self.keyword_share >= COVERED_KEYWORDS
                and self.answer_found)

    def to_json(self) -> dict[str, Any]:
        return {"entities_missing": self.entities_missing,
                "keywords_missing": self.keywords_missing,
                "keyword_share": round(self.keyword_share, 3),
                "answer_found": self.answer_found, "complete": self.complete}


_LIST = re.compile(
    r"^(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?(?:[\w+-]+\s+){0,2}?"
    r"(?!(?:is|was|has|does|as|us|this|his|its)\b)[a-z+-]{3,}s\b", re.IGNORECASE)


_BREADTH = re.compile(
    r"\b(?:both|in common|all the)\b"  # two people's shared things; "all the places …"
    r"|\bin what ways\b"
    # Counting needs every occurrence (durations such as "how many years" do not).
    r"|\bhow many (?:times|(?!(?:years|months|weeks|days|hours|minutes)\b)[a-z]+s)\b"
    # "What are Joanna's hobbies", "what are some changes …": a plural subject.
    r"|\b(?:what|which) (?:are|were) (?:some )?(?:of )?(?:[\w’']+ ){0,2}?[a-z]{3,}s\b"
    # "What has Melanie painted": everything someone has done, over time.
    r"|\bwhat (?:has|have) \w+(?: and \w+)? \w+ed\b", re.IGNORECASE)


def _entity(name: str) -> str:
    words = [w for w in name.split() if w not in _QUESTION_WORDS]
    return re.sub(r"['’]s$", "", " ".join(words))


_ASKED = re.compile(
    r"\b(?P<date>when|what (?:date|day|year|month|time)|how long ago)\b"
    r"|\b(?P<number>how (?:many|much|often|long|old|far)|what (?:number|percentage))\b"
    r"|\b(?P<person>who|whose|whom)\b|\b(?P<place>where)\b|\b(?P<other>what|which|why|how)\b",
    re.IGNORECASE)

_YES_NO = re.compile(r"\s*(?:did|does|do|is|are|was|were|has|have|had|can|could|would|should|"
                     r"will)\b", re.IGNORECASE)


def _answer_type(question: str) -> str:
    """What kind of thing answers ``question``, read from its first question word: "Who
    supports X when …" asks for people, not a date; "What did X do when …" for a fact, and
    "Did X … when …" for a yes or no."""
    if _YES_NO.match(question):
        return "fact"
    match = _ASKED.search(question)
    kind = match.lastgroup if match else None
    if kind is not None and kind != "other":
        return kind
    if _LIST.search(question):
        return "list"  # "What activities …": answers spread over many pages
    return "fact"


def analyse(question: str) -> QuestionPlan:
    entities = [_entity(e) for e in names(question) if e not in _QUESTION_WORDS]
    entities = [e for e in dict.fromkeys(entities) if e]
    entity_words = {w.lower() for e in entities for w in e.split()}
    keywords = [t for t in query_terms(question) if t not in entity_words]
    answer = _answer_type(question)
    refs = [m.group(1) or m.group(2) for m in _PAGE_REF.finditer(question)]
    breadth = answer == "list" or bool(_BREADTH.search(question))
    return QuestionPlan(question, entities, keywords, answer, refs, breadth)


def reference_queries(question: str, *, dense: bool) -> list[tuple[str, str]]:
    """The line-ranked searches of the question whose orders the final ranking fuses with the
    votes: hybrid lines, and with vectors also keyword-only lines (a keyword-only store's
    "lines" search already is one)."""
    queries = [("lines", question)]
    if dense and evidence.KEYWORD_REFERENCE_WEIGHT:
        queries.append(("keyword_lines", question))
    return queries


def first_queries(plan: QuestionPlan, *, dense: bool,
                  latent: bool = False) -> list[tuple[str, str]]:
    """Round one: (tool, query) pairs (``latent``: the fields have latent terms)."""
    queries: list[tuple[str, str]] = [("hybrid" if dense else "bm25", plan.question)]
    if dense:
        # Meaning, not words: "activities" finds "went swimming", which no keyword does.
        queries.append(("vector", plan.question))
    if latent and plan.answer_type not in LATENT_SKIPS:  # see research/latent.py
        queries += [(tool, plan.question) for tool in LATENT_TOOLS]
    queries.append(("pages", plan.question))
    rest = " ".join(plan.keywords)
    for entity in plan.entities[:3]:
        if rest:
            queries.append(("bm25", f"{entity} {rest}"))
    if len(plan.entities) != 1 and rest:
        queries.append(("bm25", rest))
    # Not a vote: the order of the question's lines on their own (evidence.REFERENCE_WEIGHT);
    # last, so that the lines other searches found are not quoted twice.
    queries += reference_queries(plan.question, dense=dense)
    for ref in plan.page_refs[:5]:
        queries.append(("page_id", ref))
    return list(dict.fromkeys(queries))


def assess(plan: QuestionPlan, evidence: Sequence[Evidence]) -> Coverage:
    top = evidence[:TOP_EVIDENCE]
    text = "\n".join(f"{e.title} {e.text}" for e in top).lower()
    words = set(query_terms(text))
    missing_entities = [e for e in plan.entities if e.lower() not in text]
    missing_keywords = [k for k in plan.keywords if k not in words]
    share = 1.0 - len(missing_keywords) / len(plan.keywords) if plan.keywords else 1.0
    lines = [e.text for e in top]
    if plan.answer_type == "date":
        found = any(has_date(line) for line in lines)
    elif plan.answer_type == "number":
        found = any(has_number(line) for line in lines)
    elif plan.answer_type == "list":
        # Items of a list are spread out: one round never shows that all were found.
        found = len({(e.field, e.filename) for e in top}) >= LIST_PAGES
    elif plan.answer_type in ("person", "place"):
        asked = {e.lower() for e in plan.entities}
        found = any(n.lower() not in asked for line in lines for n in names(line))
    else:
        found = bool(top)
    return Coverage(missing_entities, missing_keywords, share, found)


def bridge_entities(plan: QuestionPlan, evidence: Sequence[Evidence],
                    speakers: set[str]) -> list[str]:
    """Names the best evidence mentions that the question does not (most mentioned first)."""
    asked = {e.lower() for e in plan.entities} | {s.lower() for s in speakers}
    asked_words = {w for a in asked for w in a.split()} | set(plan.keywords)
    counts: dict[str, float] = {}
    for item in evidence[:TOP_EVIDENCE]:
        for name in names(item.text):
            key = _entity(name).lower()
            # Nicknames ("Mel" for Melanie) and words of the question are not bridges.
            if (len(key) <= 2 or key in asked or key in asked_words
                    or any(a.startswith(key) for a in asked)):
                continue
            counts[_entity(name)] = counts.get(_entity(name), 0.0) + item.score
    return [n for n, _ in sorted(counts.items(), key=lambda kv: -kv[1])][:MAX_BRIDGES]


def follow_up_queries(
    plan: QuestionPlan, coverage: Coverage, bridges: Sequence[str], asked: set[str],
    *, dense: bool, latent: bool = False,
) -> list[tuple[str, str]]:
    """The next round's (tool, query) pairs: bridges combined with what is still missing."""
    missing = " ".join([*coverage.entities_missing, *coverage.keywords_missing])
    wanted = missing or " ".join(plan.keywords)
    queries: list[tuple[str, str]] = []
    for bridge in bridges:
        queries.append(("bm25", f"{bridge} {wanted}".strip()))
    if missing:
        anchor = " ".join(plan.entities[:2])
        queries.append(("bm25", f"{anchor} {missing}".strip()))
        if dense:
            queries.append(("vector", f"{anchor} {missing}".strip()))
        if latent and plan.answer_type not in LATENT_SKIPS:
            queries += [(tool, f"{anchor} {missing}".strip()) for tool in LATENT_TOOLS]
    if plan.answer_type == "date" and not coverage.answer_found:
        queries.append(("bm25", f"{' '.join(plan.entities)} {' '.join(plan.keywords)} "
                                "when date day week month year"))
    return [q for q in dict.fromkeys(queries) if q[1] and q[1] not in asked]
