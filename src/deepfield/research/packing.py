"""Packing: the best evidence that fits a token budget, rendered under page headers.

The best FULL_LINES items are quoted whole, the rest by their excerpts (research/evidence.py),
so the budget reaches more pages; :func:`diversify` keeps one page from taking the whole budget;
what fits is shown in reading order (research/reading.py), each item cited by its page and line
(``L12:``, or ``L12-13:`` for a sentence wrapped over two lines), under its section's heading
where the page title does not already say it (``§ Jonas Berg``); a line's relative dates are
resolved after it (``… yesterday. [yesterday = 2 July 2023]``, deepfield.relative_dates).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import BudgetError
from ..markdown import below_title
from ..relative_dates import shown
from ..tokens import TokenTally, count_tokens, truncate_to_tokens
from .evidence import Evidence
from .reading import reading_order

FULL_LINES = 5
"""Evidence lines (best first) quoted whole before excerpts take over."""
SUMMARY_SHARE = 0.4
"""Largest share of the budget a model's summary may take; evidence lines get the rest."""
RESOLVE_DATES = True
"""Show what a line's relative dates meant on its page's day (deepfield.relative_dates)."""


@dataclass
class Packed:
    text: str
    evidence: list[Evidence]
    tokens: int
    left_out: int


def pack_evidence(
    ranked: Sequence[Evidence], budget: int, preamble: str = "", spread: float = 0.5
) -> Packed:
    """The best evidence that fits ``budget`` tokens, in reading order (reading.py).

    The best FULL_LINES lines are quoted whole (the answer is usually among them and may sit
    in any sentence); the rest by their excerpts, so the budget reaches more pages. A table
    row comes with its table's header row (counted in the budget), shown once; what the parts
    of one split page repeat word for word (memo, sources) is shown once."""
    chosen: list[Evidence] = []
    # Exact: the rendered text is the preamble, headers and lines joined by line breaks.
    tally = TokenTally(preamble.strip())
    headers: set[tuple[str, str]] = set()
    sections: set[tuple[str, str, str]] = set()  # (field, filename, section) shown
    shown_keys: set[tuple[str, str, int, str]] = set()
    consumed = 0
    repeated: set[tuple[str, str, str]] = set()
    for position, item in enumerate(diversify(ranked, spread)):
        copy = (item.field, item.origin, " ".join(item.text.split()))
        if item.key in shown_keys or (item.origin and copy in repeated):
            # A table's header row, already shown above a row of it; or what another part of
            # the same split page says word for word (its memo, its sources).
            consumed += 1
            continue
        if position >= FULL_LINES and item.short:
            item = replace(item, text=item.short, short=None)
        page = (item.field, item.filename)
        companions = []
        if item.table_header is not None:
            row_line, row_text = item.table_header
            header_row = replace(item, line=row_line, text=row_text, short=None, last=0,
                                 table_header=None)
            if header_row.key not in shown_keys:
                companions.append(header_row)
        pieces = [_line(x) for x in (*companions, item)]
        if page not in headers:
            pieces.append(_header(item))
        where = (*page, section_of(item))
        if where[2] and where not in sections:
            pieces.append(_section(where[2]))
        if not tally.add(*pieces, budget=budget):
            continue  # a shorter line further down may still fit
        chosen += [*companions, item]
        shown_keys.update(x.key for x in (*companions, item))
        if item.origin:
            repeated.add(copy)  # by the line's whole text: a part may quote it shorter
            repeated.update((x.field, x.origin, " ".join(x.text.split())) for x in companions)
        headers.add(page)
        sections.add(where)
        consumed += 1
    shown = [item for page in reading_order(chosen, section_of) for item in page]
    text = render(shown, preamble)
    return Packed(text, shown, count_tokens(text), len(ranked) - consumed)


def pack_research(ranked: Sequence[Evidence], budget: int, summary: str = "",
                  spread: float = 0.5) -> Packed:
    """A research's context: a model's ``summary`` (at most SUMMARY_SHARE of the budget), then
    the best evidence that fits; BudgetError when not even one line, cut short, fits."""
    preamble = ""
    if summary:
        preamble = truncate_to_tokens(f"Summary: {summary}", int(budget * SUMMARY_SHARE))
    packed = pack_evidence(ranked, budget, preamble, spread)
    if not packed.evidence and not preamble and ranked:
        # Not even one line fits: the first line, cut to the budget, is better than nothing.
        first = ranked[0]
        cut = truncate_to_tokens(first.text, budget - 20)
        if not cut:
            # Name the budget that would do: "a few hundred tokens" read as a contradiction
            # when the budget was a thousand and the best line needed more.
            least = pack_evidence([first], 1 << 30).tokens
            raise BudgetError(f"a budget of {budget} tokens is too small for the evidence found",
                              f"raise --budget to {least} tokens or more: the best line "
                              "needs that many")
        packed = pack_evidence([replace(first, text=cut)], budget)
    if count_tokens(packed.text) > budget:  # cannot happen: pack_evidence counts as it goes
        raise BudgetError(f"packing exceeded the budget of {budget} tokens")
    return packed


def diversify(ranked: Sequence[Evidence], penalty: float = 0.5) -> list[Evidence]:
    """Ranked evidence re-ordered so one page cannot take the whole budget: each further line
    of a page counts ``1 / (1 + penalty × lines already taken from it)`` of its score."""
    remaining = list(ranked)
    taken: dict[tuple[str, str], int] = {}
    order: list[Evidence] = []
    while remaining:
        best_index, best_score = 0, -1.0
        for index, item in enumerate(remaining[:200]):
            score = item.score / (1.0 + penalty * taken.get((item.field, item.filename), 0))
            if score > best_score:
                best_index, best_score = index, score
        item = remaining.pop(best_index)
        taken[(item.field, item.filename)] = taken.get((item.field, item.filename), 0) + 1
        order.append(item)
    return order


def render(chosen: Sequence[Evidence], preamble: str = "") -> str:
    """``chosen`` (best first) under page headers, in reading order (reading.py)."""
    blocks = [preamble.strip()] if preamble.strip() else []
    for items in reading_order(chosen, section_of):
        lines = [_header(items[0])]
        current = ""
        for item in items:
            if section_of(item) and section_of(item) != current:
                lines.append(_section(section_of(item)))  # once: reading_order keeps it whole
            current = section_of(item)
            lines.append(_line(item))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def section_of(item: Evidence) -> str:
    """The section heading an evidence line is shown under ("Jonas Berg" on a page titled
    People): a line says "Drone pilot and photogrammetry." and its heading says whose."""
    return below_title(item.heading, item.title)


def _section(heading: str) -> str:
    return f"§ {heading}"


def _header(item: Evidence) -> str:
    # The date matters (relative times in the lines need it) but only once per header.
    when = f" · {item.date}" if item.date and item.date not in item.title else ""
    return f"[{item.field}/{item.filename}{when}] {item.title}"


def _line(item: Evidence) -> str:
    where = f"L{item.line}-{item.last}" if item.last > item.line else f"L{item.line}"
    # What "yesterday" meant on the page's day, after the verbatim text (relative_dates.py):
    # only for what the shown text says, so an excerpt that dropped it shows none.
    dates = shown(item.relative_dates()) if RESOLVE_DATES else ""
    return f"{where}: {item.text} {dates}" if dates else f"{where}: {item.text}"


_CITATION = re.compile(r"\[([a-z0-9-]+)/([a-z0-9-]+\.md)")


def cited_pages(text: str) -> list[tuple[str, str]]:
    """(field, filename) pairs named in a rendered context, in order."""
    return list(dict.fromkeys((m.group(1), m.group(2)) for m in _CITATION.finditer(text)))
