"""What a piece of conversation is about, without a model: names, dates, numbers, key terms.

Shared by the offline memorizer (which picks the sentences worth a memo) and the offline
researcher (which turns a question into entity and keyword queries and judges whether the
evidence covers it). Everything here is deterministic and fast: regular expressions and word
counts, no tagger, so it runs at thousands of sessions per second and in any language that
capitalises names (others fall back to key terms).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from .index.keyword import STOP_WORDS, query_terms

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_MONTH = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|" \
         r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_DATE = re.compile(
    rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\.?,?(?:\s+\d{{4}})?|"
    rf"{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|{_MONTH}\s+\d{{4}}|"
    r"(?:19|20)\d{2}s?|\d{1,2}/\d{1,2}/\d{2,4})\b"
)
_RELATIVE_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|last\s+(?:week|weekend|month|year|night|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|next\s+(?:week|month|year)|"
    r"(?:a|one|two|three|few|couple of)\s+(?:days?|weeks?|months?|years?)\s+ago|"
    r"this\s+(?:week|weekend|month|year|morning|summer|winter|spring|fall)|"
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\b\d+(?:[.,]\d+)?(?:%|\s*(?:percent|km|kg|k|m|hours?|minutes?|days?|weeks?|months?|"
    r"years?)\b)?"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred|"
    r"thousand|once|twice|several)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"\b[A-Z][a-zA-Z'’-]+(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][a-zA-Z'’-]+)*")
_NAME_WITH_DIGITS = re.compile(
    r"\b[A-Z][a-zA-Z'’-]+(?:\d[\w'’-]*)?(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][a-zA-Z'’-]+"
    r"(?:\d[\w'’-]*)?)*")
"""Names that go on with digits ("LiFePO4", "GPT4o"), for memos and titles; the researcher's
entities keep ``_NAME`` (its queries and LoCoMo figures were measured with it)."""
_NOT_NAMES = frozenset(
    w.capitalize() for w in [*STOP_WORDS, "hey", "hi", "hello", "thanks", "thank", "yeah", "yes",
                             "oh", "wow", "sure", "okay", "ok", "lol", "haha", "cool", "great",
                             "awesome", "sounds", "good", "nice", "well", "let", "im", "i'm",
                             "i've", "i'll", "it's", "that's", "what's", "glad", "sorry",
                             "absolutely", "definitely", "totally", "love", "hope", "by"]
) | {m.capitalize() for m in MONTHS} | {"I", "I'm", "I've", "I'll", "I'd", "Monday", "Tuesday",
                                         "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
_CUES = re.compile(
    r"\b(?:decided|decide|plan(?:s|ned|ning)?|will|going to|gonna|agreed|bought|moved|started|"
    r"finished|joined|left|won|lost|adopted|married|graduated|visited|went|travel(?:l?ed)?|"
    r"need to|goal|deadline|problem|issue|because|favou?rite|prefer|never|always|learned|"
    r"got|made|created|signed|launched|fixed|broke|hired|quit|bought|painted|wrote|read)\b",
    re.IGNORECASE,
)
_FILLER = re.compile(
    r"^(?:hey|hi|hello|thanks|thank you|wow|cool|great|awesome|nice|sounds|lol|haha|yeah|yes|"
    r"no|ok|okay|sure|bye|see you|take care)\b[^.!?]{0,40}[.!?]*$",
    re.IGNORECASE,
)


def names(text: str, *, digits: bool = False) -> list[str]:
    """Capitalised names and name phrases (in order). A lone capitalised word that starts a
    sentence counts only if the text also capitalises it mid-sentence: "Congrats!" is no name,
    and a name said once, first thing in a sentence, is the price of that rule. ``digits``:
    a name goes on with the digits written into it ("LiFePO4", not "LiFePO")."""
    found: list[str] = []
    seen: set[str] = set()
    mid_sentence: set[str] = set()
    starts: list[tuple[str, bool]] = []
    for match in (_NAME_WITH_DIGITS if digits else _NAME).finditer(text):
        start = match.start()
        before = text[max(0, start - 2):start]
        at_start = start == 0 or before.strip()[-1:] in (".", "!", "?", ":", '"') or "\n" in before
        starts.append((match.group(0), at_start))
        if not at_start:
            mid_sentence.add(match.group(0).split()[0])
    for phrase, at_start in starts:
        words = [w for w in phrase.split() if w not in _NOT_NAMES]
        if not words:
            continue
        candidate = " ".join(words)
        if at_start and len(phrase.split()) == 1 and phrase not in mid_sentence:
            continue  # "Congrats!", "Last week ...": capitalised only because they start
        if candidate.lower() not in seen:
            seen.add(candidate.lower())
            found.append(candidate)
    return found


def dates(text: str) -> list[str]:
    """Absolute and relative time expressions, in order of appearance."""
    spans = [m for m in _DATE.finditer(text)] + [m for m in _RELATIVE_TIME.finditer(text)]
    spans.sort(key=lambda m: m.start())
    return list(dict.fromkeys(m.group(0).strip() for m in spans))


def numbers(text: str) -> list[str]:
    return list(dict.fromkeys(m.group(0).strip() for m in _NUMBER.finditer(text)
                              if not _DATE.fullmatch(m.group(0).strip())))


def has_date(text: str) -> bool:
    return bool(_DATE.search(text) or _RELATIVE_TIME.search(text))


def has_number(text: str) -> bool:
    return bool(_NUMBER.search(text))


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def word_count(text: str) -> int:
    """Words of ``text``, where two CJK characters count as one: Chinese and Japanese write no
    spaces, so a whole sentence was one "word" and every sentence counted as filler."""
    cjk = len(_CJK.findall(text))
    return len(_CJK.sub(" ", text).split()) + (cjk + 1) // 2


def is_filler(sentence: str) -> bool:
    return bool(_FILLER.match(sentence.strip())) or word_count(sentence) < 4


_NOT_TOPICS = frozenset(
    [*MONTHS, "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
     "yesterday", "today", "tomorrow", "week", "weekend", "year", "years", "month", "time",
     "decided", "going", "gonna", "will", "want", "wanted", "think", "thought", "know", "knew",
     "said", "told", "make", "made", "take", "took", "come", "came", "feel", "felt", "look",
     "looking", "great", "good", "awesome", "amazing", "thanks", "thank", "yeah", "sure", "love",
     "glad", "hope", "need", "last", "next", "lots", "well", "even", "still", "always", "never",
     "sounds", "wow", "cool", "nice", "noted", "okay", "right", "better", "best", "keep", "ship",
     "let's", "i'm", "it's", "that's", "you're", "i've", "what's", "there's", "being", "doing",
     # Contractions of four letters and more say nothing about what a session is about
     # ("I'll order a damper" made "i'll" a topic term, and a query word for related pages).
     "i'll", "you'll", "we'll", "they'll", "he'll", "she'll", "it'll", "that'll", "we're",
     "they're", "we've", "you've", "they've", "i'd", "you'd", "we'd", "they'd", "he's", "she's",
     "don't", "doesn't", "didn't", "can't", "won't", "isn't", "aren't", "wasn't", "weren't",
     "haven't", "hasn't", "hadn't", "couldn't", "wouldn't", "shouldn't", "here's", "who's"]
)


def key_terms(texts: Iterable[str], limit: int = 8) -> list[str]:
    """The most frequent content words (length ≥ 4) of ``texts``, most frequent first
    (ties: longer words first, as they tend to name things)."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(t for t in query_terms(text)
                      if len(t) >= 4 and not t.isdigit() and t not in _NOT_TOPICS)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], -len(item[0]), item[0]))
    return [term for term, _count in ranked[:limit]]


def sentence_score(sentence: str, topic: set[str]) -> float:
    """How much a sentence is worth keeping in a memo: facts (names, dates, numbers, events)
    and topic words count; greetings and very short or very long sentences do not."""
    if is_filler(sentence):
        return 0.0
    terms = set(query_terms(sentence))
    score = 1.0 + 1.5 * len(names(sentence)) + 2.0 * len(dates(sentence))
    score += 1.0 * len(numbers(sentence)) + 1.5 * len(_CUES.findall(sentence))
    score += 0.7 * len(terms & topic)
    if sentence.rstrip().endswith("?"):
        score *= 0.5  # questions ask for facts; the answers hold them
    words = word_count(sentence)
    if words > 45:
        score *= 45 / words
    return score
