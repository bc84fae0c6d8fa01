"""A backend for Claude's memory tool (``memory_20250818``) that keeps ``/memories`` as a
deepfield field, with deepfield's search on top. Needs ``pip install 'deepfield[anthropic]'``.

    import anthropic, deepfield
    from deepfield.integrations.memory_tool import DeepfieldMemoryTool

    memory = DeepfieldMemoryTool.open(deepfield.open("memory", create=True), "claude")
    runner = anthropic.Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=2048,
        tools=[memory, memory.search_tool()],
        messages=[{"role": "user", "content": "Remember that I take my coffee black."}])

The commands (view, create, str_replace, insert, delete, rename) answer exactly as the SDK's
own ``BetaLocalFilesystemMemoryTool`` does, so the model sees what it was trained on; what
differs is where the files live (:mod:`.memory_files`): pages a person can read, search, edit
and carry, and ``delete`` archives instead of destroying.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

try:
    from anthropic.lib.tools import (
        BetaAbstractMemoryTool,
        BetaAsyncAbstractMemoryTool,
        BetaFunctionTool,
        ToolError,
        beta_tool,
    )
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )
    from anyio import to_thread
except ImportError as exc:  # the extra is not installed: say how to get it
    raise ImportError(f"{__name__} needs anthropic: "
                      "pip install 'deepfield[anthropic]'") from exc

from ..errors import UnknownFieldError
from ..field import Field
from ..store import Store
from ._common import fields_hint
from .memory_files import MemoryFiles, MemoryOpError, absolute, relative

__all__ = ["AsyncDeepfieldMemoryTool", "DeepfieldMemoryTool"]

LINE_NUMBER_WIDTH = 6  # as the SDK's reference implementation numbers lines
T = TypeVar("T")


def _size(count: int) -> str:
    if count < 1024:
        return f"{count}B"
    for unit, scale in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if count < scale << 10 or unit == "G":
            value = count / scale
            return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    raise AssertionError("unreachable")


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{line}"
                     for n, line in enumerate(lines, start=first))


class DeepfieldMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool served from ``field``. ``review=True`` runs deepfield's
    duplicate/contradiction review on new memory files (off: the model edits them often)."""

    def __init__(self, field: Field, *, review: bool = False,
                 cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self.field = field
        self.files = MemoryFiles(field, review=review)
        # The field's SQLite connection runs one transaction at a time: commands from several
        # threads (AsyncDeepfieldMemoryTool under asyncio.gather) take turns, else they fail
        # with sqlite3 errors.
        self._lock = threading.Lock()

    @classmethod
    def open(cls, store: Store, field: str, *, create: bool = True,
             **options: Any) -> DeepfieldMemoryTool:
        """The tool for ``store``'s field ``field``, created when missing unless ``create`` is
        False (then :class:`~deepfield.errors.UnknownFieldError`)."""
        if create and field not in store.field_names():
            store.create_field(field, intro="Claude's memory tool: each page is a file of "
                               "/memories (its path in `memory_path`).")
        known = store.field_names()
        if field not in known:
            raise UnknownFieldError(f"no field {field!r} in the store at {store.root}",
                                    fields_hint(known))
        return cls(store.field(field), **options)

    def _run(self, action: Callable[[], T]) -> T:
        try:
            with self._lock:
                return action()
        except MemoryOpError as exc:
            raise ToolError(str(exc)) from None

    # ------------------------------------------------------------------ commands

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(lambda: self._view(command.path, command.view_range))

    def _view(self, path: str, view_range: list[int] | None) -> str:
        rel = relative(path)
        files = self.files.files()
        if rel in files:
            lines = self.files.text(rel).split("\n")
            first = 1
            if view_range and len(view_range) == 2:
                start = max(1, view_range[0]) - 1
                end = len(lines) if view_range[1] == -1 else view_range[1]
                lines, first = lines[start:end], start + 1
            return f"Here's the content of {path} with line numbers:\n" + \
                _numbered(lines, first)
        if not self.files.is_dir(rel, files):
            raise MemoryOpError(f"The path {path} does not exist. Please provide a valid path.")
        entries = self.files.listing(rel)
        total = sum(size for size, name in entries if "/" not in name.rstrip("/"))
        shown = absolute(rel)
        lines = [f"{_size(total)}\t{shown}"]
        lines += [f"{_size(size)}\t{shown}/{name}" for size, name in entries]
        return (f"Here're the files and directories up to 2 levels deep in {shown}, excluding "
                "hidden items:\n" + "\n".join(lines))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        def run() -> str:
            self.files.create(relative(command.path), command.file_text)
            return f"File created successfully at: {command.path}"

        return self._run(run)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(lambda: self._str_replace(command.path, command.old_str,
                                                   command.new_str))

    def _str_replace(self, path: str, old: str, new: str) -> str:
        rel = relative(path)
        content = self._file_text(rel, path)
        count = content.count(old) if old else 0
        if count == 0:
            raise MemoryOpError(f"No replacement was performed, old_str `{old}` did not appear "
                                f"verbatim in {path}.")
        if count > 1:
            lines, start = [], 0
            while (pos := content.find(old, start)) >= 0:
                lines.append(content[:pos].count("\n") + 1)
                start = pos + 1
            raise MemoryOpError(f"No replacement was performed. Multiple occurrences of old_str "
                                f"`{old}` in lines: {', '.join(map(str, lines))}. Please "
                                "ensure it is unique")
        changed = content[: content.find(old)].count("\n")
        updated = content.replace(old, new)
        self.files.replace_text(rel, updated)
        new_lines = updated.split("\n")
        first = max(0, changed - 2)
        snippet = _numbered(new_lines[first: min(len(new_lines), changed + 3)], first + 1)
        return ("The memory file has been edited. Here is the snippet showing the change "
                "(with line numbers):\n" + snippet)

    def _file_text(self, rel: str, path: str) -> str:
        if rel not in self.files.files():
            if self.files.is_dir(rel):
                raise MemoryOpError(f"The path {path} is not a file.")
            raise MemoryOpError(f"The path {path} does not exist. Please provide a valid path.")
        return self.files.text(rel)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(lambda: self._insert(command.path, command.insert_line,
                                              command.insert_text))

    def _insert(self, path: str, at: int, text: str) -> str:
        rel = relative(path)
        lines = self._file_text(rel, path).split("\n")
        if lines[-1] == "":  # LF only, keeping any CR, without the empty tail (as the SDK)
            lines.pop()
        if at < 0 or at > len(lines):
            raise MemoryOpError(f"Invalid `insert_line` parameter: {at}. It should be within "
                                f"the range [0, {len(lines)}].")
        lines.insert(at, text.rstrip("\n"))
        updated = "\n".join(lines)
        self.files.replace_text(rel, updated if updated.endswith("\n") else updated + "\n")
        return f"The file {path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        def run() -> str:
            archived = self.files.archive(relative(command.path))
            return (f"Successfully deleted {command.path} (deepfield archived "
                    f"{len(archived)} page{'s' if len(archived) != 1 else ''}; a person can "
                    "restore them)")

        return self._run(run)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        def run() -> str:
            self.files.move(relative(command.old_path), relative(command.new_path))
            return f"Successfully renamed {command.old_path} to {command.new_path}"

        return self._run(run)

    def clear_all_memory(self) -> str:
        """Archive every memory file (pages the field got some other way stay)."""
        with self._lock:
            count = self.files.archive_all()
        return f"All memory cleared ({count} pages archived)"

    # ------------------------------------------------------------------ search

    def search(self, query: str, k: int = 5) -> str:
        """The ``k`` memory files that best match ``query``, as text for the model."""
        def run() -> str:
            if not query.strip():
                raise MemoryOpError("Give a query to search the memory for")
            hits = self.files.search(query, k=max(1, min(k, 50)))
            if not hits:
                return f"No memory file matches {query!r}."
            out = [f"Memory files matching {query!r}, best first:"]
            for hit in hits:
                where = f" lines {hit['lines'][0]}-{hit['lines'][1]}" if hit["lines"] else ""
                out.append(f"- {hit['path']}{where} (score {hit['score']}): {hit['snippet']}")
            return "\n".join(out)

        return self._run(run)

    def search_tool(self, name: str = "memory_search") -> BetaFunctionTool[Any]:
        """A function tool the model can call beside ``memory``: search the memory files by
        meaning and keywords instead of viewing them one by one."""

        def memory_search(query: str, k: int = 5) -> str:
            """Search your /memories files (keywords and meaning); returns the best matching
            files with the lines that matched. View a file for its whole text.

            Args:
                query: What to look for.
                k: How many files to return (1-50).
            """
            return self.search(query, k)

        return beta_tool(memory_search, name=name)


class AsyncDeepfieldMemoryTool(BetaAsyncAbstractMemoryTool):
    """The same backend for ``AsyncAnthropic``'s tool runner: each command runs
    :class:`DeepfieldMemoryTool`'s in a worker thread (files and SQLite block)."""

    def __init__(self, field: Field, *, review: bool = False,
                 cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self.sync = DeepfieldMemoryTool(field, review=review)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await to_thread.run_sync(self.sync.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await to_thread.run_sync(self.sync.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await to_thread.run_sync(self.sync.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await to_thread.run_sync(self.sync.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await to_thread.run_sync(self.sync.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await to_thread.run_sync(self.sync.rename, command)

    async def clear_all_memory(self) -> str:
        return await to_thread.run_sync(self.sync.clear_all_memory)
