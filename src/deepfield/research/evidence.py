"""Evidence: verbatim pieces of pages, pooled across queries and rounds, scored and ordered.

Every evidence item is one line of a page file — or one sentence of a paragraph hard-wrapped
over several lines (research/reading.py) — with the file name and line number, so a citation
can be checked by opening the page; each candidate carries a shorter verbatim excerpt
(research/excerpts.py) for when the budget is tight. Only lines that say something are
candidates (research/reading.py: no rules, delimiters, split-page footers or navigation).
Chunk hits vote for their lines; the final order fuses the votes with a line-ranked search of
the question (REFERENCE_WEIGHT); research/packing.py takes the items best first until the
token budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from typing import Any, NamedTuple

from ..field import Field
from ..line_rank import Weigh, idf_weigher, speaker
from ..markdown import split_sentences
from ..relative_dates import event_day, resolved
from ..search import Hit
from ..tokens import count_tokens
from .excerpts import excerpt, line_weight, word_windows
from .pagelines import SOURCES_WEIGHT as SOURCES_WEIGHT
from .pagelines import PageLines
from .reading import MAX_SENTENCE_TOKENS, Span

LINE_BASE = 0.3
"""Score of a line of a hit chunk before its own word matches are counted."""
LONG_LINE_TOKENS = 120
"""Prose lines longer than this are quoted by their matching sentences only."""


@dataclass
class Evidence:
    field: str
    filename: str
    line: int
    text: str
    heading: str
    title: str
    date: str | None
    score: float = 0.0
    round: int = 1
    queries: list[str] = dc_field(default_factory=list)
    short: str | None = None
    """A shorter verbatim excerpt of the line (label + the sentences that matter), if any."""
    last: int = 0
    """Last line of a sentence hard-wrapped over several lines (``line`` or 0: on one line)."""
    table_header: tuple[int, str] | None = None
    """(line, text) of the header row of the table this row is in (packing shows it too)."""
    origin: str = ""
    """The uuid of the page this one is a part of (``split_from``), "" for a page that was
    not split: every part repeats the page's memo and sources, which are shown once."""
    when: str | None = None
    """The day the page's events happened (its ``session_date`` or ``date``), against which
    the line's relative dates are resolved (deepfield.relative_dates); None: not resolved."""
    part: int = 0
    """Its place among the quotes that start on its line, in page order (Quote.part)."""

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.field, self.filename, self.line, self.text)

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field, "filename": self.filename, "line": self.line,
            "heading": self.heading, "text": self.text, "title": self.title, "date": self.date,
            "last_line": max(self.line, self.last), "score": round(self.score, 4),
            "round": self.round, "queries": self.queries,
            "relative_dates": self.relative_dates(),
        }

    def relative_dates(self) -> list[dict[str, str]]:
        """The line's relative dates resolved against the page's day:
        ``[{"phrase": "yesterday", "date": "2 July 2023"}]``."""
        return resolved(self.text, self.when)


def split_origin(frontmatter: dict[str, Any] | None) -> str:
    """The uuid a split part was cut from (its ``split_from``), or ""."""
    return str((frontmatter or {}).get("split_from") or "")


def page_date(hit: Hit) -> str | None:
    """When the page's events happened (``session_date`` or ``date``), as relative_dates
    reads it; None for an undated page. Not ``created``: that says when the page was filed,
    and shown as the page's date it had "tomorrow" read against the filing day."""
    fm = hit.frontmatter or {}
    for key in ("session_date", "date"):
        value = fm.get(key)
        if value:
            return str(value)
    return None


IDF_SCALE = 2.0
"""A query word's weight in a line is its inverse chunk frequency in the field,
``log(1 + chunks / (1 + chunks with it))``, divided by this: a word in one chunk of a
hundred weighs about 2.3, a name in every line of a conversation about 0.35. Chosen on LoCoMo
dev; in-sample and leave-one-conversation-out figures: ``python bench/locomo.py --loo
research`` (docs/DESIGN.md)."""
SPEAKER_WEIGHT = 1.6
"""Lines said by a person the question names ("what does Melanie like") count this much more:
in a conversation what someone did or likes is mostly in their own lines. Chosen on LoCoMo
dev; the in-sample and leave-one-conversation-out figures, and each fold's pick: ``python
bench/locomo.py --loo research`` (docs/DESIGN.md)."""

LENGTH_PRIOR = 0.4
"""A line's votes are multiplied by ``(words / 20) ** LENGTH_PRIOR`` (at least 4 words): a
short line ("Wow, that's great!") seldom holds an answer, a long one holds several facts — a
document-length prior, as ad-hoc retrieval uses. Its in-sample and leave-one-conversation-out
figures on LoCoMo dev: `python bench/locomo.py --loo research`; the researcher without it:
`python bench/locomo.py --ablations` ("no length prior")."""

REFERENCE_WEIGHT = 2.0
"""Weight of the line-ranked search of the question (deepfield.line_rank) in the final order.
Votes pool what every query found, but a line's votes say little about the line itself (a
window votes for all three of its lines); the line-ranked search scores each line on its own
words, speaker and latent terms. The final order fuses the two rankings by reciprocal rank:
``1 / (REFERENCE_OFFSET + vote rank) + REFERENCE_WEIGHT / (REFERENCE_OFFSET + line rank)``.
Chosen on LoCoMo dev; in-sample and leave-one-conversation-out figures: ``python
bench/locomo.py --loo research``; without it: ``--ablations`` ("no line-ranked order")."""
REFERENCE_OFFSET = 5.0
"""The rank offset of that fusion: small, so the first lines of each ranking count most."""
KEYWORD_REFERENCE_WEIGHT = 1.0
"""Weight of a second line-ranked order, the keyword-only (BM25) line search of the question,
fused the same way ("keyword_lines" tool; 0: not searched). Hybrid lines find what the words
miss; keyword lines keep the exact-word answer on top, which single-fact questions need
(LoCoMo dev: ``python bench/locomo.py --ablations``, row "no keyword line order", for what
single-hop recall loses without it; in-sample and leave-one-conversation-out figures:
``--loo research``)."""


def order_weight(order: str) -> float:
    """Weight of a named line-ranked order in :meth:`EvidencePool.final`."""
    return KEYWORD_REFERENCE_WEIGHT if order == "keyword_lines" else REFERENCE_WEIGHT


class TermWeights:
    """Inverse chunk frequencies of query words and names in one field, read from its index
    (cached there until the index changes), so words every line shares count little."""

    def __init__(self, fld: Field) -> None:
        self._weigh = idf_weigher(fld.index_handle().term_counts, IDF_SCALE)

    def __call__(self, term: str) -> float:
        return self._weigh(term)


class Quote(NamedTuple):
    """One evidence candidate of a hit: where it is, its text, a shorter excerpt (or None)
    and how well it matches the query."""

    line: int
    text: str
    short: str | None
    weight: float
    last: int = 0
    """Last line of a sentence wrapped over several lines (``line`` or 0: on one line)."""
    table_header: tuple[int, str] | None = None
    """(line, text) of the header row of the table a row is in."""
    part: int = 0
    """Its place among the quotes that start on its line (0: the first in the page)."""


def lines_of_hit(
    hit: Hit, pages: PageLines, terms: set[str], entities: Sequence[str],
    keep_sentences: int = 2, weigh: Weigh | None = None,
    quoted: Callable[[int, str], bool] | None = None,
) -> list[Quote]:
    """The quotes of a chunk hit: its evidence spans (a line, or a sentence of a wrapped
    paragraph, research/reading.py), each with its shorter excerpt (keeping at most
    ``keep_sentences`` sentences) and its weight (``weigh`` weighs words). Spans for which
    ``quoted(line, text)`` is true are already held with their excerpt: theirs is not made
    again (None)."""
    start = pages.body_start(hit.field, hit.filename)
    if hit.line_start < start:
        # The summary chunk: its evidence is the memo itself, cited at its frontmatter line.
        lines = pages.lines(hit.field, hit.filename)
        where = next((i for i, line in enumerate(lines[:start], 1)
                      if line.startswith("summary:")), hit.line_start)
        if hit.summary and " ".join(hit.summary.split()) in " ".join(lines[where - 1].split()):
            return [Quote(where, hit.summary, None,
                          line_weight(hit.summary, terms, entities, weigh))]
        return []
    found: list[Quote] = []
    for span in pages.spans(hit.field, hit.filename, hit.line_start, hit.line_end):
        number, text, last = span.line, span.text, span.last
        if count_tokens(text) > LONG_LINE_TOKENS:
            pieces, windowed = _quotable(text)
            sentences = [s for s in pieces if line_weight(s, terms, entities, weigh) > 0]
            if windowed and len(sentences) > 3:
                # Windows of a sea of words: the three that match best, in page order.
                best = sorted(sentences, key=lambda s: -line_weight(s, terms, entities, weigh))
                sentences = [s for s in sentences if s in best[:3]]
            if sentences:
                # Consecutive matching sentences stay one quote; each is verbatim in the line.
                for sentence in sentences[:3]:
                    found.append(Quote(number, sentence, None,
                                       line_weight(sentence, terms, entities, weigh), last))
                continue
        short = None
        if quoted is None or not quoted(number, text):
            short = excerpt(text, terms, entities, keep_sentences, weigh)
        found.append(Quote(number, text, short if short != text else None,
                           line_weight(text, terms, entities, weigh), last, span.table_header))
    # Spans that share a line ("**Ana:** Great." and the sentence after it) are shown in
    # page order by this (reading.reading_order), not by score.
    parts: dict[int, int] = {}
    for position, quote in enumerate(found):
        found[position] = quote._replace(part=parts.get(quote.line, 0))
        parts[quote.line] = parts.get(quote.line, 0) + 1
    return found


def _quotable(text: str) -> tuple[list[str], bool]:
    """The sentences of a long line, a sentence too long to quote (a session pasted on one line
    has no sentence end in thousands of words) cut into windows of words (verbatim slices);
    and whether any was cut so."""
    pieces: list[str] = []
    windowed = False
    for sentence in split_sentences(text):
        if count_tokens(sentence) > MAX_SENTENCE_TOKENS:
            pieces += word_windows(sentence)
            windowed = True
        else:
            pieces.append(sentence)
    return pieces, windowed


def pointed_span(hit: Hit, pages: PageLines, terms: set[str], entities: Sequence[str],
                 weigh: Weigh | None = None) -> Span | None:
    """The evidence span a hit points to: the one holding its snippet line; when a wrapped
    line holds the end of one sentence and the start of the next, the one whose part of that
    line matches the query best (the line is what the hit matched). None for a line that is no
    evidence."""
    spans = pages.spans(hit.field, hit.filename, hit.snippet_line, hit.snippet_line)
    if len(spans) > 1:
        line = pages.lines(hit.field, hit.filename)[hit.snippet_line - 1]
        pieces = [(p, line_weight(p, terms, entities, weigh)) for p in split_sentences(line)]

        def matched(span: Span) -> tuple[float, float]:
            on_line = sum(weight for piece, weight in pieces if piece in span.text)
            return (-on_line, -line_weight(span.text, terms, entities, weigh))

        spans.sort(key=matched)
    return spans[0] if spans else None


def pointed_lines(
    hit: Hit, pages: PageLines, terms: set[str], entities: Sequence[str],
    keep_sentences: int = 2, weigh: Weigh | None = None,
) -> list[Quote]:
    """:func:`lines_of_hit` of the one span a hit points to (:func:`pointed_span`; the memo
    for a summary chunk): what a line-ranked search credits, without quoting the
    neighbours."""
    if hit.snippet_line < pages.body_start(hit.field, hit.filename):
        hit = replace(hit, line_start=hit.snippet_line, line_end=hit.snippet_line)
        return [item for item in lines_of_hit(hit, pages, terms, entities, keep_sentences,
                                              weigh) if item.line == hit.snippet_line]
    span = pointed_span(hit, pages, terms, entities, weigh)
    if span is None:
        return []
    hit = replace(hit, line_start=span.line, line_end=span.line)
    return [item for item in lines_of_hit(hit, pages, terms, entities, keep_sentences, weigh)
            if item.line == span.line and item.text in span.text]


class EvidencePool:
    """Evidence from every query of every round, scored and de-duplicated."""

    def __init__(self, fields: Sequence[Field], excerpt_sentences: int = 2) -> None:
        self.pages = PageLines(fields)
        self.items: dict[tuple[str, str, int, str], Evidence] = {}
        self.excerpt_sentences = excerpt_sentences
        """Sentences an excerpt keeps: BREADTH_SENTENCES when the answer is spread out."""
        self.weights = {f.name: TermWeights(f) for f in fields}
        self.orders: dict[str, dict[tuple[str, str, int], int]] = {}
        """Order name → line → its rank in that line-ranked search (add_reference)."""
        self.unvoted: dict[tuple[str, str, int, str], Evidence] = {}
        """Lines only the line-ranked search found (no votes)."""

    def add_hits(
        self, hits: Iterable[Hit], query: str, round_number: int, terms: set[str],
        entities: Sequence[str], weight: float = 1.0,
    ) -> int:
        """Add the lines of ranked chunk hits; returns how many items are new."""
        new = 0
        named = {e.lower() for e in entities}
        for rank, hit in enumerate(hits):
            rank_score = weight / (rank + 2)

            def held(number: int, text: str, hit: Hit = hit) -> bool:
                return (hit.field, hit.filename, number, text) in self.items

            for number, text, short, relevance, last, table_header, part in lines_of_hit(
                    hit, self.pages, terms, entities, self.excerpt_sentences,
                    self.weights.get(hit.field), quoted=held):
                # Lines that share no word with the query stay: in a conversation the answer
                # often follows the line that matched the question.
                score = rank_score * (LINE_BASE + relevance)
                score *= (max(4, len(text.split())) / 20) ** LENGTH_PRIOR
                said_by = speaker(text)
                if said_by is not None and said_by.lower() in named:
                    score *= SPEAKER_WEIGHT
                score *= self.pages.weight(hit.field, hit.filename, number)
                key = (hit.field, hit.filename, number, text)
                item = self.items.get(key)
                if item is None:
                    self.items[key] = Evidence(
                        hit.field, hit.filename, number, text, hit.heading, hit.title,
                        page_date(hit), score, round_number, [query], short, last,
                        table_header, split_origin(hit.frontmatter), event_day(hit.frontmatter),
                        part,
                    )
                    new += 1
                else:
                    item.score += score
                    if query not in item.queries:
                        item.queries.append(query)
        return new

    def add_reference(self, hits: Iterable[Hit], query: str, round_number: int,
                      terms: set[str], entities: Sequence[str], order: str = "lines") -> int:
        """Record the order of a line-ranked search (one hit per line, best first): the
        lines each hit points to, in rank order, for :meth:`final`. Lines no query voted for
        join the pool through it; returns how many of those are new."""
        new = 0
        voted = {(item.field, item.filename, item.line) for item in self.items.values()}
        ranks = self.orders.setdefault(order, {})
        for hit in hits:
            line = hit.snippet_line
            if line >= self.pages.body_start(hit.field, hit.filename):
                span = pointed_span(hit, self.pages, terms, entities,
                                    self.weights.get(hit.field))
                line = span.line if span is not None else line
            place = (hit.field, hit.filename, line)
            if place in ranks:
                continue
            ranks[place] = len(ranks)
            if place in voted:
                continue
            for number, text, short, _relevance, last, table_header, part in pointed_lines(
                    hit, self.pages, terms, entities, self.excerpt_sentences,
                    self.weights.get(hit.field)):
                key = (hit.field, hit.filename, number, text)
                if key in self.unvoted:
                    continue
                self.unvoted[key] = Evidence(
                    hit.field, hit.filename, number, text, hit.heading, hit.title,
                    page_date(hit), 0.0, round_number, [query], short, last, table_header,
                    split_origin(hit.frontmatter), event_day(hit.frontmatter), part)
                new += 1
        return new

    def ranked(self) -> list[Evidence]:
        """The evidence with votes, by votes (what reflection reads between rounds)."""
        return sorted(self.items.values(), key=lambda e: (-e.score, e.filename, e.line))

    def final(self) -> list[Evidence]:
        """All evidence best first: the vote order fused with the line-ranked order
        (REFERENCE_WEIGHT); each item's score is its fused score."""
        if not self.orders:
            return self.ranked()

        def ordered(place: tuple[str, str, int]) -> float:
            return self.pages.weight(*place) * sum(
                order_weight(order) / (REFERENCE_OFFSET + ranks[place])
                for order, ranks in self.orders.items() if place in ranks)

        fused: list[Evidence] = []
        credited: set[tuple[str, str, int]] = set()
        for rank, item in enumerate(self.ranked()):
            place = (item.field, item.filename, item.line)
            score = 1.0 / (REFERENCE_OFFSET + rank)
            if place not in credited:
                # A long line quoted as several sentences: its best-voted one takes the rank.
                credited.add(place)
                score += ordered(place)
            fused.append(replace(item, score=score))
        for item in self.unvoted.values():
            if item.key in self.items:
                continue  # a later query voted for it: ranked above
            fused.append(replace(item, score=ordered((item.field, item.filename, item.line))))
        return sorted(fused, key=lambda e: (-e.score, e.filename, e.line))
