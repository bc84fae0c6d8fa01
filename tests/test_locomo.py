"""The LoCoMo importer on a real slice of the dev split, and a retrieval sanity check."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import deepfield
from deepfield.importers.locomo import import_locomo, iter_sessions, parse_when, turn_line

from .conftest import LOCOMO

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo dev split not present")


@pytest.fixture(scope="module")
def conv26(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sample = json.loads(LOCOMO.read_text())[0]
    sample["conversation"] = {
        k: v for k, v in sample["conversation"].items()
        if not (m := re.match(r"session_(\d+)", k)) or int(m.group(1)) <= 6
    } | {"session_20_date_time": "4:10 pm on 26 October, 2023"}  # a date with no turns
    path = tmp_path_factory.mktemp("locomo") / "slice.json"
    path.write_text(json.dumps([sample]))
    return path


def test_import_layout_and_idempotence(store: deepfield.Store, conv26: Path) -> None:
    report = import_locomo(store, conv26)
    assert report.fields == ["conv-26"] and report.pages_written == 6
    field = store.field("conv-26")
    page = (field.path / "session-01.md").read_text()
    assert "# Session 1 — 1:56 pm on 8 May, 2023" in page
    assert "Speakers: Caroline, Melanie." in page
    assert "Caroline (D1:3): I went to a LGBTQ support group yesterday" in page
    assert "[image: a photo of a dog walking past a wall" in page
    assert "created: '2023-05-08T13:56:00'" in page
    again = import_locomo(store, conv26)
    assert again.pages_written == 0 and again.pages_unchanged == 6


def test_evidence_turns_are_found(store: deepfield.Store, conv26: Path) -> None:
    import_locomo(store, conv26)
    field = store.field("conv-26")
    field.index()
    qa = [q for q in json.loads(LOCOMO.read_text())[0]["qa"] if q["category"] == 4]
    found = total = 0
    for question in qa:
        gold = {e for e in question["evidence"] if re.fullmatch(r"D[1-6]:\d+", e)}
        if not gold:
            continue
        hits = field.search(question["question"], k=10, unit="chunk", mode="bm25").results
        returned = {m for h in hits for m in re.findall(r"\((D\d+:\d+)\)", h.text)}
        found += len(gold & returned)
        total += len(gold)
    assert total >= 10 and found / total >= 0.5


def test_date_parsing_and_lines() -> None:
    assert parse_when("10:37 am on 27 June, 2023") == "2023-06-27T10:37:00"
    assert parse_when("sometime") is None
    line = turn_line({"speaker": "A", "dia_id": "D1:1", "text": " hi\nthere "})
    assert line == "A (D1:1): hi there"
    sessions = list(iter_sessions({"sample_id": "x", "conversation": {"session_2": [],
                                                                      "session_1": [{}]}}))
    assert [s.number for s in sessions] == [1, 2]


def test_import_never_replaces_a_users_page_or_edit(store: deepfield.Store,
                                                    conv26: Path) -> None:
    """A page of the user's under a session's name is kept (the session takes a free name),
    and a session page edited since its import keeps the edit on the next import."""
    field = store.create_field("conv-26")
    mine = field.path / "session-01.md"
    mine.write_text("---\ntitle: my notes\n---\nIMPORTANT USER DATA\n")
    report = import_locomo(store, conv26)
    assert mine.read_text() == "---\ntitle: my notes\n---\nIMPORTANT USER DATA\n"
    assert "Caroline (D1:3)" in (field.path / "session-01-2.md").read_text()
    assert any("session-01.md is another page" in w for w in report.warnings)
    edited = field.path / "session-02.md"
    edited.write_text(edited.read_text() + "\nMY NOTE\n")
    again = import_locomo(store, conv26)
    assert edited.read_text().endswith("MY NOTE\n")
    assert any("session-02.md was edited" in w for w in again.warnings)
    assert again.pages_written == 0 and mine.read_text().endswith("IMPORTANT USER DATA\n")
