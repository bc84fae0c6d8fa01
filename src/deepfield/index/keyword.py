"""BM25 over chunks with SQLite FTS5: turning free text into a safe MATCH expression.

Users type questions, not FTS5 syntax, so every term is quoted (no operator or column can be
injected), English stop words are dropped when something else remains, and terms are OR-ed so
BM25 ranks partial matches instead of demanding all of them. CJK runs become bigram terms
aimed at the ``cjk`` column (see cjk.py).
"""

from __future__ import annotations

import re
import sqlite3

from .cjk import cjk_query_terms, has_cjk

# Column weights for bm25(): body, context (title + heading path), cjk n-grams. The context
# column at full weight is what lets "when did …" questions find the dated session header
# (chosen on LoCoMo before bench/evalkit's protocol, weights 0.5-2 about equal; no script
# reruns that sweep).
BODY_WEIGHT = 1.0
CONTEXT_WEIGHT = 1.0
CJK_WEIGHT = 1.0

STOP_WORDS = frozenset(
    [
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
        "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
        "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
        "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
        "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
        "just",
        "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
        "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she",
        "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
        "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
        "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
        "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
        "yourselves", "also", "did", "does", "ever", "many", "much", "one", "ones", "s", "t", "don",
        "didn", "doesn", "isn", "wasn", "weren", "won", "anything", "something", "thing", "things",
        "get", "got", "like", "really", "kind", "sort",
    ]
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


def text_words(text: str) -> list[str]:
    """The lower-cased words of ``text`` as a query's are read (’ as ', a trailing 's or 't
    dropped: "Melanie's" is "melanie"), stop words and CJK kept."""
    words = [w.lower().replace("’", "'") for w in _WORD.findall(text)]
    return [w.split("'")[0] if w.endswith(("'s", "'t")) else w for w in words]


def query_terms(text: str) -> list[str]:
    """Lower-cased word terms of a query, stop words removed unless nothing else is left."""
    words = [w for w in text_words(text) if not has_cjk(w)]
    kept = [w for w in words if w not in STOP_WORDS]
    return list(dict.fromkeys(kept or words))


def content_terms(text: str) -> list[str]:
    """The words of ``text`` that are no stop words, and its Chinese and Japanese bigrams: what
    a question must have for there to be something to look for ("the of and" has none)."""
    words = [w for w in text_words(text) if not has_cjk(w) and w not in STOP_WORDS]
    return list(dict.fromkeys(words)) + cjk_query_terms(text)


def match_expression(text: str, terms: list[str] | None = None) -> str | None:
    """An FTS5 MATCH string for ``text`` (or for the given word ``terms``), or None when it
    has no searchable term."""
    parts = [f'"{term}"' for term in (query_terms(text) if terms is None else terms)]
    parts.extend(f'cjk : "{term}"' for term in cjk_query_terms(text))
    return " OR ".join(parts) if parts else None


PRUNE_MIN_CHUNKS = 20_000
"""Fields smaller than this are searched with every query term (it is cheap there)."""
PRUNE_DOC_SHARE = 0.05
"""In bigger fields, terms found in more than this share of chunks are left out of the
OR-query when a rarer term remains: BM25 gives them little weight (IDF ≈ log 19 against ≈ 10
for rare terms) but FTS5 scores every chunk they match. Measured on the 10k-page corpus
(103k chunks, bench/bm25_pruning.py, document frequencies counted per query): mean BM25
query 6.6 → 3.6 ms, top-10 overlap with the full query 0.975."""


class TermCounts:
    """How many chunks each term occurs in, cached for one index generation.

    Counting costs about 0.1 ms a term on 100k chunks, and the counts only change when the
    index does (which bumps its generation)."""

    MAX_TERMS = 100_000

    def __init__(self) -> None:
        self.generation = -1
        self.size = 0
        self.counts: dict[str, int] = {}

    def chunks(self, conn: sqlite3.Connection, generation: int | None) -> int:
        """Chunks in the index (its highest chunk id); starts a new cache when the index
        changed since the last call."""
        if generation is None or generation != self.generation \
                or len(self.counts) > self.MAX_TERMS:
            self.generation = -1 if generation is None else generation
            self.size = conn.execute("SELECT max(rowid) FROM df_chunks").fetchone()[0] or 0
            self.counts = {}
        return self.size

    def lookup(self, conn: sqlite3.Connection, terms: list[str],
               generation: int | None) -> tuple[int, dict[str, int]]:
        """(chunks in the index, {term: chunks containing it}) for ``terms``."""
        size = self.chunks(conn, generation)
        for term in terms:
            if term not in self.counts:
                # Counted through the index, so the term is stemmed as the chunks were
                # (an fts5vocab row holds the stem: "allergy" is listed as "allergi").
                phrase = '"' + term.replace('"', '""') + '"'
                try:
                    self.counts[term] = conn.execute(
                        "SELECT count(*) FROM df_chunks_fts WHERE df_chunks_fts MATCH ?",
                        (phrase,)).fetchone()[0]
                except sqlite3.OperationalError:  # nothing FTS can match (punctuation)
                    self.counts[term] = 0
        return size, self.counts


def pruned_terms(conn: sqlite3.Connection, terms: list[str],
                 counts: TermCounts | None = None, generation: int | None = None) -> list[str]:
    """``terms`` without the very common ones, in big fields (see PRUNE_DOC_SHARE).
    ``counts`` caches the document frequencies for index ``generation``."""
    counts = counts or TermCounts()
    if len(terms) < 2 or counts.chunks(conn, generation) < PRUNE_MIN_CHUNKS:
        return terms  # small fields are never pruned, so their terms are never counted
    size, known = counts.lookup(conn, terms, generation)
    kept = [t for t in terms if known.get(t, 0) <= PRUNE_DOC_SHARE * size]
    return kept or [min(terms, key=lambda t: known.get(t, 0))]


def bm25_search(
    conn: sqlite3.Connection,
    text: str,
    limit: int,
    weights: tuple[float, float, float] = (BODY_WEIGHT, CONTEXT_WEIGHT, CJK_WEIGHT),
    *,
    counts: TermCounts | None = None,
    generation: int | None = None,
) -> list[tuple[int, float]]:
    """Top chunk ids with BM25 scores (higher is better); ``counts`` and ``generation`` as in
    :func:`pruned_terms`."""
    if limit <= 0:
        return []
    terms = pruned_terms(conn, query_terms(text), counts, generation)
    expression = match_expression(text, terms)
    if expression is None:
        return []
    rows = conn.execute(
        "SELECT rowid, bm25(df_chunks_fts, ?, ?, ?) AS score FROM df_chunks_fts "
        "WHERE df_chunks_fts MATCH ? ORDER BY score LIMIT ?",
        (*weights, expression, limit),
    ).fetchall()
    return [(int(rowid), -float(score)) for rowid, score in rows]
