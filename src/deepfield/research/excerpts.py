"""Excerpts: how well a line matches a query, and the shorter verbatim quote of a long line.

A long line is quoted by its label (``Speaker (D1:3):``) and the sentences that carry the
facts, joined by " … ": every piece copied from the line, so an excerpt doubles what a budget
holds without writing a word the page does not have (research/evidence.py makes one per
candidate; research/packing.py quotes all but the best few by it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..index.keyword import query_terms
from ..line_rank import Weigh, label_and_text, stem
from ..markdown import split_sentences, without_links
from ..salience import sentence_score
from ..tokens import count_tokens


def line_weight(text: str, terms: set[str], entities: Sequence[str],
                weigh: Weigh | None = None) -> float:
    """How well one line matches: query terms it contains (stemmed), entities counted double;
    each weighed by ``weigh`` (TermWeights) when given, else 1. Link text is left out: "Related:
    [Kitchen planning](….md)" is not about the kitchen, and outranked the line that was."""
    text = without_links(text)
    words = {stem(w) for w in query_terms(text)}
    if not words:
        return 0.0
    lowered = text.lower()
    matched = [t for t in terms if stem(t) in words]
    named = [e for e in entities if e.lower() in lowered]
    if weigh is None:
        hits = float(len({stem(t) for t in matched}) + len(named))
    else:
        by_stem: dict[str, float] = {}
        for term in matched:  # "kid" and "kids" are one match, weighed by the rarer form
            by_stem[stem(term)] = max(by_stem.get(stem(term), 0.0), weigh(term))
        hits = sum(by_stem.values()) + sum(weigh(e.lower()) for e in named)
    return hits / (1.0 + 0.02 * len(words))


ELIDE_TOKENS = 24
"""Lines longer than this are quoted by their label and the sentences that carry facts."""
ELISION = " … "
BREADTH_SENTENCES = 1
"""Sentences an excerpt keeps for a question whose answer is several things in several places
(offline.QuestionPlan.breadth): one sentence per line fits about a third more lines in the
budget, and such answers need lines more than they need words around each item. Chosen on
LoCoMo dev, in a sweep that no script in bench/ reruns (so no figure here); for every question
it cost single-hop answers words, so it is not the default."""


def excerpt(line: str, terms: set[str], entities: Sequence[str], keep_sentences: int = 2,
            weigh: Weigh | None = None) -> str:
    """A verbatim excerpt of ``line``: its label (``Speaker (D1:3): ``) and at most
    ``keep_sentences`` of its sentences — those matching the query, else the most informative —
    in order, joined by " … ". Greetings and small talk are what get cut; every piece is copied
    from the line."""
    if count_tokens(line) <= ELIDE_TOKENS:
        return line
    label, text = label_and_text(line)
    sentences = split_sentences(text)
    if len(sentences) <= keep_sentences:
        return line
    topic = set(terms)
    scored = [(line_weight(s, terms, entities, weigh) * 3 + sentence_score(s, topic), i, s)
              for i, s in enumerate(sentences)]
    keep = sorted(sorted(scored, key=lambda x: (-x[0], x[1]))[:keep_sentences],
                  key=lambda x: x[1])
    if any(s not in text for _score, _i, s in keep):
        return line  # sentence splitting changed spacing: quote the line whole
    quoted = "" if keep[0][1] == 0 else "… "
    for position, (_score, index, sentence) in enumerate(keep):
        if position:
            quoted += " " if index == keep[position - 1][1] + 1 else ELISION
        quoted += sentence
    return label + quoted + ("" if keep[-1][1] == len(sentences) - 1 else " …")


WINDOW_WORDS = 30
"""Words in each window of a sentence too long to quote whole (:func:`word_windows`)."""
_WORD_SPAN = re.compile(r"\S+")


def word_windows(text: str, size: int = WINDOW_WORDS) -> list[str]:
    """``text`` cut into windows of ``size`` words, each verbatim (a slice of ``text``): how a
    sentence with no sentence end in it — a pasted session on one line, thousands of words —
    is quoted by the windows that match, where quoting it whole took the entire budget."""
    spans = [m.span() for m in _WORD_SPAN.finditer(text)]
    return [text[spans[i][0]:spans[min(i + size, len(spans)) - 1][1]]
            for i in range(0, len(spans), size)]
