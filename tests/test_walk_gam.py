"""Research over remembered sessions: the memorizer's page scaffolding, bold speaker labels,
questions without content words, and page dates (walk-through findings)."""

from __future__ import annotations

import json

import pytest

import deepfield
from deepfield.confidence import question_terms
from deepfield.context import build_context
from deepfield.errors import BudgetError, DeepfieldError
from deepfield.memorize import remember
from deepfield.research import research
from deepfield.research.excerpts import line_weight

NOTES = ("Ana: We should migrate the database to Postgres 16 next month.\n"
         "Ben: Agreed. Last week the MySQL replica fell behind by 3 hours.\n"
         "Ana: I will write the migration plan by Friday.\n"
         "Ben: I'll benchmark pgbouncer tomorrow.\n")


def test_the_memorizer_context_paragraph_is_no_speaker_and_no_evidence(
        field: deepfield.Field) -> None:
    filed = remember(field, "notes.txt", text=NOTES)
    body = (field.path / filed.filename).read_text(encoding="utf-8")
    assert "When: unknown. Who: Ana and Ben." in body
    result = research([field], "What did Ben benchmark?", record=False)
    assert result.evidence and all(not e.text.startswith("When:") for e in result.evidence)
    assert "Ben: I'll benchmark pgbouncer tomorrow." in [e.text for e in result.evidence]
    assert result.confidence.level != "none", result.confidence.reason
    assert "When" not in result.confidence.reason


MEETING = ("# Standup 2024-03-05\n\n"
           "**Ana:** The deploy pipeline broke yesterday because the Docker cache filled the"
           " disk.\n"
           "**Ben:** I cleaned it up and added a weekly prune job.\n"
           "**Ana:** Great. Carla starts on the frontend team next Monday.\n")


def test_bold_speaker_labels_are_turns_of_their_own(field: deepfield.Field) -> None:
    filed = remember(field, "meeting.md", text=MEETING)
    lines = (field.path / filed.filename).read_text(encoding="utf-8").splitlines()
    number = lines.index("**Ana:** Great. Carla starts on the frontend team next Monday.") + 1
    result = research([field], "Who is Carla and when does she start?", record=False)
    cited = [(e.line, e.text) for e in result.evidence if e.line == number]
    # One span for the turn, its speaker kept (it was cut into sentences, cited twice).
    assert cited == [(number, lines[number - 1])]


@pytest.mark.parametrize("question", ["the of and", "What is it?", "and"])
def test_a_question_of_stop_words_is_refused(field: deepfield.Field, question: str) -> None:
    remember(field, "notes.txt", text=NOTES)
    with pytest.raises(DeepfieldError, match="no word to search for") as refused:
        research([field], question, record=False)
    assert refused.value.hint
    # A task of stop words alone is built without research, not refused.
    built = build_context(field, "do it", level="deep", budget=400)
    assert built.research is None


GARDEN = ("Lena: Last Saturday I planted three apple trees in the garden.\n"
          "Lena: Next week I will prune the roses and dig the vegetable beds.\n")


def test_a_verb_that_opens_a_task_is_no_part_of_a_name(field: deepfield.Field) -> None:
    remember(field, "garden.txt", text=GARDEN)
    result = research([field], "Plan Lena's garden work", record=False)
    assert result.confidence.signals.entities == ("Lena",)
    assert "Plan Lena" not in result.confidence.reason  # was: no result mentions Plan Lena
    # A name that opens the question keeps its first word.
    assert question_terms("New York trip plans?")[0] == ["New York"]
    assert question_terms("Summarize what Lena did") == (["Lena"], [])


def test_an_undated_page_shows_no_filing_time_as_its_date(field: deepfield.Field) -> None:
    filed = remember(field, "notes.txt", text=NOTES)
    result = research([field], "What will Ben do tomorrow?", record=False)
    ours = [e for e in result.evidence if e.filename == filed.filename]
    assert ours and all(e.date is None for e in ours)
    assert f"[{field.name}/{filed.filename}] " in result.context  # no "· 2026-…T…Z"
    dated = remember(field, "garden.json", text=json.dumps({
        "date": "2023-07-03", "messages": [{"role": "user", "content": GARDEN}]}))
    found = research([field], "When did Lena plant the apple trees?", record=False)
    assert {e.date for e in found.evidence if e.filename == dated.filename} == {"2023-07-03"}


def test_link_text_is_not_what_a_line_says(field: deepfield.Field) -> None:
    field.write(name="kitchen.md", content="---\ntitle: Kitchen planning\ndate: 2024-05-04\n---\n"
                "# Kitchen planning\n\n- Ana: Yesterday we measured the kitchen.\n")
    field.write(name="lisbon.md", content="---\ntitle: Lisbon flights\n---\n# Lisbon flights\n\n"
                "Ana booked the flights to Lisbon. Related: [When we measured the kitchen]"
                "(kitchen.md).\n")
    result = research([field], "When was the kitchen measured?", record=False)
    best = max(result.evidence, key=lambda e: e.score)
    assert best.filename == "kitchen.md", [(e.filename, e.score) for e in result.evidence]
    assert line_weight("see [Kitchen planning](kitchen.md)", {"kitchen"}, []) == 0.0


def test_a_huge_session_on_one_line_is_quoted_by_windows_around_its_matches(
        field: deepfield.Field) -> None:
    filler = " ".join(f"word{i % 97} pump pressure" for i in range(600))
    remember(field, "huge.txt", text=f"Ana: {filler} The secret code is ZEBRA-42.\n")
    result = research([field], "What is the secret code?", record=False)  # default budget
    quote = next(e for e in result.evidence if e.text.endswith("The secret code is ZEBRA-42."))
    assert len(quote.text) < 400, quote.text
    page = (field.path / quote.filename).read_text(encoding="utf-8").splitlines()
    assert quote.text in page[quote.line - 1]  # verbatim


def test_a_budget_too_small_for_the_best_line_names_the_budget_that_fits(
        field: deepfield.Field) -> None:
    sentence = " ".join(["the valve gasket held at ninety degrees"] * 12) + "."
    field.write(name="gasket.md", content=f"# Gasket\n\n{sentence}\n")
    with pytest.raises(BudgetError) as refused:
        research([field], "valve gasket degrees", budget=60, record=False)
    least = int(refused.value.hint.split("to ")[1].split()[0])
    assert 60 < least <= 200, refused.value.hint
    assert research([field], "valve gasket degrees", budget=least, record=False).evidence


def test_a_prose_chunk_is_one_hit_at_its_line_that_says_the_query(
        field: deepfield.Field) -> None:
    field.add("P", "Intro line.\n\nSecond paragraph mentions tapir here.\n")
    for mode in ("bm25", "hybrid"):
        hits = field.search("tapir", unit="chunk", mode=mode).results
        assert [h.snippet for h in hits] == ["Second paragraph mentions tapir here."], mode


def test_spans_that_share_a_line_keep_page_order(field: deepfield.Field) -> None:
    field.add("Heat test", "We met on Monday and talked about the new lab at some length.\n"
              "Nothing else came up. The gasket failed at ninety degrees during the heat\n"
              "test last week.\n")
    result = research([field], "When did the gasket fail in the heat test?", record=False)
    texts = [e.text for e in result.evidence if e.filename == "heat-test.md"]
    assert texts.index("Nothing else came up.") < texts.index(
        "The gasket failed at ninety degrees during the heat test last week."), texts
