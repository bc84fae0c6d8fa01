"""The MCP tools as an agent calls them, in process through the SDK's own client: argument
names the tools do not take, error hints, and the other rough edges found walking the docs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from mcp import Client

import deepfield
from deepfield.server.mcp_server import create_mcp_server

Calls = Callable[[Client], Awaitable[None]]


def drive(store: deepfield.Store, calls: Calls) -> None:
    """Run ``calls`` against ``store``'s MCP server, in process."""
    server = create_mcp_server(store)

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(server) as client:
                await calls(client)

    try:
        anyio.run(main)
    finally:
        server.service.close()


def text_of(result: Any) -> str:
    return str(result.content[0].text)


def test_an_argument_the_tool_does_not_take_is_refused_with_the_right_name(
        keyword_store: deepfield.Store) -> None:
    # `field` (as read and context spell it) sent to search, which takes `fields`, used to be
    # dropped without a word: the search ran over every field.
    keyword_store.create_field("notes").add("Woks", "Carbon woks heat unevenly.")
    keyword_store.create_field("other").add("Woks too", "Woks of another field.")

    async def calls(client: Client) -> None:
        wrong = await client.call_tool("search", {"query": "woks", "field": "notes"})
        assert wrong.is_error
        assert text_of(wrong) == (
            "Error executing tool search: unknown argument field (did you mean fields? "
            "search takes: query, fields, k, mode, unit, frontmatter)")
        none = await client.call_tool("list_fields", {"verbose": True})
        assert none.is_error and "list_fields takes: no arguments" in text_of(none)
        right = await client.call_tool("search", {"query": "woks", "fields": "notes"})
        assert not right.is_error and right.structured_content is not None
        assert {hit["field"] for hit in right.structured_content["results"]} == {"notes"}

    drive(keyword_store, calls)


def test_every_range_error_says_what_to_send(keyword_store: deepfield.Store) -> None:
    # max_rounds out of range was the one range error without a hint (the MCP tool's schema
    # now says the range too, and the SDK checks it first).
    from deepfield.errors import DeepfieldError
    from deepfield.research import research

    notes = keyword_store.create_field("notes")
    notes.add("Woks", "Carbon woks heat unevenly.")
    for rounds in (0, 11):
        with pytest.raises(DeepfieldError) as raised:
            research([notes], "woks", max_rounds=rounds)
        assert raised.value.hint == "ask for 1 to 10 rounds (default 3)"

    async def calls(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        rounds = tools["research"].input_schema["properties"]["max_rounds"]
        assert (rounds["minimum"], rounds["maximum"]) == (1, 10) and rounds["description"]
        result = await client.call_tool("research", {"question": "woks", "max_rounds": 0})
        assert result.is_error and "max_rounds: " in text_of(result)

    drive(keyword_store, calls)


def test_list_pages_of_a_large_field_comes_a_limit_at_a_time(
        keyword_store: deepfield.Store) -> None:
    # 1,500 pages used to come back in one reply of 320,000 characters: more than an agent
    # can take (Claude Code refuses a tool result over 25,000 tokens).
    folder = keyword_store.create_field("notes").path
    for i in range(450):
        (folder / f"page-{i:03d}.md").write_text(
            f"---\ntitle: Page {i}\nuuid: 00000000-0000-4000-8000-{i:012d}\n---\n\nBody {i}.\n")

    async def calls(client: Client) -> None:
        first = (await client.call_tool("list_pages", {"field": "notes"})).structured_content
        assert first is not None and first["count"] == 200 and first["total"] == 450
        assert first["next_offset"] == 200 and first["pages"][0]["filename"] == "page-000.md"
        seen = [p["filename"] for p in first["pages"]]
        offset = first["next_offset"]
        while offset is not None:
            more = (await client.call_tool("list_pages", {"field": "notes", "offset": offset,
                                                          "limit": 1000})).structured_content
            assert more is not None
            seen += [p["filename"] for p in more["pages"]]
            offset = more["next_offset"]
        assert seen == [f"page-{i:03d}.md" for i in range(450)]
        for args in ({"limit": 0}, {"limit": 1001}, {"offset": -1}):
            bad = await client.call_tool("list_pages", {"field": "notes", **args})
            assert bad.is_error and text_of(bad).endswith(")"), args

    drive(keyword_store, calls)


def test_an_http_path_without_its_slash_is_served_there(keyword_store: deepfield.Store) -> None:
    # `deepfield mcp --transport http --path mcp` used to end in an AssertionError traceback.
    import json
    import os
    import subprocess
    import sys

    keyword_store.create_field("notes").add("Woks", "Carbon woks heat unevenly.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPFIELD_")}
    with subprocess.Popen(
        [sys.executable, "-m", "deepfield", "mcp", str(keyword_store.root), "--transport",
         "http", "--port", "0", "--path", "agents/mcp", "--json"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            url = json.loads(line)["url"]
            assert url.endswith("/agents/mcp"), url

            async def main() -> None:
                with anyio.fail_after(30):
                    async with Client(url) as client:
                        found = await client.call_tool("search", {"query": "woks"})
                        assert not found.is_error, found.content

            anyio.run(main)
        finally:
            proc.terminate()
            proc.wait(10)


def test_error_hints_name_tools_and_arguments_not_cli_commands(
        keyword_store: deepfield.Store) -> None:
    # An agent was told to run `deepfield ls` or pass `--mode`: commands it cannot run.
    keyword_store.create_field("notes").add("Woks", "## Heat\n\nCarbon woks heat unevenly.")

    async def calls(client: Client) -> None:
        for tool, args, hint in (
            ("search", {"query": "woks", "fields": "nope"}, "call list_fields;"),
            ("list_pages", {"field": "nope"}, "create_field=true"),
            ("read", {"field": "notes", "page": "nope"}, "call list_pages"),
            ("read", {"field": "notes", "page": "woks", "section": "Nope"}, "mode=outline"),
            ("search", {"query": "woks", "mode": "vector"}, "use mode bm25"),
            ("research", {"question": "woks", "budget": 5}, "raise budget to"),
        ):
            result = await client.call_tool(tool, args)
            assert result.is_error and hint in text_of(result), (tool, text_of(result))
            assert "deepfield ls" not in text_of(result) and "--" not in text_of(result)

    drive(keyword_store, calls)


def test_an_outline_stays_small_when_a_paragraph_has_no_sentence_end(
        keyword_store: deepfield.Store) -> None:
    # A paragraph with no sentence end (a transcript without punctuation) was one "first
    # sentence": the outline, the cheap view an agent reads first, came back as big as the
    # page (1 MB for a 500 KB page).
    said = "we talked about the pump in 2024 then the valve " * 200
    body = "\n\n".join(f"## Part {i}\n\n{said}" for i in range(20))
    keyword_store.create_field("notes")
    (keyword_store.root / "notes" / "talk.md").write_text(
        f"---\ntitle: Talk\nuuid: 00000000-0000-4000-8000-000000000001\n---\n\n{body}\n")

    async def calls(client: Client) -> None:
        view = (await client.call_tool("read", {"field": "notes", "page": "talk"}))
        assert view.structured_content is not None
        assert len(view.structured_content["text"]) < 20 * 400, len(text_of(view))
        first = view.structured_content["outline"][0]["sentences"][0]
        assert first.startswith("we talked about the pump") and first.endswith(" …")
        assert len(first) <= 302

    drive(keyword_store, calls)


def test_every_tool_argument_is_described_with_its_range(
        keyword_store: deepfield.Store) -> None:
    # The schemas named the arguments and nothing more: an agent (or a client that shows
    # only the schema) could not tell what k, depth or level meant, nor their ranges.
    async def calls(client: Client) -> None:
        for tool in (await client.list_tools()).tools:
            for name, prop in tool.input_schema.get("properties", {}).items():
                assert prop.get("description"), (tool.name, name)
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        k = tools["search"].input_schema["properties"]["k"]
        assert (k["minimum"], k["maximum"]) == (1, 100)
        depth = tools["read"].input_schema["properties"]["depth"]
        assert (depth["minimum"], depth["maximum"]) == (1, 6)

    drive(keyword_store, calls)


def test_http_options_without_the_http_transport_are_refused(cli: Any) -> None:
    # `deepfield mcp --port 9000` used to start the stdio server: a terminal that waits.
    for args, said in ((["--port", "9000"], "--port is only for --transport http"),
                       (["--host", "127.0.0.1", "--path", "/x"], "--host, --path are only")):
        result = cli("mcp", *args)
        assert result.exit_code == 2 and said in result.stderr, result.output


def test_a_page_asked_for_by_its_title_or_in_capitals_names_the_page(
        keyword_store: deepfield.Store) -> None:
    # An agent passes what it saw (a title, "Woks"): the error said only "no page".
    keyword_store.create_field("notes").add("Pump noise", "The pump rattles above 2 bar.")

    async def calls(client: Client) -> None:
        for page in ("Pump noise", "Pump-Noise.MD"):
            result = await client.call_tool("read", {"field": "notes", "page": page})
            assert result.is_error and "did you mean pump-noise.md?" in text_of(result), page
        far = await client.call_tool("read", {"field": "notes", "page": "valves"})
        assert far.is_error and "did you mean" not in text_of(far)

    drive(keyword_store, calls)


def test_a_page_name_with_a_nul_is_not_called_too_long(keyword_store: deepfield.Store) -> None:
    notes = keyword_store.create_field("notes")
    notes.add("Woks", "Carbon woks heat unevenly.")
    with pytest.raises(deepfield.PageNotFoundError) as raised:
        notes.read("wo\x00ks")
    assert raised.value.message == "no page 'wo\\x00ks' in field notes (the name holds a NUL " \
        "character)"  # it said "'wo\x00ks'… (the name is longer than any file name)"
    with pytest.raises(deepfield.PageNotFoundError, match="longer than any file name"):
        notes.read("a" * 300)


def test_a_failed_write_with_create_field_leaves_no_empty_field(
        keyword_store: deepfield.Store) -> None:
    # "Nothing is written by a call that fails": the field was created first, so a write of
    # bad text or a bad name (or an empty remember) left an empty field behind.
    keyword_store.create_field("notes")

    async def calls(client: Client) -> None:
        for tool, args in (
            ("write", {"field": "journal", "text": "   "}),
            ("write", {"field": "journal", "text": "---\n- a list\n---\n# L\n"}),
            ("write", {"field": "journal", "text": "# Day\n", "name": "Bad Name!"}),
            ("remember", {"field": "journal", "text": ""}),
            ("remember", {"field": "journal", "text": "hi", "format": "bogus"}),
        ):
            result = await client.call_tool(tool, {**args, "create_field": True})
            assert result.is_error, (tool, args)
            assert not (keyword_store.root / "journal").exists(), (tool, args)
        started = await client.call_tool("write", {"field": "journal", "text": "# Day one\n",
                                                   "create_field": True})
        assert not started.is_error and (keyword_store.root / "journal" / "day-one.md").is_file()

    drive(keyword_store, calls)


def test_context_warnings_name_the_tool_argument(keyword_store: deepfield.Store) -> None:
    # The warnings of a context whose task takes the budget said "raise --budget".
    keyword_store.create_field("notes").add("Woks", "Carbon woks heat unevenly.")

    async def calls(client: Client) -> None:
        result = await client.call_tool("context", {"field": "notes", "budget": 100,
                                                    "task": "woks heat " * 60})
        assert not result.is_error and result.structured_content is not None
        said = [*result.structured_content["warnings"],
                *(o["reason"] for o in result.structured_content["omitted"])]
        assert any("raise budget" in text for text in said), said
        assert not any("--" in text for text in said), said

    drive(keyword_store, calls)
