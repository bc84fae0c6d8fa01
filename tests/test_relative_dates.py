"""Relative dates ("yesterday", "last Saturday") resolved against a page's day: the rules, and
research showing them beside the verbatim line, counted in its budget."""

from __future__ import annotations

import datetime as dt

import pytest

import deepfield
from deepfield.memorize import remember
from deepfield.relative_dates import parse_day, resolve
from deepfield.research import research
from deepfield.tokens import count_tokens

from .conftest import Cli

MONDAY = dt.date(2023, 7, 3)


@pytest.mark.parametrize(("text", "meanings"), [
    ("I signed up for a pottery class yesterday.", ["2 July 2023"]),
    ("Last night we talked.", ["2 July 2023"]),
    ("the day before yesterday", ["1 July 2023"]),
    ("See you tomorrow!", ["4 July 2023"]),
    ("3 days ago", ["30 June 2023"]),
    ("A couple of days ago", ["1 July 2023"]),
    ("Last week I went to a parade.", ["the week before 3 July 2023"]),
    ("a week ago", ["the week before 3 July 2023"]),
    ("two weekends ago we camped", ["two weekends before 3 July 2023"]),
    ("this past weekend", ["the weekend before 3 July 2023"]),
    ("next week", ["the week after 3 July 2023"]),
    # Said on a Monday: last Saturday is two days back, last Monday a week back.
    ("last Saturday and next Friday", ["1 July 2023", "7 July 2023"]),
    ("last Monday", ["26 June 2023"]),
    ("last month", ["June 2023"]), ("a couple of months ago", ["May 2023"]),
    ("next month", ["August 2023"]),
    ("I read it last year.", ["2022"]), ("10 years ago", ["2013"]),
    # Vague, or needing more than the day: left alone, not guessed.
    ("on Friday", []), ("a few days ago", []), ("recently", []), ("the other day", []),
    ("over 100 years ago", []),
])
def test_what_a_relative_date_means_on_the_day(text: str, meanings: list[str]) -> None:
    assert [r.meaning for r in resolve(text, MONDAY)] == meanings


def test_months_keep_a_valid_day() -> None:
    assert [r.meaning for r in resolve("last month", dt.date(2024, 3, 31))] == ["February 2024"]
    assert [r.meaning for r in resolve("next month", dt.date(2023, 12, 15))] == ["January 2024"]


@pytest.mark.parametrize(("value", "day"), [
    ("2023-07-03", MONDAY), ("2023-07-03T13:36:00Z", MONDAY), ("1:36 pm on 3 July, 2023", MONDAY),
    ("3 July 2023", MONDAY), ("July 3rd, 2023", MONDAY), ("03/07/2023", MONDAY),
    (MONDAY, MONDAY), (dt.datetime(2023, 7, 3, 9), MONDAY),
    ("sometime in July", None), ("2023-02-30", None), ("", None), (None, None), (20230703, None),
])
def test_the_day_a_date_value_names(value: object, day: dt.date | None) -> None:
    assert parse_day(value) == day


SESSION = ("---\ndate: 1:36 pm on 3 July, 2023\n---\n"
           "Melanie: I just signed up for a pottery class yesterday. It is like therapy.\n"
           "Caroline: Last week I went to the pride parade downtown.\n"
           "Melanie: My kids loved the museum.\n")


@pytest.fixture
def session_field(keyword_store: deepfield.Store) -> deepfield.Field:
    field = keyword_store.create_field("chats")
    remember(field, "chat.md", text=SESSION)
    return field


def test_research_shows_what_yesterday_meant(session_field: deepfield.Field) -> None:
    result = research(session_field, "when did Melanie sign up for the pottery class?",
                      budget=300, record=False)
    line = next(x for x in result.context.splitlines() if "pottery class yesterday" in x)
    assert line.endswith("yesterday. It is like therapy. [yesterday = 2 July 2023]")
    item = next(e for e in result.evidence if e.text.startswith("Melanie: I just signed"))
    assert item.text.endswith("therapy.")  # the evidence itself stays verbatim
    assert item.to_json()["relative_dates"] == [{"phrase": "yesterday", "date": "2 July 2023"}]
    assert result.tokens == count_tokens(result.context) <= 300
    parade = next(e for e in result.evidence if "parade" in e.text)
    assert parade.to_json()["relative_dates"] == [
        {"phrase": "Last week", "date": "the week before 3 July 2023"}]


def test_the_budget_counts_the_resolved_dates(session_field: deepfield.Field) -> None:
    question = "when did Melanie sign up for the pottery class?"
    for budget in (60, 80, 120):
        result = research(session_field, question, budget=budget, record=False)
        assert count_tokens(result.context) == result.tokens <= budget


def test_a_page_without_an_event_date_resolves_nothing(
        keyword_store: deepfield.Store) -> None:
    # Written today, edited who knows when: "yesterday" is not pinned to its created date.
    field = keyword_store.create_field("notes")
    field.add("Pump log", "The pump failed yesterday after the storm.")
    result = research(field, "when did the pump fail?", budget=200, record=False)
    assert "pump failed yesterday" in result.context and " = " not in result.context
    assert all(e.to_json()["relative_dates"] == [] for e in result.evidence)


def test_a_page_date_of_any_form_anchors_its_lines(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("notes")
    field.add("Site visit", "We poured the slab last Saturday.",
              frontmatter={"date": "2026-05-04"})
    result = research(field, "when was the slab poured?", budget=200, record=False)
    assert "[last Saturday = 2 May 2026]" in result.context


def test_cli_research_shows_the_resolved_dates(cli: Cli) -> None:
    with deepfield.open(cli.store_path) as store:
        remember(store.create_field("chats"), "chat.md", text=SESSION)
    question = "when did Melanie sign up for pottery?"
    shown = cli("research", question, "-f", "chats", "--budget", "300")
    assert shown.exit_code == 0 and "[yesterday = 2 July 2023]" in shown.stdout
    payload = cli.json("research", question, "-f", "chats", "--budget", "300")
    dated = [e for e in payload["evidence"] if e["text"].startswith("Melanie: I just")]
    assert dated[0]["relative_dates"] == [{"phrase": "yesterday", "date": "2 July 2023"}]


def test_search_hits_carry_the_resolved_dates(session_field: deepfield.Field,
                                              cli: Cli) -> None:
    hit = session_field.search("pottery class", mode="bm25", unit="chunk").results[0]
    assert "yesterday" in hit.snippet
    assert {"phrase": "yesterday", "date": "2 July 2023"} in hit.to_json()["relative_dates"]
    with deepfield.open(cli.store_path) as store:
        remember(store.create_field("chats"), "chat.md", text=SESSION)
    shown = cli("search", "pottery class yesterday", "-f", "chats", "--mode", "bm25")
    assert shown.exit_code == 0 and "[yesterday = 2 July 2023" in shown.stdout
    payload = cli.json("search", "pottery class yesterday", "-f", "chats", "--mode", "bm25")
    assert any(r["relative_dates"] for r in payload["results"])
