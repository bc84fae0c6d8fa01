"""Ranking the lines that chunk hits point at: what a chunk search returns, one line per hit.

A transcript turn (or list item, table row) is indexed as a window with the line before and
after it (index/chunking.py), so the windows that rank well are the ones whose *context*
matches, and three neighbouring windows hold each line. Pointing every window at its best
line, in window order, gives the right turn only when the best window happens to be centred
on it. Here each line of the candidate windows is scored on its own:

* its **window score**: the best fused score among the candidate windows that hold it
  (a line inherits the context that made its window rank);
* plus ``LINE_WORDS_WEIGHT`` times the **share of the query's words** it says, each word
  weighed by its inverse chunk frequency in the field (a rare name counts, "did" does not);
* plus ``LINE_SPEAKER_WEIGHT`` when the line is **said by someone the query names**
  ("what does Melanie paint" is answered in Melanie's lines);
* plus ``LINE_LATENT_WEIGHT`` times its **latent-term match** with the query, normalised to
  the best line's (index/latent.py: the kind a question names, the instance a line says), in
  hybrid search on an index that has latent terms.

Measured on LoCoMo dev (bench/locomo.py, hybrid, a hit credited with the turn its line
shows): turn R@10 and multi-hop all@10 against one hit per window, and the
leave-one-conversation-out figure of each weight, are in docs/DESIGN.md ("Chunks and hybrid
fusion"). A prose chunk's lines are scored the same way, those that say a query word (else
its line with the most query words, pointed_line): a line that says none is no hit of its own.
Vector search keeps one hit per window (search.py).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .confidence import NOT_SPEAKERS
from .embed.base import LatentTerms
from .errors import EmbeddingError
from .hits import Hit
from .index.keyword import query_terms, text_words
from .markdown import says_something

if TYPE_CHECKING:
    from .field import Field

LINE_WORDS_WEIGHT = 0.3
"""Weight of the (IDF-weighted) share of the query's words a line says."""
LINE_SPEAKER_WEIGHT = 0.4
"""Added to a line said by a person the query names."""
LINE_LATENT_WEIGHT = 0.2
"""Weight of a line's latent-term match (best line = 1) in hybrid search."""
LATENT_LINES = 200
"""Lines read from the latent-term index per query."""
LINE_BATCH = 40
"""Candidate chunks read at a time when their lines are ranked (line_hits)."""
WINDOWS_PER_HIT = 4
"""At most this many candidate chunks per hit asked for (at least LINE_BATCH) are read for
their lines. The best lines lie in the best windows: reading every candidate did not change
LoCoMo dev's recall, and cost a search over prose chunks (whose bonuses rarely let a line
stop the reading early) five times the rows."""

_LABEL = re.compile(r"^((?:\*\*|__)?[^\s:|(](?:[^:|(]|\([^)]{0,30}\)){0,60}:(?:\*\*|__)?\s)(.*)$")
"""A transcript line's label: ``Speaker (D1:3): ``, ``Speaker: `` or ``**Speaker:** ``."""

Weigh = Callable[[str], float]
LineKey = tuple[int, int, int]
"""(field position, doc id, page line)."""
WindowKey = tuple[int, int]
"""(field position, chunk id)."""
SNIPPET_CHARS = 280


@lru_cache(maxsize=65536)  # the same query terms are stemmed for every line
def stem(word: str) -> str:
    """A light suffix stripper, so "researching" matches "research" and "kids" "kid"."""
    for suffix, keep in (("ies", 4), ("ing", 5), ("ed", 4), ("es", 4), ("s", 3)):
        if word.endswith(suffix) and len(word) >= keep + len(suffix) - 1:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def speaker(line: str) -> str | None:
    """Who says ``line`` in a transcript ("Melanie (D4:6): …" or "Melanie: …"), if anyone."""
    match = _LABEL.match(line)
    if match is None:
        return None
    said_by = match.group(1).split("(", 1)[0].rstrip(": *_").strip().lstrip("*_")
    return said_by if said_by and said_by.lower() not in NOT_SPEAKERS else None


def label_and_text(line: str) -> tuple[str, str]:
    """(the line's speaker label with its trailing space, or "", the rest)."""
    match = _LABEL.match(line)
    return (match.group(1), match.group(2)) if match else ("", line)


def idf_weigher(term_counts: Callable[[list[str]], tuple[int, dict[str, int]]],
                scale: float = 1.0) -> Weigh:
    """A term's inverse chunk frequency ``log(1 + chunks / (1 + chunks with it)) / scale``,
    from an index's cached ``term_counts``, remembered per term."""
    known: dict[str, float] = {}

    def weigh(term: str) -> float:
        weight = known.get(term)
        if weight is None:
            size, counts = term_counts([term])
            weight = known[term] = math.log(1.0 + size / (1.0 + counts.get(term, 0))) / scale
        return weight

    return weigh


class QueryWords:
    """The query's words by stem, each weighed (the rarer form of a stem counts), to score
    how much of the query a line says: built once per query, read for every line."""

    def __init__(self, terms: Sequence[str], weigh: Weigh) -> None:
        self.stems: dict[str, float] = {}
        for term in terms:
            key = stem(term)
            self.stems[key] = max(self.stems.get(key, 0.0), weigh(term))
        self.total = sum(self.stems.values())

    def share(self, text: str) -> float:
        """The weighed share of the query's words that ``text`` says."""
        if not self.total:
            return 0.0
        said = {stem(w) for w in text_words(text)}
        return sum(weight for key, weight in self.stems.items() if key in said) / self.total


def names_speaker(line: str, query: str) -> bool:
    """Whether ``line`` is said by someone whose name ``query`` mentions."""
    said_by = speaker(line)
    if said_by is None or len(said_by) < 2:
        return False
    return re.search(rf"\b{re.escape(said_by)}\b", query, re.IGNORECASE) is not None


def best_line(lines: Sequence[str], terms: Sequence[str], ties: str = "middle",
              code: bool = False) -> int:
    """Index of the line with the most distinct query terms; ties go to the line nearest the
    middle (a record window is centred on its own line) or, with ``ties="first"``, to the
    earliest (prose reads from the top). ``code``: the lines are fenced code."""
    middle = (len(lines) - 1) / 2

    def rank(index: int) -> tuple[bool, int, float]:
        lower = lines[index].lower()
        place = -abs(index - middle) if ties == "middle" else -index
        # A line that says something before scaffolding ("|---|---|", "---", a line of
        # links), which matches only through the titles it links to.
        said = says_something(lines[index], code)
        return (said, sum(1 for t in terms if t[:6] in lower), place)

    return max(range(len(lines)), key=rank)


def pointed_line(body: str, kind: str, line_start: int, line_end: int,
                 terms: Sequence[str]) -> tuple[str, int]:
    """(the text a hit's snippet is cut from, the page line it points at): the chunk's line
    with the most query terms, so a paragraph wrapped over many lines points at the sentence
    that matched, not at its first line. A record window keeps its own (middle) line when no
    line matches better; prose keeps its first. Chunks whose text does not keep the page's
    line breaks (a memo, a paragraph cut at sentences) point at their first line."""
    lines = body.split("\n")
    if kind == "summary" or len(lines) < 2 or len(lines) != line_end - line_start + 1:
        return body, line_start
    if kind == "record":
        best = best_line(lines, terms)
        return lines[best], line_start + best
    code = kind == "code"
    best = best_line(lines, terms, ties="first", code=code)
    return text_from(lines, best, code), line_start + best


def text_from(lines: Sequence[str], index: int, code: bool = False) -> str:
    """A chunk's lines from ``index`` on, scaffolding left out: what a hit pointing into prose
    shows, since a wrapped line goes on in the lines after it."""
    said = [line for line in lines[index:] if says_something(line, code)]
    return "\n".join(said or lines[index:])


def make_snippet(text: str, terms: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """A window of ``text`` around the first query term, whitespace collapsed."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lower = flat.lower()
    positions = [lower.find(t[:6]) for t in terms if t and lower.find(t[:6]) >= 0]
    centre = min(positions) if positions else 0
    start = max(0, min(centre - width // 3, len(flat) - width))
    if start:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < start + 20 else start
    end = start + width
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


@dataclass
class LineScore:
    """One page line and the candidate window that ranks it best."""

    key: LineKey
    text: str
    window: WindowKey
    """The best candidate window holding the line."""
    window_score: float
    windows: int = 1
    """Candidate windows read that hold the line."""
    score: float = 0.0


def rank_lines(
    windows: Iterable[tuple[WindowKey, float, Sequence[tuple[LineKey, str]]]],
    query: str,
    weigh: Weigh,
    k: int,
    latent: Mapping[LineKey, float] | None = None,
) -> list[LineScore]:
    """The ``k`` best lines, best first. ``windows``: (window key, fused score, its lines as
    (line key, text)), best first; ``latent``: latent-term match per line key (any scale; the
    best counts as 1)."""
    words = QueryWords(query_terms(query), weigh)
    top = max(latent.values(), default=0.0) if latent else 0.0
    most = LINE_WORDS_WEIGHT + LINE_SPEAKER_WEIGHT + (LINE_LATENT_WEIGHT if top > 0 else 0.0)
    lines: dict[LineKey, LineScore] = {}
    best: list[float] = []  # the k best scores so far, a min-heap
    for window, window_score, held in windows:
        # Windows come best first, so a line is first met in its best window, and once a
        # window's score plus every bonus cannot reach the k-th best, no later line can.
        if len(best) == k and window_score + most < best[0]:
            break
        for key, text in held:
            found = lines.get(key)
            if found is not None:
                found.windows += 1
                continue
            line = lines[key] = LineScore(key, text, window, window_score)
            line.score = window_score + LINE_WORDS_WEIGHT * words.share(text)
            if names_speaker(text, query):
                line.score += LINE_SPEAKER_WEIGHT
            if latent and top > 0:
                line.score += LINE_LATENT_WEIGHT * max(0.0, latent.get(key, 0.0)) / top
            if len(best) < k:
                heapq.heappush(best, line.score)
            elif line.score > best[0]:
                heapq.heapreplace(best, line.score)
    # Stable: ties keep the windows' order.
    return sorted(lines.values(), key=lambda line: -line.score)[:k]


class LatentLines:
    """The latent-term match of the best record lines for a query (keys ``(field position,
    doc id, line)``), for hybrid search on fields whose model has a sparse head and whose
    lines have terms. Encoding the query's terms is one more encoder pass: given a ``pool``,
    it starts at once on a worker thread (the engine releases the GIL) while the caller
    encodes the query's vector; :meth:`result` finishes the lookup on the caller's thread,
    which owns the index connections."""

    def __init__(self, indexes: Sequence[tuple[Field, Any]], query: str,
                 pool: Executor | None = None) -> None:
        self.handles = [fld.index_handle() for fld, _ in indexes]
        self.embedder = self.handles[0].embedder if self.handles else None
        self.wanted = (LINE_LATENT_WEIGHT > 0 and self.embedder is not None
                       and all(h.has_latent_terms() for h in self.handles))
        self.query = query
        self._future: Future[list[LatentTerms]] | None = None
        if self.wanted and pool is not None and self.embedder is not None:
            self._future = pool.submit(self.embedder.embed_latent, [query])

    def result(self) -> dict[LineKey, float] | None:
        """None where no latent terms count (no sparse head, none computed, weight 0) or
        the model failed: the windows and the words still rank the lines."""
        if not self.wanted or self.embedder is None:
            return None
        try:
            encoded = (self._future.result() if self._future is not None
                       else self.embedder.embed_latent([self.query]))
        except EmbeddingError:
            return None
        return {(position, doc, line): score
                for position, handle in enumerate(self.handles)
                for (doc, line), score in handle.latent(encoded[0], LATENT_LINES, lines=True)}


def line_hits(
    indexes: list[tuple[Field, Any]],
    fused: list[tuple[tuple[int, int], float]],
    k: int,
    query: str,
    latent: dict[LineKey, float] | None = None,
) -> list[Hit]:
    """Chunk hits that point at ``k`` different page lines, the lines ranked on their own
    (deepfield.line_rank): each line of a record window by the best window holding it, the
    query words it says, its speaker and its latent terms (a prose chunk's lines too: a
    wrapped line's snippet goes on with the lines after it).
    A hit shows the best window holding its line; ``matches`` counts the windows that do."""
    terms = query_terms(query) or re.findall(r"\w+", query.lower())
    rows: dict[tuple[int, int], Any] = {}
    stems = {stem(t) for t in terms}

    def windows() -> Iterator[tuple[WindowKey, float, list[tuple[LineKey, str]]]]:
        # Read in batches: line ranking stops early, most candidates are never opened.
        read = fused[:max(LINE_BATCH, WINDOWS_PER_HIT * k)]
        for start in range(0, len(read), LINE_BATCH):
            batch = read[start:start + LINE_BATCH]
            for position, (_fld, index) in enumerate(indexes):
                ids = [cid for (pos, cid), _ in batch if pos == position]
                for cid, row in index.chunks(ids).items():
                    rows[(position, cid)] = row
            for key, score in batch:
                row = rows.get(key)
                if row is None:
                    continue  # removed by a concurrent sync
                body_lines = row.body.split("\n")
                if row.kind in ("record", "prose") \
                        and len(body_lines) == row.line_end - row.line_start + 1:
                    # Each line on its own: a prose chunk may hold a paragraph and the note
                    # under it ("> Note: never fill voids larger than 20 %"), which its best
                    # line alone would hide.
                    said = [((key[0], row.doc.id, row.line_start + i), text)
                            for i, text in enumerate(body_lines) if says_something(text)]
                    if row.kind == "prose":
                        # A prose line with no query word is no hit of its own: it inherited
                        # the chunk's score from a paragraph below it, and was the same chunk
                        # again at a line that says nothing asked (a record line stays: the
                        # answer to a turn is often the next turn).
                        wanted = [(k, t) for k, t in said if stems & {stem(w) for w in
                                                                       text_words(t)}]
                        said = wanted or [((key[0], row.doc.id, line), text) for text, line in [
                            pointed_line(row.body, row.kind, row.line_start, row.line_end,
                                         terms)]]
                    if said:  # a table rule is no hit of its own
                        yield key, score, said
                else:
                    text, line = pointed_line(row.body, row.kind, row.line_start, row.line_end,
                                              terms)
                    yield key, score, [((key[0], row.doc.id, line), text)]

    weighers = [idf_weigher(fld.index_handle().term_counts) for fld, _ in indexes]

    def weigh(term: str) -> float:
        return sum(w(term) for w in weighers) / len(weighers)

    hits = []
    for ranked in rank_lines(windows(), query, weigh, k, latent):
        row = rows[ranked.window]
        doc = row.doc
        shown = ranked.text
        if row.kind == "prose":  # a wrapped line goes on: show it with the lines after it
            shown = text_from(row.body.split("\n"), ranked.key[2] - row.line_start)
        hits.append(Hit(
            field=indexes[ranked.key[0]][0].name, filename=doc.filename,
            uuid=doc.uuid, title=doc.title, summary=doc.summary, frontmatter=doc.frontmatter,
            score=ranked.score, snippet=make_snippet(shown, terms),
            snippet_line=ranked.key[2], heading=row.heading,
            line_start=row.line_start, line_end=row.line_end, text=row.body,
            matches=ranked.windows))
    return hits
