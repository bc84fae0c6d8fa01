"""Claude's memory tool served from a deepfield field, called offline with the anthropic SDK's
own command types; its answers are checked against the SDK's reference filesystem backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

import deepfield
from deepfield.errors import UnknownFieldError
from deepfield.integrations.memory_tool import DeepfieldMemoryTool
from deepfield.page import Page

from .fakes import FakeEmbedder

NOTES = "# Coffee\n\nAlice takes her coffee black.\nBob likes oat milk.\n"


@pytest.fixture
def memory(keyword_store: deepfield.Store) -> DeepfieldMemoryTool:
    return DeepfieldMemoryTool.open(keyword_store, "claude")


def call(tool: Any, **command: Any) -> str:
    result = tool.call(command)  # the raw input the tool runner hands over
    assert isinstance(result, str)
    return result


def refused(tool: Any, **command: Any) -> str:
    with pytest.raises(ToolError) as caught:
        tool.call(command)
    return str(caught.value)


# The same session against the SDK's own filesystem backend and against deepfield: every
# answer the model reads must be the same.
SESSION: list[dict[str, Any]] = [
    {"command": "create", "path": "/memories/coffee.md", "file_text": NOTES},
    {"command": "create", "path": "/memories/projects/alpha/status.xml",
     "file_text": "<status>\r\n  <phase>design</phase>\r\n</status>"},
    {"command": "view", "path": "/memories/coffee.md"},
    {"command": "view", "path": "/memories/coffee.md", "view_range": [2, 3]},
    {"command": "view", "path": "/memories/coffee.md", "view_range": [3, -1]},
    {"command": "str_replace", "path": "/memories/coffee.md", "old_str": "oat milk",
     "new_str": "soy milk"},
    {"command": "str_replace", "path": "/memories/coffee.md", "old_str": "tea",
     "new_str": "x"},
    {"command": "str_replace", "path": "/memories/coffee.md", "old_str": "e",
     "new_str": "x"},
    {"command": "insert", "path": "/memories/coffee.md", "insert_line": 1,
     "insert_text": "Updated weekly.\n"},
    {"command": "insert", "path": "/memories/coffee.md", "insert_line": 99,
     "insert_text": "x"},
    {"command": "view", "path": "/memories/coffee.md"},
    {"command": "view", "path": "/memories/projects/alpha/status.xml"},
    {"command": "insert", "path": "/memories/projects/alpha/status.xml", "insert_line": 3,
     "insert_text": "<!-- end -->"},
    {"command": "view", "path": "/memories/projects/alpha/status.xml"},
    {"command": "create", "path": "/memories/coffee.md", "file_text": "again"},
    {"command": "rename", "path": "", "old_path": "/memories/coffee.md",
     "new_path": "/memories/people/drinks.md"},
    {"command": "view", "path": "/memories/people/drinks.md"},
    {"command": "view", "path": "/memories/coffee.md"},
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/archive1"},
    {"command": "view", "path": "/memories/archive1/alpha/status.xml"},
    {"command": "rename", "old_path": "/memories/nothing.md", "new_path": "/memories/x.md"},
]


def test_answers_match_the_sdks_reference_backend(memory: DeepfieldMemoryTool,
                                                   tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "reference"))
    for command in SESSION:
        command = {k: v for k, v in command.items() if v != "" or k != "path"}
        outcomes = []
        for tool in (reference, memory):
            try:
                outcomes.append(("ok", tool.call(command)))
            except ToolError as exc:
                outcomes.append(("error", str(exc)))
        assert outcomes[0] == outcomes[1], command


def test_memory_files_are_pages_with_their_path(memory: DeepfieldMemoryTool) -> None:
    call(memory, command="create", path="/memories/coffee.md", file_text=NOTES)
    odd = "---\nnot: frontmatter\n---\nno final newline\r\nünïcode"
    call(memory, command="create", path="/memories/raw.txt", file_text=odd)
    field = memory.field
    pages = {d.filename: d for d in field.pages()}
    assert set(pages) == {"coffee-md.md", "raw-txt.md"}
    filename, page = field.load("coffee-md")
    assert page.get("memory_path") == "/memories/coffee.md" and page.uuid
    assert page.body == NOTES  # the file's text, byte for byte
    stored = (field.path / "raw-txt.md").read_bytes().decode()
    assert stored.endswith("---\n" + odd) and memory.files.text("raw.txt") == odd
    found = field.search("oat milk", k=3).results
    assert found and found[0].filename == filename


def test_directories_listing_rename_and_delete(memory: DeepfieldMemoryTool) -> None:
    for path, text in (("/memories/a.md", "one\n"), ("/memories/team/bob.md", "bob\n"),
                       ("/memories/team/x/deep/far.md", "far\n")):
        call(memory, command="create", path=path, file_text=text)
    listing = call(memory, command="view", path="/memories")
    assert listing.splitlines() == [
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items:",
        "12B\t/memories", "4B\t/memories/a.md", "8B\t/memories/team/",
        "4B\t/memories/team/bob.md", "4B\t/memories/team/x/"]
    assert "far.md" in call(memory, command="view", path="/memories/team/x")
    assert "does not exist" in refused(memory, command="view", path="/memories/nope")
    assert "is a file" in refused(memory, command="create", path="/memories/a.md/b.md",
                                  file_text="x")
    assert "is a directory" in refused(memory, command="create", path="/memories/team",
                                       file_text="x")
    assert "into itself" in refused(memory, command="rename", old_path="/memories/team",
                                    new_path="/memories/team/sub")
    # a path below a file would make that path a file and a folder at once
    assert refused(memory, command="rename", old_path="/memories/team/bob.md",
                   new_path="/memories/a.md/bob.md") == "/memories/a.md is a file, not a directory"
    assert "into itself" in refused(memory, command="rename", old_path="/memories/a.md",
                                    new_path="/memories/a.md/b.md")
    assert set(memory.files.files()) == {"a.md", "team/bob.md", "team/x/deep/far.md"}
    assert "already exists" in refused(memory, command="rename", old_path="/memories/a.md",
                                       new_path="/memories/team")
    call(memory, command="rename", old_path="/memories/team", new_path="/memories/people")
    assert memory.files.text("people/x/deep/far.md") == "far\n"
    answer = call(memory, command="delete", path="/memories/people")
    assert answer.startswith("Successfully deleted /memories/people") and "2 pages" in answer
    assert set(memory.files.files()) == {"a.md"}
    archived = memory.field.archived()  # archived, never destroyed
    assert len(archived) == 2 and all((memory.field.path / "archive" / n).is_file()
                                      for n in archived)
    assert "Cannot delete the /memories" in refused(memory, command="delete", path="/memories")
    assert "Cannot rename the /memories" in refused(memory, command="rename",
                                                    old_path="/memories", new_path="/memories/x")


@pytest.mark.parametrize("path", [
    "/etc/passwd", "memories/a.md", "/memoriesX/a.md", "/memories/../deepfield.toml",
    "/memories/a/../../x", "/memories/./a.md", "/memories/a//b.md", "/memories/a\\..\\b",
    "/memories/a\x00b", "../memories/a.md", "/memories/" + "a" * 600,
])
def test_paths_outside_memories_are_refused(memory: DeepfieldMemoryTool, path: str) -> None:
    message = refused(memory, command="create", path=path, file_text="x")
    assert "/memories" in message or "control" in message
    assert refused(memory, command="view", path=path)
    assert memory.field.pages() == []


def test_links_in_the_field_are_not_memory_files(memory: DeepfieldMemoryTool,
                                                  tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("---\nmemory_path: /memories/secret.md\n---\nthe password\n")
    (memory.field.path / "secret.md").symlink_to(secret)
    assert "does not exist" in refused(memory, command="view", path="/memories/secret.md")
    assert "secret" not in call(memory, command="view", path="/memories")


def test_pages_written_otherwise_are_files_too(memory: DeepfieldMemoryTool) -> None:
    memory.field.add("Woks", "Carbon fibre woks heat unevenly.\n", name="woks")
    assert "Carbon fibre" in call(memory, command="view", path="/memories/woks.md")
    call(memory, command="str_replace", path="/memories/woks.md", old_str="unevenly",
         new_str="fast")
    _name, page = memory.field.load("woks")
    assert page.title == "Woks" and page.get("memory_path") is None  # a person's page keeps
    assert "heat fast" in page.body                                   # its title and shape


def test_typed_commands_search_and_tool_params(memory: DeepfieldMemoryTool) -> None:
    assert memory.to_dict() == {"type": "memory_20250818", "name": "memory"}
    memory.execute(BetaMemoryTool20250818CreateCommand(
        command="create", path="/memories/prefs.md", file_text="Dark roast, no sugar.\n"))
    memory.execute(BetaMemoryTool20250818StrReplaceCommand(
        command="str_replace", path="/memories/prefs.md", old_str="no sugar",
        new_str="one sugar"))
    shown = memory.execute(BetaMemoryTool20250818ViewCommand(command="view",
                                                             path="/memories/prefs.md"))
    assert shown == ("Here's the content of /memories/prefs.md with line numbers:\n"
                     "     1\tDark roast, one sugar.\n     2\t")
    search = memory.search_tool()
    params = search.to_dict()
    assert params["name"] == "memory_search"
    assert set(params["input_schema"]["properties"]) == {"query", "k"}
    found = search.call({"query": "sugar"})
    assert isinstance(found, str) and "- /memories/prefs.md lines 1-1" in found
    assert "No memory file matches" in search.call({"query": "zebra"})
    with pytest.raises(ToolError):
        search.call({"query": " "})


def test_unknown_field_and_clear(keyword_store: deepfield.Store) -> None:
    keyword_store.create_field("notes")
    with pytest.raises(UnknownFieldError) as caught:
        DeepfieldMemoryTool.open(keyword_store, "nope", create=False)
    assert caught.value.hint == "fields: notes"  # it names the fields there are
    memory = DeepfieldMemoryTool.open(keyword_store, "claude")
    memory.field.write(Page(body="kept\n", frontmatter={"title": "Human page"}), name="human")
    call(memory, command="create", path="/memories/a.md", file_text="a\n")
    assert memory.clear_all_memory() == "All memory cleared (1 pages archived)"
    assert [d.filename for d in memory.field.pages()] == ["human.md"]
    big = "x" * ((1 << 20) + 1)
    assert "over" in refused(memory, command="create", path="/memories/big.md", file_text=big)
    assert "NUL" in refused(memory, command="create", path="/memories/n.md", file_text="a\x00")


def test_async_tool_and_hidden_items(keyword_store: deepfield.Store) -> None:
    import anyio

    from deepfield.integrations.memory_tool import AsyncDeepfieldMemoryTool

    memory = AsyncDeepfieldMemoryTool(DeepfieldMemoryTool.open(keyword_store, "claude").field)

    async def session() -> str:
        await memory.call({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
        await memory.call({"command": "create", "path": "/memories/.draft.md",
                           "file_text": "hidden\n"})
        assert "hidden" in await memory.call({"command": "view",
                                                "path": "/memories/.draft.md"})
        result = await memory.call({"command": "view", "path": "/memories"})
        assert isinstance(result, str)
        return result

    listing = anyio.run(session)
    assert "/memories/a.md" in listing and ".draft" not in listing


def test_async_commands_at_once_all_succeed(store: deepfield.Store,
                                            embedder: FakeEmbedder) -> None:
    """The async tool runs each command on a worker thread over one field: under
    asyncio.gather they used to fail with raw sqlite3 errors."""
    import asyncio

    from deepfield.integrations.memory_tool import AsyncDeepfieldMemoryTool

    embedder.seconds_per_text = 0.002  # (a slow model widens the window for the race)
    memory = AsyncDeepfieldMemoryTool(DeepfieldMemoryTool.open(store, "claude").field)

    async def round_of(n: int) -> list[Any]:
        ops = [memory.call({"command": "create", "path": f"/memories/f{n}-{i}.md",
                            "file_text": f"wok fact {i}\n"}) for i in range(10)]
        ops += [memory.call({"command": "view", "path": "/memories"}) for _ in range(5)]
        ops += [asyncio.to_thread(memory.sync.search, "wok fact") for _ in range(5)]
        return await asyncio.gather(*ops, return_exceptions=True)

    for n in range(4):
        results = asyncio.run(round_of(n))
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert len(memory.sync.files.files()) == 10 * (n + 1)
