"""LoCoMo questions, validated: what is scored, what is skipped and why, what was repaired.

Every question of the file ends up either scored or in ``Dataset.skipped`` under a reason, so
``n`` never changes silently. A data file that is missing, is not JSON or does not have
LoCoMo's layout raises :class:`EvalDataError` with a one-line message.

Evidence ids are repaired where the intent is unambiguous (README of the data): ``'D8:6; D9:17'``
and ``'D9:1 D4:4'`` are split, ``'D:11:26'`` and ``'D30:05'`` normalised; a bare ``'D'``, a
malformed id, a duplicate and an id that names no turn of the conversation are dropped. Each
repair is counted in ``Dataset.repairs``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""The dataset's own ids (its evaluation code), not the paper's order."""
ADVERSARIAL = 5
SPLIT_NAME = "LoCoMo dev (conv-26, -30, -41, -42, -43)"

_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


class EvalDataError(Exception):
    """The data file cannot be evaluated; the message is one line saying why and what to do."""


@dataclass(frozen=True)
class Question:
    conversation: str
    index: int
    """Position in the conversation's ``qa`` list (stable id with the conversation)."""
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]
    """Gold dialogue ids (``D1:3``), repaired, each a turn of the conversation."""

    @property
    def label(self) -> str:
        return CATEGORIES.get(self.category, "adversarial")

    @property
    def sessions(self) -> tuple[int, ...]:
        return tuple(sorted({session_of(t) for t in self.evidence}))


@dataclass
class Conversation:
    name: str
    turns: dict[str, dict[str, Any]]
    """dialogue id -> the dataset's turn (speaker, text, blip_caption …)."""
    sessions: dict[int, str]
    """session number -> its date and time as the dataset writes it (sessions with turns)."""


@dataclass
class Dataset:
    path: Path
    conversations: dict[str, Conversation]
    questions: list[Question]
    """Scored: categories 1-4 with at least one valid evidence id."""
    adversarial: list[Question] = field(default_factory=list)
    """Category 5 (unanswerable by design): skipped by the recall tables, kept for metrics
    about abstaining (e.g. how often a "none" confidence fires on them)."""
    skipped: Counter[str] = field(default_factory=Counter)
    repairs: Counter[str] = field(default_factory=Counter)

    def describe(self) -> str:
        """One sentence: what was scored, what was skipped and repaired (for every table)."""
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        repaired = ", ".join(f"{n} {why}" for why, n in sorted(self.repairs.items()))
        return (f"{len(self.questions)} questions scored from {len(self.conversations)} "
                f"conversations of `{self.path.name}`"
                + (f"; skipped: {skipped}" if skipped else "")
                + (f"; evidence ids repaired: {repaired}" if repaired else ""))


def session_of(turn: str) -> int:
    return int(turn[1:].split(":", 1)[0])


def parse_evidence(raw: object, known: set[str], repairs: Counter[str]) -> list[str]:
    """Valid gold ids of one question, in order (see the module docstring)."""
    if not isinstance(raw, list):
        if raw is not None:
            repairs["evidence not a list, dropped"] += 1
        return []
    ids: list[str] = []
    for entry in raw:
        parts = [p for p in re.split(r"[;,\s]+", str(entry).strip()) if p]
        if len(parts) > 1:
            repairs["entries holding several ids split"] += 1
        for part in parts:
            match = _ID.fullmatch(part)
            if match is None:
                repairs["malformed ids dropped"] += 1
                continue
            turn = f"D{int(match.group(1))}:{int(match.group(2))}"
            if turn != part:
                repairs["ids normalised"] += 1
            if turn not in known:
                repairs["ids of no turn dropped"] += 1
            elif turn in ids:
                repairs["duplicate ids dropped"] += 1
            else:
                ids.append(turn)
    return ids


def _conversation(sample: dict[str, Any], path: Path, position: int) -> Conversation:
    conv = sample.get("conversation")
    name = sample.get("sample_id")
    if not isinstance(conv, dict) or not isinstance(name, str) or not name:
        raise EvalDataError(f"{path}: conversation #{position + 1} has no 'sample_id' or "
                            "'conversation' mapping; expected the locomo10.json layout")
    turns: dict[str, dict[str, Any]] = {}
    sessions: dict[int, str] = {}
    for key, value in conv.items():
        match = _SESSION_KEY.fullmatch(key)
        if match is None or not isinstance(value, list) or not value:
            continue
        sessions[int(match.group(1))] = str(conv.get(f"{key}_date_time") or "")
        for turn in value:
            if isinstance(turn, dict) and isinstance(turn.get("dia_id"), str):
                turns[turn["dia_id"]] = turn
    return Conversation(name, turns, dict(sorted(sessions.items())))


def load(path: Path, only: list[str] | None = None) -> Dataset:
    """The questions of ``path`` (``only``: these conversations), validated."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvalDataError(f"LoCoMo data file not found: {path} (pass --data PATH)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalDataError(f"cannot read LoCoMo data file {path}: {exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise EvalDataError(f"{path} is not JSON ({exc}); expected LoCoMo's "
                            "locomo10.json layout") from None
    if not isinstance(data, list) or not data:
        raise EvalDataError(f"{path} is not a list of conversations (locomo10.json layout)")
    dataset = Dataset(path, {}, [])
    for position, sample in enumerate(data):
        if not isinstance(sample, dict):
            raise EvalDataError(f"{path}: item #{position + 1} is not a conversation object")
        conversation = _conversation(sample, path, position)
        if only and conversation.name not in only:
            continue
        if conversation.name in dataset.conversations:
            raise EvalDataError(f"{path}: conversation {conversation.name} appears twice")
        dataset.conversations[conversation.name] = conversation
        qa = sample.get("qa")
        if not isinstance(qa, list):
            raise EvalDataError(f"{path}: conversation {conversation.name} has no 'qa' list")
        for index, item in enumerate(qa):
            _add_question(dataset, conversation, index, item)
    if only:
        missing = sorted(set(only) - set(dataset.conversations))
        if missing:
            raise EvalDataError(f"{path} has no conversation {', '.join(missing)}")
    return dataset


def _add_question(dataset: Dataset, conversation: Conversation, index: int,
                  item: object) -> None:
    if not isinstance(item, dict) or not isinstance(item.get("question"), str) \
            or not item["question"].strip():
        dataset.skipped["without a question text"] += 1
        return
    category = item.get("category")
    if isinstance(category, bool) or (category != ADVERSARIAL and category not in CATEGORIES):
        dataset.skipped["of an unknown category"] += 1
        return
    answer = item.get("answer", item.get("adversarial_answer", ""))
    gold = parse_evidence(item.get("evidence"), set(conversation.turns), dataset.repairs)
    question = Question(conversation.name, index, " ".join(item["question"].split()),
                        str(answer), int(category), tuple(gold))
    if category == ADVERSARIAL:
        dataset.skipped["adversarial (category 5)"] += 1
        dataset.adversarial.append(question)
    elif not item.get("evidence"):
        dataset.skipped["without evidence"] += 1
    elif not gold:
        dataset.skipped["without a valid evidence id"] += 1
    else:
        dataset.questions.append(question)
