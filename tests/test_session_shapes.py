"""Sessions in shapes the memorizer first misread: other scripts, chat exports, plain notes."""

from __future__ import annotations

import json

import pytest

import deepfield
from deepfield.memorize import remember
from deepfield.page import Page
from deepfield.sessions import parse_session

CHINESE = "小明: 昨天我在北京修好了热水器，花了三百元。\n小红：太好了！下周一我们去上海开会。\n" \
          "小明: 好的，我会准备演示文稿。\n"
STAMPED = "[10:02] Ana: I booked the flights to Lisbon yesterday.\n" \
          "[10:03] Ben: Great, the hotel is the Memmo Alfama.\n(10:05) Ana: We fly on 12 June.\n"
NOTE = """# Notes from the garage visit

The mechanic said the brake pads on the Volvo are worn down to
three millimetres and must be replaced before the winter. He also
noticed that the timing belt was changed in 2019, so it is due
again next year.

| Part | Cost |
|---|---|
| Brake pads | 180 EUR |
| Timing belt | 650 EUR |

```
# not a title
```
"""


@pytest.mark.parametrize(("text", "speakers", "said"), [
    (CHINESE, ["小明", "小红"], "昨天我在北京修好了热水器"),
    (STAMPED, ["Ana", "Ben"], "Ana: I booked the flights to Lisbon yesterday."),
], ids=["chinese", "stamped"])
def test_speakers_in_other_scripts_and_after_time_stamps_are_found(
        keyword_store: deepfield.Store, text: str, speakers: list[str], said: str) -> None:
    assert parse_session(text).participants == speakers
    field = keyword_store.create_field("n")
    done = remember(field, "chat.txt", text=text)
    page = Page.parse((field.path / done.filename).read_text())
    assert page.get("participants") == speakers
    assert said in done.memo and "Someone" not in done.memo and "[10:" not in done.memo
    assert done.title != "Session" and done.memo.startswith(" and ".join(speakers) + " talked")
    assert done.filename != "and.md"  # names slugify drops leave a neutral name


def test_a_url_is_no_speaker() -> None:
    assert parse_session("see https://example.org/x for the plan\n").participants == []


def test_a_note_is_summed_up_by_its_prose_under_its_own_heading(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("n")
    done = remember(field, "garage.md", text=NOTE)
    assert done.title == "Notes from the garage visit"
    assert "talked" not in done.memo and "|" not in done.memo and "Part" not in done.memo
    assert "The mechanic said the brake pads on the Volvo are worn down" in done.memo
    page = Page.parse((field.path / done.filename).read_text())
    assert "|" not in str(page.get("summary")) and "Cost" not in str(page.get("topic"))


def test_a_transcript_keeps_its_own_title_over_its_heading(
        keyword_store: deepfield.Store) -> None:
    text = "# Stand-up\n\nAna: The Docker cache filled the disk in Berlin.\nBen: I pruned it.\n"
    done = remember(keyword_store.create_field("n"), "s.md", text=text)
    assert done.title.startswith("Ana and Ben: ")


def test_a_chat_of_lower_case_roles_is_a_conversation() -> None:
    session = parse_session("user: the plot 3 pump rattles again\nassistant: noted\n")
    assert session.participants == ["user", "assistant"]


def test_tool_calls_are_kept_and_tools_are_no_participants(
        keyword_store: deepfield.Store) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "My cat Mochi needs her rabies vaccine on 2025-02-10."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "add_event", "arguments": "{\"date\":\"2025-02-10\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "add_event", "content": "event created"},
        {"role": "assistant", "content": "Added Mochi's rabies vaccine for 10 February."},
    ]
    text = "\n".join(json.dumps(m) for m in messages) + "\n"
    field = keyword_store.create_field("n")
    done = remember(field, "chat.jsonl", text=text, format="jsonl")
    body = Page.parse((field.path / done.filename).read_text()).body
    assert 'assistant: [call add_event {"date": "2025-02-10"}]\n' in body
    assert "tool: event created\n" in body
    page = Page.parse((field.path / done.filename).read_text())
    assert page.get("participants") == ["user", "assistant"]
    assert "[call" not in done.memo and "event created" not in done.memo


def test_a_note_of_a_table_alone_still_gets_a_memo() -> None:
    from deepfield.memo import extractive_memo

    memo = extractive_memo(parse_session("| Part | Cost |\n|---|---|\n| Brake pads | 180 EUR |\n"))
    assert "Brake pads: 180 EUR" in memo and "|" not in memo
