"""Seeded synthetic agent-memory corpora for the performance benchmarks.

Every page is a memoryfield page as an agent would write it: YAML frontmatter (title, uuid,
created, updated, summary, tags), a ``#`` heading, 2-4 ``##`` sections of 1-3 paragraphs, some
list items, 600-2500 bytes. Words follow a Zipf-Mandelbrot law over ~4,300 words (English
function words first, then English content words, then generated pseudo-words), mixed with
names, numbers and ticket ids, plus a topic (shared by ~1/600 of the pages) and two rare words
per page, so BM25 sees realistic document frequencies and targeted queries have a right page.

Page ``i`` depends only on ``(seed, i)``: the 1k corpus is the first 1,000 pages of the 10k one,
and queries are shared by every size (targeted queries aim at the first 1,000 pages).
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GENERATOR_VERSION = 1
"""Bump when the generated text changes, so cached corpora are rebuilt."""


def _words(text: str) -> tuple[str, ...]:
    """The distinct words of ``text``, in order."""
    return tuple(dict.fromkeys(text.split()))


FUNCTION_WORDS = _words(
    "the of and to a in is that for it with as was on be at by this had not are but from or have "
    "an they which you were all we there been has when who will more no if out so what up its "
    "about into than them can only other new some could these may then do first any my now such "
    "our over after also did many before must through where much your way well down should "
    "because each just those how here while both between under again same another"
)

CONTENT_WORDS = _words(
    "user project meeting deadline budget server deploy release customer invoice report team "
    "design review plan issue ticket bug fix feature test build pipeline database query index "
    "cache memory agent model prompt token latency error warning log metric dashboard alert "
    "incident outage backup restore migration schema table column field page note summary "
    "decision reason option risk cost price quote supplier contract order shipment delivery "
    "warehouse stock inventory sale revenue margin forecast quarter month week day morning "
    "evening travel flight hotel booking trip visit call email message chat document draft "
    "version branch merge commit repository library package dependency upgrade security key "
    "password access role permission account profile preference setting config option default "
    "language english chinese spanish french german translation search result ranking score "
    "vector embedding keyword chunk heading section paragraph list item link reference source "
    "battery sensor valve pump controller firmware hardware board circuit voltage current power "
    "solar panel charger enclosure prototype sample measurement calibration drift reading water "
    "soil farm field crop harvest yield irrigation weather rain temperature humidity doctor "
    "appointment medicine allergy diet coffee tea lunch dinner recipe kitchen garden family "
    "birthday gift holiday vacation school course lesson exam homework teacher student client "
    "partner vendor manager engineer designer analyst director founder investor board goal "
    "milestone roadmap priority estimate scope requirement specification interface protocol "
    "format parser compiler runtime thread process queue worker scheduler timeout retry failure "
    "success status progress update change history archive backup storage disk network bandwidth "
    "router firewall proxy certificate domain website browser mobile app question answer idea "
    "problem solution approach experiment hypothesis result conclusion"
)

FIRST_NAMES = _words(
    "Lena Tomas Aiko Ravi Sofia Marek Nadia Omar Chen Priya Jonas Amara Diego Yuki Fatima Lukas "
    "Ines Kwame Mei Arjun Elena Pavel Zara Hugo Leila Sven Noor Mateo Hana Felix"
)
LAST_NAMES = _words(
    "Okafor Novak Tanaka Silva Weber Haddad Lindqvist Moreau Kowalski Mensah Rossi Costa Petrov "
    "Nakamura Alvarez Fischer Kaur Dubois Larsen Yilmaz Ahmed Schmidt Ivanova Banda"
)

N_PSEUDO = 3_800
N_RARE = 60_000
N_TOPICS = 600
ZIPF_S = 1.05
ZIPF_Q = 2.7
_ONSETS = _words("b c d f g h j k l m n p r s t v w z br cr dr fl gr kl pr st tr sh ch th")
_VOWELS = _words("a e i o u ai ea io ou")
_CODAS = _words("n r s t l m k nd rt st x")


@dataclass(frozen=True)
class Query:
    """A benchmark query; ``target`` is the page it was made from (None: a general query)."""

    text: str
    target: str | None


def _pseudo_words(rng: np.random.Generator, count: int, exclude: set[str]) -> list[str]:
    """``count`` distinct pronounceable pseudo-words (2-3 syllables), none in ``exclude``."""
    words: list[str] = []
    seen = set(exclude)
    while len(words) < count:
        syllables = int(rng.integers(2, 4))
        parts = []
        for _ in range(syllables):
            parts.append(_ONSETS[int(rng.integers(len(_ONSETS)))])
            parts.append(_VOWELS[int(rng.integers(len(_VOWELS)))])
        if rng.random() < 0.6:
            parts.append(_CODAS[int(rng.integers(len(_CODAS)))])
        word = "".join(parts)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class Corpus:
    """The vocabulary and the page/query generators of one seed."""

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed
        rng = np.random.default_rng([seed, 0xC0])
        known = set(FUNCTION_WORDS) | set(CONTENT_WORDS)
        pseudo = _pseudo_words(rng, N_PSEUDO + N_RARE, known)
        self.rare = pseudo[N_PSEUDO:]
        # Function words dominate the head, English content words come next, then the tail.
        self.vocab = np.array([*FUNCTION_WORDS, *CONTENT_WORDS, *pseudo[:N_PSEUDO]], dtype=object)
        ranks = np.arange(len(self.vocab), dtype=np.float64)
        weights = 1.0 / np.power(ranks + ZIPF_Q, ZIPF_S)
        self.cdf = np.cumsum(weights / weights.sum())
        # A topic is 8 words from the mid/low-frequency band (content words and pseudo-words).
        band = np.arange(len(FUNCTION_WORDS), len(self.vocab))
        self.topics = [
            [str(w) for w in self.vocab[rng.choice(band, 8, replace=False)]]
            for _ in range(N_TOPICS)
        ]
        self.names = [f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES]

    # ------------------------------------------------------------------ words

    def _zipf(self, rng: np.random.Generator, count: int) -> list[str]:
        picks = np.searchsorted(self.cdf, rng.random(count), side="right")
        picks = np.minimum(picks, len(self.vocab) - 1)
        return [str(w) for w in self.vocab[picks]]

    def _tokens(self, rng: np.random.Generator, count: int, topic: list[str],
                rare: list[str]) -> list[str]:
        words = self._zipf(rng, count)
        rolls = rng.random(count)
        for i, roll in enumerate(rolls):
            if roll < 0.10:
                words[i] = topic[int(rng.integers(len(topic)))]
            elif roll < 0.12:
                words[i] = rare[int(rng.integers(len(rare)))]
            elif roll < 0.14:
                words[i] = self.names[int(rng.integers(len(self.names)))]
            elif roll < 0.16:
                words[i] = _number(rng)
        return words

    def _sentence(self, rng: np.random.Generator, topic: list[str], rare: list[str],
                  low: int = 6, high: int = 17) -> str:
        words = self._tokens(rng, int(rng.integers(low, high)), topic, rare)
        text = " ".join(words)
        return text[:1].upper() + text[1:] + "."

    def _phrase(self, rng: np.random.Generator, topic: list[str], rare: list[str],
                low: int, high: int) -> str:
        text = " ".join(self._tokens(rng, int(rng.integers(low, high)), topic, rare))
        return text[:1].upper() + text[1:]

    # ------------------------------------------------------------------ pages

    def page_topic(self, index: int) -> tuple[list[str], list[str]]:
        """(topic words, rare words) of page ``index``."""
        rng = np.random.default_rng([self.seed, 1, index])
        topic = self.topics[int(rng.integers(N_TOPICS))]
        rare = [self.rare[int(rng.integers(N_RARE))] for _ in range(2)]
        return topic, rare

    def page(self, index: int) -> tuple[str, str, float]:
        """(filename, Markdown text, mtime) of page ``index``; 600-2500 bytes of UTF-8."""
        topic, rare = self.page_topic(index)
        rng = np.random.default_rng([self.seed, 2, index])
        title = self._phrase(rng, topic, rare, 3, 7)
        tag_count = int(rng.integers(1, 4))
        tags = sorted({topic[int(rng.integers(len(topic)))] for _ in range(tag_count)})
        created = dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
            seconds=int(rng.integers(0, 600 * 86400))
        )
        updated = created + dt.timedelta(seconds=int(rng.integers(0, 60 * 86400)))
        uid = uuid.UUID(bytes=rng.bytes(16), version=4)
        summary = self._sentence(rng, topic, rare, 10, 22)
        target = int(rng.integers(600, 2500))
        head = (
            "---\n"
            f"title: {title}\n"
            f"uuid: {uid}\n"
            f"created: '{_iso(created)}'\n"
            f"updated: '{_iso(updated)}'\n"
            f"summary: {summary}\n"
            f"tags: [{', '.join(tags)}]\n"
            "---\n"
            f"# {title}\n\n"
            f"{self._sentence(rng, topic, rare)} {self._sentence(rng, topic, rare)}\n"
        )
        sections: list[str] = []
        size = len(head.encode())
        for number in range(int(rng.integers(2, 5))):
            if number >= 2 and size > target:
                break
            parts = [f"\n## {self._phrase(rng, topic, rare, 2, 5)}\n"]
            for _ in range(int(rng.integers(1, 4))):
                sentences = [self._sentence(rng, topic, rare) for _ in range(rng.integers(1, 5))]
                parts.append("\n" + " ".join(sentences) + "\n")
            if rng.random() < 0.55:
                parts.append("\n")
                for _ in range(int(rng.integers(2, 6))):
                    parts.append(f"- {self._phrase(rng, topic, rare, 3, 11)}\n")
            section = "".join(parts)
            if size + len(section.encode()) > 2500 and number >= 2:
                break
            sections.append(section)
            size += len(section.encode())
        text = head + "".join(sections)
        while len(text.encode()) < 600:  # rare: very short draws
            text += "\n" + self._sentence(rng, topic, rare) + "\n"
        data = text.encode()
        if len(data) > 2500:  # cut at the last paragraph break that fits
            text = data[:2500].decode("utf-8", "ignore").rsplit("\n\n", 1)[0] + "\n"
        slug = "-".join(title.lower().split()[:5])
        slug = "".join(c if c.isalnum() else "-" for c in slug).strip("-")
        filename = f"{slug}-{index:06d}.md"
        return filename, text, updated.timestamp()

    def write_pages(self, folder: Path, count: int,
                    progress: Callable[[int], None] | None = None) -> int:
        """Write pages 0..count-1 into ``folder`` (mtime = their ``updated``); returns bytes."""
        folder.mkdir(parents=True, exist_ok=True)
        total = 0
        for index in range(count):
            name, text, mtime = self.page(index)
            path = folder / name
            data = text.encode()
            path.write_bytes(data)
            os.utime(path, (mtime, mtime))
            total += len(data)
            if progress and (index + 1) % 5000 == 0:
                progress(index + 1)
        return total

    # ------------------------------------------------------------------ queries

    def queries(self, count: int, targeted_pages: int = 1000) -> list[Query]:
        """``count`` queries of 3-8 words: half aimed at one page, half general Zipf draws."""
        rng = np.random.default_rng([self.seed, 3])
        out: list[Query] = []
        for number in range(count):
            length = int(rng.integers(3, 9))
            if number % 2 == 0:
                index = int(rng.integers(targeted_pages))
                topic, rare = self.page_topic(index)
                words = [rare[int(rng.integers(2))]]
                words += [topic[int(rng.integers(len(topic)))] for _ in range(min(2, length - 1))]
                words += self._zipf(rng, length - len(words))
                rng.shuffle(words)
                out.append(Query(" ".join(words), self.page(index)[0]))
            else:
                out.append(Query(" ".join(self._zipf(rng, length)), None))
        return out


def _number(rng: np.random.Generator) -> str:
    kind = rng.random()
    if kind < 0.4:
        return str(int(rng.integers(2, 100)))
    if kind < 0.6:
        return f"{rng.integers(1, 50)}.{rng.integers(0, 10)}"
    if kind < 0.8:
        return str(int(rng.integers(2019, 2027)))
    return f"INC-{rng.integers(1000, 99999)}"


def _iso(moment: dt.datetime) -> str:
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")
