"""The reference baseline: plain SQLite FTS5 BM25, built with the stdlib alone (no deepfield).

This is what another project can rebuild in twenty lines and compare against, so it is kept
exactly that plain:

* one document per dialogue turn, ``Speaker: text`` plus `` [image: caption]`` when the turn
  shares an image (the text deepfield's importer puts on the turn's page line, without the id);
  for session metrics, one document per session: its turns joined by line breaks;
* ``CREATE VIRTUAL TABLE … USING fts5(body, tokenize='porter unicode61')``;
* the query: lower-cased ``\\w+`` tokens of the question minus a standard English stop-word
  list, de-duplicated, each double-quoted, joined by ``OR`` (all tokens if none is left);
* ranked by ``bm25()`` (k1 = 1.2, b = 0.75, FTS5's defaults).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

_STOP_TEXT = """a about above after again against all am an and any are aren't as at
be because been before being below between both but by can can't cannot could couldn't did didn't
do does doesn't doing don't down during each few for from further had hadn't has hasn't have
haven't having he he'd he'll he's her here here's hers herself him himself his how how's i i'd
i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
not of off on once only or other ought our ours ourselves out over own same shan't she she'd
she'll she's should shouldn't so some such than that that's the their theirs them themselves then
there there's these they they'd they'll they're they've this those through to too under until up
very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which
while who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours
yourself yourselves s t d ll m re ve"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
"""A standard English list (NLTK's, as other LoCoMo baselines use) plus the pieces ``\\w+``
cuts from contractions ("don't" → "don", "t")."""

TOKENIZER = "porter unicode61"


def turn_document(turn: dict[str, Any]) -> str:
    text = " ".join(str(turn.get("text", "")).split())
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [image: {' '.join(str(caption).split())}]"
    return f"{turn.get('speaker') or '?'}: {text}"


def match_query(question: str) -> str:
    tokens = re.findall(r"\w+", question.lower())
    kept = [t for t in dict.fromkeys(tokens) if t not in STOP_WORDS] or list(
        dict.fromkeys(tokens))
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in kept)


class PlainFTS:
    """One conversation's turns and sessions in two in-memory FTS5 tables."""

    def __init__(self, turns: dict[str, dict[str, Any]]) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(f"CREATE VIRTUAL TABLE turn USING fts5(id UNINDEXED, body, "
                          f"tokenize='{TOKENIZER}')")
        self.conn.execute(f"CREATE VIRTUAL TABLE session USING fts5(id UNINDEXED, body, "
                          f"tokenize='{TOKENIZER}')")
        by_session: dict[int, list[str]] = {}
        for dia_id, turn in turns.items():
            document = turn_document(turn)
            self.conn.execute("INSERT INTO turn(id, body) VALUES (?, ?)", (dia_id, document))
            by_session.setdefault(int(dia_id[1:].split(":")[0]), []).append(document)
        for number, documents in by_session.items():
            self.conn.execute("INSERT INTO session(id, body) VALUES (?, ?)",
                              (str(number), "\n".join(documents)))

    def _search(self, table: str, question: str, k: int) -> list[str]:
        query = match_query(question)
        if not query:
            return []
        rows = self.conn.execute(
            f"SELECT id FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
            (query, k))
        return [row[0] for row in rows]

    def turns(self, question: str, k: int) -> list[str]:
        """The ``k`` best turns (dialogue ids), best first."""
        return self._search("turn", question, k)

    def sessions(self, question: str, k: int) -> list[int]:
        """The ``k`` best session numbers, best first."""
        return [int(s) for s in self._search("session", question, k)]
