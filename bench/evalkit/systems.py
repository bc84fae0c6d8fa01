"""The systems under evaluation, each saying what unit it retrieves and how a hit is credited.

Search systems rank turns and sessions for the turn and session metrics:

* :class:`PlainFTS5` — the reference baseline (evalkit.fts): one document per turn, so a hit
  is its turn; one document per session for the session metrics;
* :class:`DeepfieldSearch` — ``search_fields`` on the session pages as ``deepfield import
  locomo`` writes them, ``unit="chunk"``: a hit is credited with the turn on the page line its
  ``snippet_line`` points at, and nothing when that line shows no turn. BM25 and hybrid rank
  the lines of the candidate windows (deepfield.line_rank); vector search, and the hybrid row
  "one hit per window", give one hit per window in window order. The turns of the rest
  of the chunk are reported only as a labelled secondary figure. Sessions: ``unit="page"``.

Budget systems fill a token budget with evidence (one token counter: deepfield.tokens):

* :class:`Researcher` — ``deepfield.research``, its evidence repacked for each budget;
* :class:`SingleSearchLines` — one search of the question (plain FTS5, deepfield BM25 or
  hybrid), its hits' turns de-duplicated in rank order and packed as lines by the researcher's
  own code (``lines_of_hit`` excerpts, ``pack_evidence``, the same spreading rule), so a
  baseline is packed as well as the researcher packs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import deepfield
from deepfield.index.keyword import query_terms
from deepfield.relative_dates import event_day
from deepfield.research import ResearchResult, offline, research
from deepfield.research.evidence import (
    Evidence,
    PageLines,
    TermWeights,
    lines_of_hit,
    page_date,
    pointed_lines,
)
from deepfield.research.excerpts import BREADTH_SENTENCES
from deepfield.research.loop import SPREAD
from deepfield.research.packing import pack_evidence
from deepfield.search import Hit, search_fields

from .data import Dataset, Question
from .fts import PlainFTS
from .store import PageTurns

SINGLE_SEARCH_HITS = 100
"""Hits one baseline search returns for packing: more distinct lines than 2,000 tokens hold."""


@dataclass
class Ranking:
    pointed: list[str | None]
    """The turn each of the first k hits points to, in rank order (None: no turn)."""
    sessions: list[int]
    neighbours: list[str] = field(default_factory=list)
    """Every turn inside the first k hits, pointed turn first, distinct (secondary figure)."""
    seconds: float = 0.0


class SearchSystem(Protocol):
    name: str
    unit: str
    credit: str

    def rank(self, question: Question, k: int, sessions: int) -> Ranking: ...


class Packer(Protocol):
    def pack(self, budget: int) -> str: ...


class BudgetSystem(Protocol):
    name: str
    description: str

    def run(self, question: Question) -> tuple[Packer, float]:
        """What the system found for ``question``, ready to pack, and the seconds it took."""
        ...


class Fields:
    """The store's fields and the turn map of their pages, opened once."""

    def __init__(self, store: deepfield.Store, dataset: Dataset) -> None:
        self.store = store
        self.fields = {name: store.field(name) for name in dataset.conversations}
        self.turns = {name: PageTurns(fld.path) for name, fld in self.fields.items()}
        self.dataset = dataset

    def clear_query_cache(self, name: str) -> None:
        """A lone search pays for its query encoding: forget the ones already made."""
        embedder = self.fields[name].index_handle().embedder
        if embedder is not None:
            embedder.clear_query_cache()


class PlainFTS5:
    name = "plain FTS5 (stdlib sqlite3)"
    unit = "one document per turn; one per session for session metrics"
    credit = "the turn of the document"

    def __init__(self, dataset: Dataset) -> None:
        self.indexes = {name: PlainFTS(conv.turns)
                        for name, conv in dataset.conversations.items()}

    def rank(self, question: Question, k: int, sessions: int) -> Ranking:
        index = self.indexes[question.conversation]
        started = time.perf_counter()
        turns = index.turns(question.question, k)
        seconds = time.perf_counter() - started
        return Ranking(list(turns), index.sessions(question.question, sessions), list(turns),
                       seconds)


class DeepfieldSearch:
    unit = "chunk of a session page (3-line window of turns); session page for session metrics"
    credit = "the turn on the line its snippet_line points at"

    def __init__(self, fields: Fields, mode: str, per_window: bool = False) -> None:
        self.fields = fields
        self.mode = mode
        self.per_window = per_window
        """One hit per chunk, in chunk order (``search_fields(line_ranking=False)``): the
        chunk search before its lines were ranked on their own, kept as a labelled row."""
        self.name = f"deepfield {mode}" + (" (one hit per window)" if per_window else "")
        if mode != "vector" and not per_window:
            self.unit = ("line of a session page, ranked on its own (deepfield.line_rank) "
                         "and shown in its best 3-line window; session page for session "
                         "metrics")

    def hits(self, question: Question, k: int) -> list[Hit]:
        fld = self.fields.fields[question.conversation]
        return search_fields([fld], question.question, k=k, mode=self.mode, unit="chunk",
                             activation=False, line_ranking=not self.per_window).results

    def rank(self, question: Question, k: int, sessions: int) -> Ranking:
        turns = self.fields.turns[question.conversation]
        self.fields.clear_query_cache(question.conversation)
        started = time.perf_counter()
        hits = self.hits(question, k)
        seconds = time.perf_counter() - started
        pointed, neighbours = credit_hits(hits, turns)
        fld = self.fields.fields[question.conversation]
        if not sessions:  # turns only (a sweep of a constant that pages do not use)
            return Ranking(pointed, [], neighbours, seconds)
        pages = fld.search(question.question, k=sessions, mode=self.mode, unit="page",
                           activation=False).results
        numbers = [(h.frontmatter or {}).get("session") for h in pages]
        return Ranking(pointed, [n for n in numbers if isinstance(n, int)], neighbours,
                       seconds)


def credit_hits(hits: Sequence[Hit], turns: PageTurns) -> tuple[list[str | None], list[str]]:
    """(the turn each hit points to — the dialogue id on its snippet_line, None when that line
    shows none —, every distinct turn inside the hits' chunks, pointed turn first)."""
    pointed = [turns.turn_at(h.filename, h.snippet_line) for h in hits]
    neighbours: list[str] = []
    for hit, turn in zip(hits, pointed, strict=True):
        inside = turns.turns_between(hit.filename, hit.line_start, hit.line_end)
        for found in ([turn] if turn else []) + inside:
            if found not in neighbours:
                neighbours.append(found)
    return pointed, neighbours


# ---------------------------------------------------------------------- budgets


@dataclass
class _Lines:
    """Evidence lines in rank order, packed by the researcher's packer."""

    ranked: list[Evidence]
    spread: float

    def pack(self, budget: int) -> str:
        return pack_evidence(self.ranked, budget, "", self.spread).text


@dataclass
class _Research:
    result: ResearchResult

    def pack(self, budget: int) -> str:
        return self.result.repack(budget).text


class Researcher:
    name = "deepfield research (offline)"
    description = "plan → search → integrate → reflect, evidence lines packed to the budget"

    def __init__(self, fields: Fields, budget: int, llm: object | None = None) -> None:
        self.fields = fields
        self.budget = budget
        self.llm = llm

    def run(self, question: Question) -> tuple[Packer, float]:
        fld = self.fields.fields[question.conversation]
        self.fields.clear_query_cache(question.conversation)
        started = time.perf_counter()
        result = research([fld], question.question, budget=self.budget, record=False,
                          llm=self.llm)  # type: ignore[arg-type]
        return _Research(result), time.perf_counter() - started


def packing_rules(question: str) -> tuple[set[str], list[str], int, float]:
    """The researcher's excerpting and spreading for ``question``: (query terms, entities,
    sentences an excerpt keeps, spread over pages)."""
    plan = offline.analyse(question)
    keep = BREADTH_SENTENCES if plan.breadth else 2
    return (set(query_terms(question)), plan.entities, keep,
            SPREAD.get(plan.answer_type, SPREAD["other"]))


def evidence_lines(hits: Sequence[Hit], pages: PageLines, question: str, weigh: TermWeights,
                   whole_window: bool) -> _Lines:
    """Distinct lines of ``hits`` in rank order (the pointed line; with ``whole_window`` then
    the chunk's other lines), each with the researcher's excerpt of it."""
    terms, entities, keep, spread = packing_rules(question)
    ranked: list[Evidence] = []
    seen: set[tuple[str, str, int, str]] = set()
    for hit in hits:
        if whole_window:
            found = lines_of_hit(hit, pages, terms, entities, keep, weigh)
            found.sort(key=lambda item: item.line != hit.snippet_line)  # the pointed line first
        else:
            found = pointed_lines(hit, pages, terms, entities, keep, weigh)
        for number, text, short, _weight, last, table_header, part in found:
            key = (hit.field, hit.filename, number, text)
            if key in seen:
                continue
            seen.add(key)
            ranked.append(Evidence(hit.field, hit.filename, number, text, hit.heading,
                                   hit.title, page_date(hit), 1.0 / (len(ranked) + 1),
                                   short=short, last=last, table_header=table_header,
                                   when=event_day(hit.frontmatter), part=part))
    return _Lines(ranked, spread)


class SingleSearchLines:
    """One deepfield search of the question, packed as lines."""

    def __init__(self, fields: Fields, mode: str, whole_window: bool = False) -> None:
        self.fields = fields
        self.mode = mode
        self.whole_window = whole_window
        self.name = f"one {mode} search" + (", window lines" if whole_window else "")
        self.description = (f"deepfield {mode} chunk search (k={SINGLE_SEARCH_HITS}), "
                            + ("every chunk as ranked (as the researcher reads them), every "
                               "line of each, pointed line first" if whole_window
                               else "one hit per line, the line each hit points to")
                            + ", distinct, packed as lines with the researcher's excerpts")

    def run(self, question: Question) -> tuple[Packer, float]:
        fld = self.fields.fields[question.conversation]
        self.fields.clear_query_cache(question.conversation)
        started = time.perf_counter()
        # Window lines: every chunk as ranked, as the researcher reads them (the overlapping
        # windows around a match add its neighbours); pointed lines: one hit per line.
        hits = search_fields([fld], question.question, k=SINGLE_SEARCH_HITS, mode=self.mode,
                             unit="chunk", activation=False,
                             distinct_lines=not self.whole_window).results
        seconds = time.perf_counter() - started
        lines = evidence_lines(hits, PageLines([fld]), question.question, TermWeights(fld),
                               self.whole_window)
        return lines, seconds


class PlainFTS5Lines:
    """One plain FTS5 search of the turns, each turn packed as its page line."""

    name = "one plain FTS5 search"
    description = (f"plain FTS5 per turn (k={SINGLE_SEARCH_HITS}), each turn packed as its "
                   "page line with the researcher's excerpts")

    def __init__(self, fields: Fields, plain: PlainFTS5) -> None:
        self.fields = fields
        self.plain = plain

    def run(self, question: Question) -> tuple[Packer, float]:
        name = question.conversation
        fld = self.fields.fields[name]
        started = time.perf_counter()
        turns = self.plain.indexes[name].turns(question.question, SINGLE_SEARCH_HITS)
        seconds = time.perf_counter() - started
        index = fld.index_handle()
        hits: list[Hit] = []
        for turn in turns:
            where = self.fields.turns[name].line_of(turn)
            doc = index.doc_by_filename(where.filename) if where else None
            if where is None or doc is None:
                continue
            hits.append(Hit(fld.name, doc.filename, doc.uuid, doc.title, None, doc.frontmatter,
                            1.0, where.text, where.line, "", where.line, where.line,
                            where.text))
        lines = evidence_lines(hits, PageLines([fld]), question.question, TermWeights(fld),
                               whole_window=False)
        return lines, seconds
