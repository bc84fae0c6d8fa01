"""The extractive memo: one paragraph of a session's own words, written without a model.

The Memorizer's default (memorize.py, GAM's memo without an LLM): a sentence that says who
talked, when and about what, then the session's most informative sentences (names, dates,
numbers, decisions, topic words) in their original order with their speakers, then the names,
dates and numbers not yet said. Deterministic, so a session remembered twice gets the same memo.

A memo is a summary, never the transcript: it takes at most MEMO_SHARE of the session's words
(a 5-turn chat of 80 words had all of them chosen under the 90-word cap, and the whole chat
then showed in ``ls``, every search stub and ``context``).
"""

from __future__ import annotations

import re

from .markdown import is_fence, says_something, split_sentences
from .salience import dates, key_terms, names, numbers, sentence_score, word_count
from .sessions import Session, spoken_turns

MEMO_WORDS = 90
"""Length of an extractive memo; GAM's memos are one paragraph."""

MEMO_SHARE = 1 / 3
"""Most of a session's words its memo's sentences may take: a short chat gets a short memo."""

MEMO_MIN_WORDS = 20
"""Fewest words the sentences of a memo may take, however short the session (one sentence
of it at least)."""

MEMO_MAX_CHARS = 1500
"""A memo is one paragraph: longer ones (a model that rambles, names listed without end) are
cut at a word, so the frontmatter stays far below the 8 KB a page may take."""


def cap_memo(memo: str) -> str:
    if len(memo) <= MEMO_MAX_CHARS:
        return memo
    return memo[:MEMO_MAX_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " …"


def extractive_memo(session: Session, topic_terms: list[str] | None = None) -> str:
    """One paragraph from the session's own words: a context sentence, then the most
    informative sentences (in order, with their speakers), then names/dates/numbers not yet
    said. A note without speakers (or a session whose sentences score nothing: no names or
    numbers the rules see, as in Chinese) gets its first sentences instead, a document's lead
    being its summary. Deterministic; no model."""
    ordered = topic_terms if topic_terms is not None else topic_terms_of(session)
    topic = {t.lower() for t in ordered}
    scored: list[tuple[float, int, str, str]] = []
    position = 0
    prose = bool(_prose_of(session))
    for turn in spoken_turns(session):
        for paragraph in prose_paragraphs(turn.text) if prose else _any_lines(turn.text):
            for sentence in split_sentences(paragraph):
                scored.append((sentence_score(sentence, topic), position, turn.speaker,
                               sentence))
                position += 1
    total = sum(word_count(sentence) for *_, sentence in scored)
    budget = min(MEMO_WORDS, max(MEMO_MIN_WORDS, int(total * MEMO_SHARE)))
    chosen = [] if not session.participants else _best(scored, budget)
    if not chosen:
        chosen = _best([(1.0, pos, speaker, text) for _s, pos, speaker, text in scored], budget)
    chosen.sort()
    parts = [context_sentence(session, ordered)] if session.participants else \
        [p for p in [note_sentence(session, ordered)] if p]
    last_speaker = None
    for _pos, speaker, sentence in chosen:
        if speaker and speaker != last_speaker:
            parts.append(f"{speaker}: {sentence}")
        else:
            parts.append(sentence)
        last_speaker = speaker
    said = " ".join(parts)
    text = _prose_of(session) or " ".join(t.text for t in spoken_turns(session))
    extra = [x for x in dict.fromkeys(_entity(x) for x in (*names(text, digits=True),
                                                            *dates(text), *numbers(text)))
             if x and x not in said][:8]
    if extra:
        parts.append("Also mentioned: " + ", ".join(extra) + ".")
    return " ".join(p if p.rstrip().endswith((".", "!", "?", "…", "。", "！", "？")) else p + "."
                    for p in parts)


def prose_paragraphs(text: str) -> list[str]:
    """The paragraphs of prose in a turn's text, each on one line: tables, rules, headings,
    comments, fenced code and an assistant's tool calls (sessions._tool_calls) are left out.
    A table became one "sentence" of cells and its ``|---|---|`` rule, copied into the memo
    (and quoted as evidence from the page's summary)."""
    paragraphs: list[str] = []
    current: list[str] = []
    fence = False
    for line in text.splitlines():
        if is_fence(line):
            fence = not fence
        prose = not fence and not is_fence(line) and says_something(line) \
            and not line.lstrip().startswith(("|", "[call "))  # a table row, a tool call
        if prose:
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
        if not line.strip() and current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


def _prose_of(session: Session) -> str:
    return " ".join(p for t in spoken_turns(session) for p in prose_paragraphs(t.text))


def _any_lines(text: str) -> list[str]:
    """A session with no prose at all (only a table, only code): each line that says
    something, table rows as "Brake pads: 180 EUR", so its memo is not empty."""
    lines = []
    for line in text.splitlines():
        if not says_something(line, code=True) or is_fence(line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|") if c.strip()]
        row = line.lstrip().startswith("|") and cells
        lines.append(f"{cells[0]}: {', '.join(cells[1:])}" if row and len(cells) > 1 else
                     (cells[0] if row else line.strip()))
    return lines


def _best(scored: list[tuple[float, int, str, str]], budget: int) -> list[tuple[int, str, str]]:
    """(position, speaker, sentence) of the best-scored sentences within ``budget`` words
    (ties: the earlier first)."""
    chosen: list[tuple[int, str, str]] = []
    words = 0
    for score, pos, speaker, sentence in sorted(scored, key=lambda s: (-s[0], s[1])):
        if score <= 0 or words >= budget:
            break
        length = word_count(sentence)
        if words + length > budget * 1.3 and chosen:
            continue
        if length > budget * 1.3:  # one endless "sentence" (a turn without stops): its start
            sentence = " ".join(sentence.split()[:budget]) + " …"
            length = budget
        chosen.append((pos, speaker, sentence))
        words += length
    return chosen


_BARE_NUMBER = re.compile(
    r"\d+(?:[.,]\d+)?\s*[km]?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|twenty|hundred|thousand|once|twice|several", re.IGNORECASE)
_CURRENCIES = frozenset(["USD", "EUR", "GBP", "JPY", "CHF", "CNY", "CAD", "AUD", "NZD", "SEK",
                        "NOK", "DKK", "PLN", "CZK", "HUF", "INR", "RUB", "BRL", "MXN", "ZAR",
                        "KRW", "SGD", "HKD", "TRY", "ILS", "AED"])
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")


def _entity(item: str) -> str:
    """What an "Also mentioned" item says on its own, or "" when nothing: "Dana's" is Dana;
    a bare 4, "two" or "40k", a currency code or a unit's scrap ("Wh" of "Wh/kg") means
    nothing without the sentence it was in (a number with its unit, "3 km", "20%", stays)."""
    item = _POSSESSIVE.sub("", item.strip())
    if (_BARE_NUMBER.fullmatch(item) or item.upper() in _CURRENCIES
            or (len(item) < 3 and not item.isupper())):
        return ""
    return item


def topic_terms_of(session: Session) -> list[str]:
    """Names other than the speakers' first (they say what the session is about), the most
    often said first (ties: the first said; "LiFePO4 or LiPo? … LiPo is lighter … we pick
    LiPo" is about LiPo), then the most frequent content words."""
    text = _prose_of(session) or " ".join(t.text for t in spoken_turns(session))
    speakers = {p.lower() for p in session.participants}
    said = [e for n in names(text, digits=True) if (e := _entity(n)) and e.lower() not in speakers]
    counts = {e: len(re.findall(rf"(?<!\w){re.escape(e)}(?!\w)", text)) for e in said}
    found = sorted(said, key=lambda e: -counts[e])[:2]  # stable: ties keep their order
    terms = [t for t in key_terms([text], limit=6) if t not in {f.lower() for f in found}]
    return [*found, *terms][:4]


def context_sentence(session: Session, topic: list[str]) -> str:
    who = join_names(session.participants) or "Someone"
    return f"{who} talked{_setting(session, topic)}."


def note_sentence(session: Session, topic: list[str]) -> str:
    """The context sentence of a note, which has no speakers ("Someone talked" said of a
    document was wrong): what it is about, or "" when nothing is known."""
    setting = _setting(session, topic)
    return f"Notes{setting}." if setting else ""


def _setting(session: Session, topic: list[str]) -> str:
    """" on 2024-05-04 about X, Y (project Z)": when, what about, which project."""
    when = ""
    if session.when:
        when = f" {'at' if session.when[:1].isdigit() and ':' in session.when[:5] else 'on'} " \
            f"{session.when}"
    about = f" about {session.topic}" if session.topic else (
        f" about {', '.join(topic[:3])}" if topic else "")
    project = f" (project {session.project})" if session.project else ""
    return f"{when}{about}{project}"


def join_names(items: list[str]) -> str:
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
