"""Which existing pages a new page may duplicate or contradict (the review queue's finder).

When a new page is written (not an update of an existing uuid), the few most similar pages
(BM25 over the new page's title and summary) are compared with it. The comparison is a
heuristic, stated plainly:

* same subject: the two titles share a proper noun (a capitalised word that is not a common
  word: who or what the page is about) or, when one names none, most of their words; and
  the pages share at least 40% of the smaller page's content words;
* likely contradiction: the new page carries a value (number, date or proper noun other than
  the subject) the old one lacks, while the old one carries one the new one lacks or the new
  one uses change words ("moved", "now", "left", "migrated", "from ... to" ...); and either
  the pages have the same subject, or the titles share a subject and the new page restates
  one of the old page's values ("moved from Lyon to Porto");
* both pages must be fact-sized (body ≤ FACT_CHARS): long pages such as transcripts hold
  many names and numbers, and comparing those flagged nearly every pair;
* near-duplicate: otherwise, when 80% of the content words are shared (Jaccard).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..page import Page, derive_title, load_frontmatter_json
from .activation import hidden_as_superseded

if TYPE_CHECKING:
    from ..field import Field

CANDIDATES = 8
"""Most similar existing pages compared with each new page."""
SUBJECT_OVERLAP = 0.4
DUPLICATE_JACCARD = 0.8
TEXT_CHARS = 1500
"""Only the first characters of a body are compared (facts come first; keeps writes cheap)."""
FACT_CHARS = 1500
"""Longer pages (transcripts, articles) hold many values; only duplicates are looked for."""

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’-]*|\d[\d.,:/-]*\d|\d")
"""Words (with their digits: "LiFePO4", "v2" are one name, not a name and a value), numbers."""
_STOP_WORDS = (
    "a an the and or but if of to in on at by for with from into onto over under about as is are "
    "was were be been being has have had do does did not no yes it its it's this that these "
    "those there here he she they we you i me my our your his her their them us him who whom "
    "which what when where why how all any some each every more most less least very also just "
    "than then so such can could will would shall should may might must now new s up down out "
    "after before since until while during per via page note notes summary update updated "
    "monday tuesday wednesday thursday friday saturday sunday"
)
_STOP = frozenset(_STOP_WORDS.split())
_CHANGE = re.compile(
    r"\b(moved|moves|moving|changed|changes|now|no longer|instead|switched|replaced|"
    r"renamed|rescheduled|postponed|delayed|relocated|became|becomes|updated|revised|new|"
    r"left|joined|quit|migrated|transferred|took over|raised|lowered|increased|decreased|"
    r"reduced|cut|cancelled|canceled|anymore)\b|"
    r"\bfrom\b.{1,60}\bto\b", re.IGNORECASE)


@dataclass
class Features:
    """What the heuristic compares: content words, values and title words of one page."""

    words: set[str]
    values: set[str]
    entities: set[str]
    title: set[str]
    subject: set[str]
    """Proper nouns of the title: who or what the page is about."""
    change: bool
    size: int
    """Characters of body: contradictions are only looked for between fact-sized pages."""


def title_terms(title: str) -> tuple[set[str], set[str]]:
    """(content words, proper nouns) of a title."""
    tokens = [w.replace("’", "'").removesuffix("'s") for w in _WORD.findall(title)]
    words = {w.lower() for w in tokens} - _STOP
    return words, {w.lower() for w in tokens if w[:1].isupper() and len(w) > 1} - _STOP


_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")


def _without_empty_sections(body: str) -> str:
    """``body`` less the headings of empty sections: a skeleton (``## Problem``, ``## Method``
    … that `domain add` writes) is the same on every page of a kind, so counted it made
    every two pages added without text "80% the same"."""
    lines = body.splitlines()
    kept: list[str] = []
    for number, line in enumerate(lines):
        if _HEADING.match(line):
            following = next((x for x in lines[number + 1:] if x.strip()), None)
            if following is None or _HEADING.match(following):
                continue
        kept.append(line)
    return "\n".join(kept)


def features(page: Page, title: str) -> Features:
    body = _without_empty_sections(page.body[:TEXT_CHARS])
    text = f"{title}\n{page.summary or ''}\n{body}"
    words: set[str] = set()
    values: set[str] = set()
    entities: set[str] = set()
    for token in _WORD.findall(text):
        clean = token.strip("'’-").replace("’", "'")
        if clean.endswith("'s"):
            clean = clean[:-2]
        lower = clean.lower()
        if not lower or lower in _STOP:
            continue
        if lower[0].isdigit():
            values.add(lower)
        elif clean[0].isupper() and len(clean) > 1:
            entities.add(lower)
        else:
            words.add(lower)
    title_words, subject = title_terms(title)
    return Features(words - entities, values, entities, title_words, subject,
                    bool(_CHANGE.search(text)), len(page.body.strip()))


def compare(new: Features, old: Features) -> tuple[str, str] | None:
    """("contradiction" | "duplicate", reason) for a suspicious pair, else None."""
    shared_subject = new.subject & old.subject
    union_title = new.title | old.title
    title_sim = len(new.title & old.title) / len(union_title) if union_title else 0.0
    smaller = min(len(new.words), len(old.words))
    overlap = len(new.words & old.words) / smaller if smaller else 0.0
    # Two titles naming different subjects ("Atlas budget", "Borealis budget") never match.
    distinct = bool(new.subject and old.subject and not shared_subject)
    same_subject = not distinct and (bool(shared_subject) or title_sim >= 0.5) and \
        overlap >= SUBJECT_OVERLAP
    subject = new.subject | old.subject
    new_all, old_all = new.values | new.entities, old.values | old.entities
    new_values = new_all - old_all - subject
    old_values = old_all - new_all - subject
    # "X moved from <old value> to <new value>": the update names what it replaces.
    restates = bool(shared_subject and (new_all & old_all) - subject and new.change)
    facts = max(new.size, old.size) <= FACT_CHARS
    if facts and (same_subject or restates) and new_values and (old_values or new.change):
        about = ", ".join(sorted(shared_subject or new.title & old.title)[:3]) or "same subject"
        was = ", ".join(sorted(old_values)[:3]) or "—"
        now = ", ".join(sorted(new_values)[:3])
        return "contradiction", f"same subject ({about}), different values: {was} → {now}"
    all_new = new.words | new.values | new.entities
    all_old = old.words | old.values | old.entities
    union = all_new | all_old
    jaccard = len(all_new & all_old) / len(union) if union else 0.0
    if jaccard >= DUPLICATE_JACCARD:
        return "duplicate", f"{jaccard:.0%} of the words are shared"
    return None


@dataclass
class Finding:
    kind: str
    old: str
    old_uuid: str | None
    reason: str


def find_conflicts(fld: Field, page: Page, *, exclude_uuid: str | None = None,
                   limit: int = CANDIDATES) -> list[Finding]:
    """Existing pages that ``page`` (not yet written) may duplicate or contradict."""
    title = derive_title(page, fallback="")
    query = " ".join(filter(None, [title, page.summary or page.body[:300]]))
    index = fld.index_handle()
    hits = index.keyword(query, 8 * limit)
    if not hits:
        return []
    doc_ids = index.chunk_docs([cid for cid, _ in hits])
    ordered = list(dict.fromkeys(doc_ids[cid] for cid, _ in hits if cid in doc_ids))
    mine = features(page, title)
    marks = ",".join("?" * len(ordered))
    rows = {r[0]: r[1:] for r in index.conn.execute(
        "SELECT id, filename, uuid, frontmatter, title, size, summary FROM df_docs "
        f"WHERE id IN ({marks})", ordered)}
    size = len(page.render().encode())

    def comparable(other: int) -> bool:
        """Both fact-sized (contradictions), or of similar size (duplicates)."""
        facts = size <= FACT_CHARS + 1000 and other <= FACT_CHARS + 1000  # + frontmatter
        return facts or min(size, other) >= 0.5 * max(size, other)

    # A replaced page is left out (its successor counts), unless its successor is gone:
    # search shows such a page again, so it is live for duplicates too.
    replaced = hidden_as_superseded(
        index, {row[0]: load_frontmatter_json(row[2]) for row in rows.values()})
    candidates = [rows[d] for d in ordered if d in rows
                  and not (exclude_uuid and rows[d][1] == exclude_uuid)
                  and rows[d][0] not in replaced
                  and comparable(rows[d][4])]
    # Pages about the same subject (a proper noun of the title) are compared first.
    candidates.sort(key=lambda r: not title_terms(r[3])[1] & mine.subject)
    out: list[Finding] = []
    for row in candidates[:limit]:
        try:
            text = (fld.path / row[0]).read_text("utf-8", "replace")
        except OSError:
            continue
        # Title and summary come from the index: no YAML parsing per candidate.
        other = Page(body=_body_of(text), frontmatter={"summary": row[5]})
        found = compare(mine, features(other, row[3]))
        if found:
            out.append(Finding(found[0], row[0], row[1], found[1]))
    return out


def _body_of(text: str) -> str:
    """A page's text after its frontmatter block (cheaply, without parsing the YAML)."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end >= 0:
            return text[text.find("\n", end + 4) + 1:] if "\n" in text[end + 4:] else ""
    return text
