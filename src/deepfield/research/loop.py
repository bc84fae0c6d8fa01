"""research(): rounds of plan → search → integrate → reflect over one or more fields.

With a chat model the planner and integrator are GAM's (gam.py); without one the heuristic
researcher (offline.py) runs the same loop. Either way the result carries the packed context
(within the token budget), the verbatim evidence in it, the sources, a per-round trace and
what it cost. Citations are recorded as activation (pages in use rank higher later).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..embed.base import LatentTerms
from ..errors import (
    BudgetError,
    DeepfieldError,
    EmbeddingError,
    LLMReplyError,
    LLMServiceError,
    PageNotFoundError,
)
from ..field import Field
from ..index.health import heals_fields
from ..index.keyword import content_terms, query_terms
from ..llm.base import ChatModel, Usage
from ..manage.activation import hidden_as_superseded
from ..search import Hit, check_query_length, search_fields
from . import gam, offline
from . import latent as latent_tools
from .citations import check_citations
from .evidence import Evidence, EvidencePool, split_origin
from .excerpts import BREADTH_SENTENCES
from .packing import pack_research
from .reading import evidence_spans
from .result import ResearchResult, RoundTrace

MIN_BUDGET = 50
"""Fewer tokens than this cannot hold a page header and one line of evidence."""
HITS_PER_QUERY = 24
"""Chunk hits per query (GAM: 5 pages per tool; chunks are smaller than its pages). A hit is a
window of three lines and lines are voted by rank, so deeper lists cost little and add lines
no other query finds (chosen on LoCoMo dev over 8, in a sweep no script in bench/ reruns: a
little more recall at 1,000 tokens, single-hop most, no category worse, a few ms more)."""
TOOL_WEIGHTS = {"hybrid": 1.0, "vector": 0.7, "pages": 0.4, "bm25": 1.0, "latent": 0.7,
                "latent_lines": 0.7}
"""Weight of each search of the question itself (the hybrid chunk search is the reference)."""
FOLLOW_UP_WEIGHT = 0.6
SEARCH_KEYWORD_WEIGHT = 0.35
"""BM25's share of the fusion in the researcher's hybrid searches (a plain search uses
search.KEYWORD_WEIGHT). The researcher votes lines from many searches and packs hundreds of
lines, where dense similarity finds turns that share no word with the question; a plain
search's top ten is better with more BM25. Chosen on LoCoMo dev (bench/locomo.py --loo)."""
PAGES_PER_QUERY = 15
SPREAD = {"list": 0.5, "other": 0.0}
"""How strongly packing spreads evidence over pages (deepfield.research.packing.diversify):
answers to a list question lie on many pages; a date or a name is usually in one place."""
REFERENCE_TOOLS = ("lines", "keyword_lines")
"""Line-ranked searches: orders the final ranking fuses with the votes, not votes."""
REFERENCE_LINES = 100
"""Lines of each line-ranked search of the question (REFERENCE_TOOLS) whose order the final
ranking fuses with the votes (evidence.REFERENCE_WEIGHT, KEYWORD_REFERENCE_WEIGHT)."""
MAIN_QUERY_HITS = 30
"""Chunk hits for the question itself, the query that finds most evidence (twice as many when
the answer is several things in several places: offline.QuestionPlan.breadth)."""
PAGE_ID_LINES = 12


@heals_fields
def research(
    fields: Sequence[Field] | Field,
    question: str,
    *,
    llm: ChatModel | None = None,
    max_rounds: int = 3,
    budget: int = 1000,
    record: bool = True,
) -> ResearchResult:
    """Answer-ready context for ``question`` from ``fields``; see the module docstring."""
    started = time.perf_counter()
    if isinstance(fields, Field):  # one field is a list of one
        fields = [fields]
    if not isinstance(question, str):
        raise DeepfieldError(f"the question must be text, not {type(question).__name__}")
    question = " ".join(question.split())
    if not question:
        raise DeepfieldError("the question is empty", "ask something, e.g. \"when did …\"")
    if not content_terms(question):
        # "the of and", "What is it?": every word is a stop word, so the searches matched
        # those alone, filled the budget with arbitrary lines and gave a reason that was false.
        raise DeepfieldError("the question has no word to search for",
                             "name what it is about, e.g. \"when did Ana fix the boiler?\"")
    check_query_length(question, "question")
    if not fields:
        raise DeepfieldError("no field to research", "name a field with --field")
    if budget < MIN_BUDGET:
        raise BudgetError(f"a budget of {budget} tokens cannot hold any evidence",
                          f"raise --budget to at least {MIN_BUDGET} tokens; a few hundred "
                          "hold a useful answer")
    if not 1 <= max_rounds <= 10:
        raise DeepfieldError(f"max rounds must be 1..10, not {max_rounds}",
                             "ask for 1 to 10 rounds (default 3)")
    warnings: list[str] = []
    for fld in fields:
        warnings += [f"{fld.name}/{w}" for w in fld.ensure_synced().warnings]
    dense = all(f.index_handle().embedder is not None for f in fields) and len(
        {f.index_handle().model_code for f in fields}) == 1
    session = _Session(fields, question, dense, warnings)
    usage = Usage()
    if llm is None:
        rounds = session.offline_rounds(max_rounds)
        summary, mode = "", "offline"
    else:
        rounds, summary = session.model_rounds(llm, max_rounds, usage)
        summary, unknown = check_citations(
            summary, ((e.field, e.filename) for e in session.pool.items.values()), fields)
        warnings += unknown
        mode = f"llm:{llm.model}"
    ranked = session.pool.final()
    spread = SPREAD.get(session.plan.answer_type, SPREAD["other"])
    packed = pack_research(ranked, budget, summary, spread)
    if record:
        _record(fields, packed.evidence)
    return ResearchResult(
        question, packed.text, packed.evidence, rounds, usage, budget, packed.tokens,
        packed.left_out, mode, time.perf_counter() - started, summary, warnings, ranked,
        spread, session.pool.ranked(),
    )


class _Session:
    """The state of one research: fields, evidence pool, queries asked so far."""

    def __init__(self, fields: Sequence[Field], question: str, dense: bool,
                 warnings: list[str]) -> None:
        self.fields = list(fields)
        self.question = question
        self.dense = dense
        self.warnings = warnings
        self.asked: set[str] = set()
        self.plan = offline.analyse(question)
        # Several answers in several places: shorter excerpts, so the budget holds more lines.
        self.pool = EvidencePool(fields, BREADTH_SENTENCES if self.plan.breadth else 2)
        self.terms = set(query_terms(question))
        self.speakers: set[str] = set()
        self.latent = dense and latent_tools.available(fields)
        self._latent_terms: dict[str, LatentTerms] = {}

    def run(self, queries: Sequence[tuple[str, str]], number: int) -> tuple[list[dict[str, Any]],
                                                                            int]:
        done: list[dict[str, Any]] = []
        new = 0
        for tool, query in queries:
            self.asked.add(query)
            terms = self.terms | set(query_terms(query))
            if tool == "page_id":
                found, count = self._read_page(query, number, terms)
                done.append({"tool": tool, "query": query, "hits": found})
                new += count
                continue
            # "pages": the best chunk of each of the best pages, so evidence spread over many
            # pages (a list of things done at different times) is not crowded out by one page.
            unit = "page" if tool == "pages" else "chunk"
            mode = {"pages": "hybrid", "lines": "hybrid", "keyword_lines": "bm25"}.get(tool, tool)
            if not self.dense:
                mode = "bm25"
            k = PAGES_PER_QUERY if unit == "page" else HITS_PER_QUERY
            if query == self.question and unit == "chunk":
                k = MAIN_QUERY_HITS * (2 if self.plan.breadth else 1)
            if tool in REFERENCE_TOOLS:
                k = REFERENCE_LINES
            if tool in latent_tools.LINES:
                results = self._latent_search(tool, query, k)
            else:
                # Every window, not one hit per line: a line's votes count each window
                # that holds it (evidence.py). "lines": one hit per line, the lines ranked
                # on their own (deepfield.line_rank).
                response = search_fields(self.fields, query, k=k, mode=mode, unit=unit,
                                         sync=False, distinct_lines=tool in REFERENCE_TOOLS,
                                         keyword_weight=SEARCH_KEYWORD_WEIGHT)
                self.warnings += [w for w in response.warnings if w not in self.warnings]
                results = response.results
            if tool in REFERENCE_TOOLS:
                # An order, not votes: the final ranking fuses it with them (EvidencePool.final).
                new += self.pool.add_reference(results, query, number, terms, self.plan.entities,
                                               tool)
            else:
                for hit in results:
                    people = (hit.frontmatter or {}).get("participants") or (
                        hit.frontmatter or {}).get("speakers") or []
                    if isinstance(people, list):
                        self.speakers.update(str(p) for p in people)
                # The question itself weighs most; other queries add to it.
                weight = (TOOL_WEIGHTS.get(tool, 1.0) if query == self.question
                          else FOLLOW_UP_WEIGHT)
                new += self.pool.add_hits(results, query, number, terms, self.plan.entities,
                                          weight)
            done.append({"tool": tool, "mode": mode,
                         "unit": "line" if tool in REFERENCE_TOOLS else unit, "query": query,
                         "hits": [{"field": h.field, "filename": h.filename,
                                   "line": h.snippet_line, "score": round(h.score, 4)}
                                  for h in results]})
        return done, new

    def _latent_search(self, tool: str, query: str, k: int) -> list[Hit]:
        if not self.latent:  # the sparse head failed earlier in this research
            return []
        try:
            return latent_tools.search(self.fields, self._latent_terms, query, k,
                                       lines=latent_tools.LINES[tool])
        except EmbeddingError as exc:
            self.warnings.append(f"latent terms unavailable: {exc.message}")
            self.latent = False
            return []

    def _read_page(self, ref: str, number: int, terms: set[str]) -> tuple[list[dict[str, Any]],
                                                                           int]:
        fields = self.fields
        if "/" in ref:  # "field/page.md", as the memos shown to a model name pages
            prefix, _, ref = ref.rpartition("/")
            fields = [f for f in self.fields if f.name == prefix]
        for fld in fields:
            try:
                filename = fld.resolve(ref)
            except PageNotFoundError:
                continue
            lines = self.pool.pages.lines(fld.name, filename)
            doc = fld.index_handle().doc_by_filename(filename)
            title = doc.title if doc else filename
            new = 0
            body = evidence_spans(lines, self.pool.pages.body_start(fld.name, filename))
            picked = [b for b in body if set(query_terms(b.text)) & terms] or body
            for span in picked[:PAGE_ID_LINES]:
                key = (fld.name, filename, span.line, span.text)
                if key not in self.pool.items:
                    self.pool.items[key] = Evidence(
                        fld.name, filename, span.line, span.text, "", title, None, 0.5,
                        number, [ref], last=span.last,
                        table_header=span.table_header,
                        origin=split_origin(doc.frontmatter if doc else None))
                    new += 1
            return [{"field": fld.name, "filename": filename}], new
        return [], 0

    def offline_rounds(self, max_rounds: int) -> list[RoundTrace]:
        rounds: list[RoundTrace] = []
        queries = offline.first_queries(self.plan, dense=self.dense, latent=self.latent)
        for number in range(1, max_rounds + 1):
            started = time.perf_counter()
            done, new = self.run(queries, number)
            ranked = self.pool.ranked()
            coverage = offline.assess(self.plan, ranked)
            trace = RoundTrace(number, self.question if number == 1 else "follow-up",
                               self.plan.to_json() if number == 1 else {}, done, new, "",
                               coverage.to_json())
            rounds.append(trace)
            if coverage.complete:
                trace.decision = "stop: the evidence covers the question"
            elif new == 0:
                trace.decision = "stop: the last searches found nothing new"
            elif number == max_rounds:
                trace.decision = "stop: max rounds reached"
            else:
                bridges = offline.bridge_entities(self.plan, ranked, self.speakers)
                queries = offline.follow_up_queries(self.plan, coverage, bridges, self.asked,
                                                    dense=self.dense, latent=self.latent)
                trace.reflection["bridges"] = bridges
                trace.decision = "continue" if queries else "stop: nothing left to ask"
            trace.seconds = time.perf_counter() - started
            if trace.decision != "continue":
                break
        return rounds

    def model_rounds(self, llm: ChatModel, max_rounds: int,
                     usage: Usage) -> tuple[list[RoundTrace], str]:
        rounds: list[RoundTrace] = []
        request, summary = self.question, ""
        memos = self._memos()
        for number in range(1, max_rounds + 1):
            started = time.perf_counter()
            queries: list[tuple[str, str]] = []
            try:
                plan = gam.plan(llm, request, memos, usage)
            except LLMServiceError as exc:
                if not usage.calls:
                    raise  # the first call: an outage or a setting the user must see
                self.warnings.append(self._model_lost(number, exc))
                break
            except LLMReplyError as exc:
                # A model that cannot plan (even after a repair) still gets evidence: the
                # heuristic planner's queries for this request, and a warning saying so.
                self.warnings.append(f"round {number}: {exc.message}; heuristic plan used")
                plan = gam.Plan([], "", [], [])
                queries = offline.first_queries(offline.analyse(request), dense=self.dense)
            if number == 1:
                queries += [q for q in offline.reference_queries(self.question, dense=self.dense)
                            if q not in queries]
            if plan.keyword:
                queries.append(("bm25", plan.keyword))
            queries += [("vector" if self.dense else "bm25", q) for q in plan.vector]
            queries += [("page_id", p) for p in plan.page_ids]
            before = set(self.pool.items)
            done, new = self.run(queries, number)
            fresh = [e for e in self.pool.ranked() if e.key not in before]
            unusable = False
            try:
                integration = gam.integrate(llm, self.question, request, summary, fresh[:40],
                                            usage, evidence_tokens=3000)
            except LLMReplyError as exc:
                self.warnings.append(f"round {number}: {exc.message}; evidence kept as found")
                integration = gam.Integration(summary, [], True, [])
                unusable = True
            except LLMServiceError as exc:
                if not usage.calls:
                    raise
                self.warnings.append(self._model_lost(number, exc))
                integration = gam.Integration(summary, [], True, [])
                unusable = True
            summary = integration.summary
            for item in self.pool.items.values():  # what the model used outranks the rest
                if item.filename in integration.sources:
                    item.score *= 2.0
            trace = RoundTrace(number, request, {
                "info_needs": plan.info_needs, "keyword": plan.keyword, "vector": plan.vector,
                "page_ids": plan.page_ids}, done, new, "",
                {"enough": integration.enough, "follow_up": integration.follow_up,
                 "sources": integration.sources})
            rounds.append(trace)
            if unusable:
                trace.decision = "stop: the model's integration reply was unusable"
            elif integration.enough:
                trace.decision = "stop: the model judged the summary enough"
            elif not integration.follow_up:
                trace.decision = "stop: no follow-up requests"
            elif number == max_rounds:
                trace.decision = "stop: max rounds reached"
            else:
                trace.decision = "continue"
                request = "; ".join(integration.follow_up)
            trace.seconds = time.perf_counter() - started
            if trace.decision != "continue":
                break
        return rounds, summary

    @staticmethod
    def _model_lost(number: int, exc: LLMServiceError) -> str:
        # Rounds already done hold evidence (and maybe a summary): a model that fails later
        # (a 500, a timeout) ends the research with them instead of throwing them away.
        return (f"round {number}: the model failed ({exc.message}); the research stopped "
                "with the evidence found so far")

    def _memos(self) -> list[tuple[str, str]]:
        """Light memory: the memos of the pages most related to the question, then the rest."""
        seen: dict[str, str] = {}
        related = search_fields(self.fields, self.question, k=30, mode="bm25", sync=False)
        for hit in related.results:  # search already leaves superseded pages out
            if hit.summary:
                seen[f"{hit.field}/{hit.filename}"] = hit.summary
        for fld in self.fields:
            index = fld.index_handle()
            docs = index.docs()
            hidden = hidden_as_superseded(index, {doc.filename: doc.frontmatter for doc in docs})
            for doc in docs:
                if doc.summary and doc.filename not in hidden:
                    seen.setdefault(f"{fld.name}/{doc.filename}", doc.summary)
        return list(seen.items())


def _record(fields: Sequence[Field], evidence: Sequence[Evidence]) -> None:
    from ..manage.activation import record_activation

    by_field: dict[str, list[str]] = {}
    for item in evidence:
        names = by_field.setdefault(item.field, [])
        if item.filename not in names:
            names.append(item.filename)
    for fld in fields:
        if by_field.get(fld.name):
            record_activation(fld, by_field[fld.name], "cite")
