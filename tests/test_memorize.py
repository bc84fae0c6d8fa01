"""The memorizer and session formats, on real LoCoMo data and scripted model replies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import deepfield
from deepfield.errors import LLMServiceError, SessionFormatError, UnknownFieldError
from deepfield.llm import OpenAIChat
from deepfield.memorize import remember
from deepfield.page import Page
from deepfield.sessions import load_session, parse_session

from .conftest import LOCOMO, Cli, run_deepfield
from .fake_openai import CHAT, FakeOpenAIServer, chat_completion

needs_locomo = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo dev split not present")


def _pages(folder: Path) -> list[str]:
    """Page files (listing.md is derived and may appear on any sync)."""
    return sorted(p.name for p in folder.glob("*.md") if p.name != "listing.md")


def _conversation() -> dict[str, object]:
    sample = json.loads(LOCOMO.read_text())[0]
    return {"conversation": sample["conversation"]}


def test_session_formats(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "We moved the launch to 4 May."},
                {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]}]
    plain = parse_session(json.dumps(messages))
    assert plain.format == "openai" and plain.participants == ["user", "assistant"]
    assert plain.turns[1].text == "Noted."
    wrapped = parse_session(json.dumps({"messages": messages, "date": "2026-05-01",
                                        "project": "Apollo"}))
    assert (wrapped.date, wrapped.project) == ("2026-05-01", "Apollo")
    lines = tmp_path / "chat.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in messages) + "\n\n", encoding="utf-8")
    assert len(load_session(lines).turns) == 2
    transcript = tmp_path / "notes.md"
    transcript.write_text("---\ndate: 2026-03-02\n---\n# Standup\n\nAna: Shipping the parser.\n"
                          "It handles tables now.\nBo: Great, I review it today.\n",
                          encoding="utf-8")
    session = load_session(transcript)
    assert [t.speaker for t in session.turns] == ["Ana", "Bo"]
    assert session.raw is not None and "It handles tables now." in session.transcript()
    assert session.date == "2026-03-02"
    turns = [{"speaker": "Jo", "dia_id": "D1:1", "text": "Hi", "blip_caption": "a dog"}]
    locomo = parse_session(json.dumps(turns))
    assert locomo.transcript() == "Jo (D1:1): Hi [image: a dog]\n"


@pytest.mark.parametrize(("text", "message"), [
    ("", "is empty"),
    ("   \n", "is empty"),
    ("[1, 2]", "expected OpenAI-style messages"),
    ('{"messages": []}', "no list of messages"),
    ('[{"role": "user", "content": ""}]', "no messages with text"),
    ('{"a": 1}\nnot json\n', "line 2 is not JSON"),
])
def test_bad_sessions(text: str, message: str) -> None:
    with pytest.raises(SessionFormatError, match=message):
        parse_session(text, format="jsonl" if "not json" in text else "auto")


@pytest.mark.parametrize("text", ["null", "42", "true", '"just a string"'])
def test_a_json_file_without_messages_is_refused(text: str) -> None:
    """A .json session is JSON whatever it starts with: "null" is not a one-line transcript."""
    with pytest.raises(SessionFormatError, match="no list of messages"):
        parse_session(text, source="s.json")


@needs_locomo
def test_locomo_conversation_needs_a_session_number() -> None:
    text = json.dumps(_conversation())
    with pytest.raises(SessionFormatError, match="choose one with --session"):
        parse_session(text)
    session = parse_session(text, session=1)
    assert session.turns[0].turn_id == "D1:1" and session.date == "2023-05-08T13:56:00"


@needs_locomo
def test_offline_remember_writes_memo_header_and_raw_session(field: deepfield.Field) -> None:
    text = json.dumps(_conversation())
    result = remember(field, "conv-26.json", text=text, session=1)
    assert result.action == "created" and result.memo_by == "extractive"
    assert result.usage.calls == 0
    page = Page.parse((field.path / result.filename).read_text(encoding="utf-8"))
    fm = page.frontmatter or {}
    assert fm["summary"] == result.memo and fm["kind"] == "session"
    assert fm["participants"] == ["Caroline", "Melanie"]
    assert fm["session_date"] == "1:56 pm on 8 May, 2023"
    assert result.filename.startswith("2023-05-08-")
    # The memo keeps who, when and facts from the session in its own words.
    assert "Caroline" in result.memo and "8 May, 2023" in result.memo
    assert "support group" in result.memo
    # The raw session is the body, verbatim, under the context header.
    assert "When: 1:56 pm on 8 May, 2023. Who: Caroline and Melanie." in page.body
    original = _conversation()["conversation"]["session_1"]  # type: ignore[index]
    assert f"Caroline (D1:3): {original[2]['text']}" in page.body
    # The listing (GAM's light memory) has the memo; the memo is searchable.
    assert result.memo[:40] in (field.path / "listing.md").read_text(encoding="utf-8")
    hits = field.search("LGBTQ support group", mode="bm25").results
    assert hits[0].filename == result.filename
    again = remember(field, "conv-26.json", text=text, session=1)
    assert again.action == "unchanged" and again.filename == result.filename
    assert len(list(field.path.glob("2023-05-08-*.md"))) == 1
    second = remember(field, "conv-26.json", text=text, session=2)
    assert result.filename in second.related  # an earlier page about the same people


def test_the_context_paragraph_is_never_a_snippet(field: deepfield.Field) -> None:
    """The "When: …. Who: …. Topic: …." paragraph repeats the frontmatter: as a chunk of its
    own it came back as the page's snippet for a search of the topic."""
    text = ("Ana: We picked the green tiles for the kitchen.\n"
            "Ben: Great, the kitchen will look fresh.\n")
    result = remember(field, "chat.txt", text=text, topic="Kitchen")
    _, page = field.load(result.filename)
    assert "When: unknown. Who: Ana and Ben. Topic: Kitchen." in page.body
    for hit in field.search("kitchen", mode="bm25").results:
        assert not hit.snippet.startswith("When:")
    chunks = field.search("kitchen", mode="bm25", unit="chunk").results
    assert chunks and not any("Who: Ana" in h.snippet for h in chunks)


def test_long_session_is_split_and_nothing_lost(field: deepfield.Field) -> None:
    turns = [{"role": "user" if i % 2 else "assistant",
              "content": f"Step {i}: measured the pump at {i * 7} litres per minute."}
             for i in range(300)]
    result = remember(field, "big.json", text=json.dumps(turns))
    assert len(result.filenames) > 1
    body = "".join((field.path / name).read_text(encoding="utf-8")
                   for name in result.filenames)
    assert "Step 299: measured the pump at 2093 litres per minute." in body


def _chat(server: FakeOpenAIServer) -> OpenAIChat:
    return OpenAIChat(url=server.url, model="writer", sleep=lambda _s: None, max_retries=0)


def test_remember_with_a_model_makes_one_call(field: deepfield.Field,
                                              openai_server: FakeOpenAIServer) -> None:
    field.add("Pump calibration plan", "We plan to calibrate pump P3 in March.",
              summary="Plan: calibrate pump P3 in March with Ana.")
    reply = {"memo": "On 2 March 2026 Ana calibrated pump P3 (the March plan) to 42 l/min.",
             "title": "Pump P3 calibrated", "topic": "pump calibration", "project": "Delta",
             "replaces": ["pump-calibration-plan.md", "invented.md"]}
    openai_server.enqueue(CHAT, json=chat_completion(
        "<think>ok</think>```json\n" + json.dumps(reply) + "\n```"))
    session = {"date": "2026-03-02", "messages": [
        {"role": "user", "name": "Ana", "content": "I calibrated pump P3 today: 42 l/min."},
        {"role": "assistant", "content": "Great, that completes the calibration plan."}]}
    result = remember(field, "s.json", text=json.dumps(session), llm=_chat(openai_server))
    assert result.usage.calls == 1 and result.memo_by == "llm:writer"
    assert result.memo == reply["memo"] and result.title == "Pump P3 calibrated"
    prompt = openai_server.requests_to(CHAT)[0].json["messages"][1]["content"]
    assert "calibrate pump P3 in March with Ana" in prompt  # earlier memos, for references
    shape = openai_server.requests_to(CHAT)[0].json["response_format"]  # the memo's schema
    assert shape["type"] == "json_schema" and shape["json_schema"]["name"] == "session_memo"
    assert set(shape["json_schema"]["schema"]["required"]) == set(reply)
    assert "42 l/min" in prompt
    fm = Page.parse((field.path / result.filename).read_text(encoding="utf-8")).frontmatter
    assert fm is not None and fm["project"] == "Delta" and fm["memo_by"] == "llm:writer"
    # The proposed supersession is queued for a person, not applied (invented names dropped).
    assert len(result.proposals) == 1 and fm["review"] == "pending"
    old = Page.parse((field.path / "pump-calibration-plan.md").read_text(encoding="utf-8"))
    assert "superseded_by" not in (old.frontmatter or {})
    queue = (field.path / "review" / "queue.jsonl").read_text(encoding="utf-8")
    assert "pump-calibration-plan.md" in queue and "invented" not in queue


def test_unusable_model_reply_falls_back_without_a_second_call(
        field: deepfield.Field, openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, json=chat_completion("{broken"))
    session = json.dumps([{"role": "user", "content": "The boiler failed on 3 June again."}])
    result = remember(field, "s.json", text=session, llm=_chat(openai_server))
    assert result.memo_by == "extractive" and result.usage.calls == 1
    assert "extractive memo used" in result.warnings[0]
    assert "boiler failed" in result.memo


def test_model_failure_leaves_no_page(field: deepfield.Field,
                                      openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, status=500)
    before = _pages(field.path)
    with pytest.raises(LLMServiceError, match="writer"):
        remember(field, "s.json", text='[{"role": "user", "content": "hello there all"}]',
                 llm=_chat(openai_server))
    assert _pages(field.path) == before


def test_cli_remember(cli: Cli, tmp_path: Path) -> None:
    cli("new", "work")
    session = tmp_path / "s.jsonl"
    session.write_text('{"role": "user", "content": "Ship the MCP server on Friday."}\n',
                       encoding="utf-8")
    data = cli.json("remember", "work", str(session))
    assert data["action"] == "created" and data["memo_by"] == "extractive"
    again = cli.json("remember", "work", "-", input=session.read_bytes())
    assert again["action"] == "unchanged"
    empty = tmp_path / "empty.json"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(SessionFormatError, match="is empty"):
        cli("remember", "work", str(empty))
    with pytest.raises(UnknownFieldError):
        cli("remember", "nope", str(session))


def test_cli_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    store = tmp_path / "store"
    deepfield.init(store, deepfield.EmbeddingConfig("none"))
    (store / "work").mkdir()
    empty = tmp_path / "empty.json"
    empty.write_text("", encoding="utf-8")
    run = run_deepfield("--store", str(store), "remember", "work", str(empty))
    assert run.returncode == 1 and b"Traceback" not in run.stderr
    assert run.stderr.decode().count("\n") == 1 and "is empty" in run.stderr.decode()
    dead = {"DEEPFIELD_LLM_URL": "http://127.0.0.1:9/v1", "DEEPFIELD_LLM_MODEL": "tiny",
            "DEEPFIELD_LLM_MAX_RETRIES": "0"}
    session = tmp_path / "s.json"
    session.write_text('[{"role": "user", "content": "Ship it on Friday."}]', encoding="utf-8")
    run = run_deepfield("--store", str(store), "remember", "work", str(session), env=dead)
    err = run.stderr.decode()
    assert run.returncode == 1 and "127.0.0.1:9" in err and "'tiny'" in err
    assert "--offline" in err and err.count("\n") == 1
    assert _pages(store / "work") == []
    run = run_deepfield("--store", str(store), "remember", "work", str(session), "--offline",
                        env=dead)
    assert run.returncode == 0, run.stderr


def test_interrupted_split_write_leaves_no_partial_page(field: deepfield.Field,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from deepfield import fsutil

    turns = [{"role": "user", "content": f"Reading {i}: the pump ran at {i * 3} l/min."}
             for i in range(400)]
    text = json.dumps(turns)
    original = fsutil._temp_in
    calls = {"n": 0}

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1  # Ctrl-C while the second part is being written out
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(fsutil, "_temp_in", interrupted)
    with pytest.raises(KeyboardInterrupt):
        remember(field, "big.json", text=text)
    assert _pages(field.path) == []
    assert not list(field.path.glob(".deepfield-*"))  # no temporary file left either
    monkeypatch.setattr(fsutil, "_temp_in", original)
    result = remember(field, "big.json", text=text)  # not mistaken for "already remembered"
    assert result.action == "created" and len(result.filenames) > 1
    assert _pages(field.path) == sorted(result.filenames)


def test_a_turn_without_sentence_stops_makes_a_short_memo(field: deepfield.Field) -> None:
    """One 10 KB turn without a full stop: the memo keeps its start, so the page's
    frontmatter stays small and the session is filed (it was refused as over 8 KB)."""
    from deepfield.memo import MEMO_MAX_CHARS
    from deepfield.memorize import remember

    words = " ".join(f"word{i % 50}" for i in range(1800))
    result = remember(field, "long.txt", text=f"Ivy: {words}\nJack: ok\n", format="text")
    assert result.action == "created"
    assert len(result.memo) <= MEMO_MAX_CHARS and result.memo.count("word") < 200
    assert all(len((field.path / n).read_bytes()) <= 8192 for n in result.filenames)


def test_a_session_number_needs_a_locomo_conversation() -> None:
    with pytest.raises(SessionFormatError, match="picks one session of a LoCoMo"):
        parse_session('[{"role": "user", "content": "hi"}]', session=2)


SHORT_CHAT = "\n".join(json.dumps(m) for m in [
    {"role": "user", "name": "Carol", "content": "Should we use LiFePO4 or LiPo cells for the "
     "drone?"},
    {"role": "assistant", "content": "LiFePO4 is safer and lasts more cycles, but it is "
     "heavier: about 90 Wh/kg against 180 Wh/kg."},
    {"role": "user", "name": "Carol", "content": "Weight matters most, the frame is only 400 g."},
    {"role": "assistant", "content": "Then LiPo is the better choice, with a proper charger "
     "and a fire-safe bag."},
    {"role": "user", "name": "Carol", "content": "Ok, we go with LiPo. I'll order two 4S packs "
     "from Dana's shop for 40 EUR each, 4 or 5 days to ship."},
])


def test_the_memo_of_a_short_chat_is_a_summary_not_the_transcript(
        field: deepfield.Field) -> None:
    """A 5-turn chat under the 90-word cap had every sentence chosen: the whole transcript
    became the summary shown by ls, search stubs and context."""
    from deepfield.memo import MEMO_SHARE

    result = remember(field, "chat.jsonl", text=SHORT_CHAT, format="jsonl")
    spoken = " ".join(json.loads(line)["content"] for line in SHORT_CHAT.splitlines())
    memo_sentences = result.memo.split(" Also mentioned: ")[0]
    context, _, chosen = memo_sentences.partition(". ")  # "Carol and assistant talked about …"
    assert "talked" in context
    assert len(chosen.split()) <= len(spoken.split()) * MEMO_SHARE * 1.3
    assert "fire-safe bag" in result.memo or "Dana" in result.memo  # still says what happened


def test_also_mentioned_lists_no_bare_numbers_currencies_or_possessives() -> None:
    """A 40-turn chat's memo ended "Also mentioned: EUR, 40k, two, 6, 7 …" and named its
    topic "Dana's": scraps that say nothing without their sentence."""
    from deepfield.memo import _entity, extractive_memo

    lines = []
    for i in range(20):
        lines.append(f"Ivy: We decided the parser moves to Rust next month because the build "
                     f"in step {i} broke.")
        lines.append("Jack: The quote from Dana's team was 40k EUR for two people, 0 risk.")
    memo = extractive_memo(parse_session("\n".join(lines), format="text"))
    mentioned = memo.partition("Also mentioned:")[2]
    for bad in ("EUR", "40k", "two", " 6", "Dana's"):
        assert bad not in mentioned and bad not in memo.partition(".")[0], (bad, memo)
    assert "Dana" in memo  # the name, without its "'s"
    assert [_entity(x) for x in ("Dana's", "USD", "12", "3.5", "twice", "40k", "Wh")] == \
        ["Dana", "", "", "", "", "", ""]
    assert _entity("3 km") == "3 km" and _entity("20%") == "20%" and _entity("EU") == "EU"


def test_the_topic_names_what_the_chat_said_most_not_what_it_said_first() -> None:
    """"LiFePO4 or LiPo? … so LiPo … LiPo as the choice" titled "Carol, LiFePO4, chemistry":
    the option the chat turned down, first because it was named first."""
    from deepfield.memo import topic_terms_of

    chat = ("user: Hi, I am Carol. Battery chemistry for the drone: LiFePO4 or LiPo?\n"
            "assistant: LiPo has better energy density, LiFePO4 is safer.\n"
            "user: Weight matters most for the drone, so LiPo.\n"
            "assistant: Agreed: LiPo packs. I will note LiPo as the choice.\n")
    topic = topic_terms_of(parse_session(chat, format="text"))
    assert topic[:2] == ["LiPo", "LiFePO4"], topic


def test_remembering_again_with_a_new_topic_says_it_is_not_applied(cli: Cli,
                                                                     tmp_path: Path) -> None:
    cli("new", "ops")
    session = tmp_path / "notes.txt"
    session.write_text("Ana: We migrate the database to Postgres 16 next month.\n"
                       "Ben: I'll benchmark pgbouncer tomorrow.\n")
    first = cli.json("remember", "ops", str(session), "--project", "infra")
    again = cli.json("remember", "ops", str(session), "--project", "infra")
    assert again["action"] == "unchanged" and again["warnings"] == []  # nothing new asked
    changed = cli.json("remember", "ops", str(session), "--topic", "DB migration",
                       "--project", "billing")
    assert changed["action"] == "unchanged" and len(changed["warnings"]) == 1
    warning = changed["warnings"][0]
    assert f"ops/{first['filename']}" in warning and "'DB migration'" in warning
    assert "'billing' (the page has 'infra')" in warning and "not applied" in warning
    page = Page.parse((cli.store_path / "ops" / first["filename"]).read_text())
    assert page.get("project") == "infra"  # the page is the record: left as it was
