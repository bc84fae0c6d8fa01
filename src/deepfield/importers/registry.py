"""Every note importer by name, so the CLI (and callers) can pick one with a string."""

from __future__ import annotations

from .basic_memory import BASIC_MEMORY
from .claude_code import CLAUDE_CODE
from .markdown_dirs import MARKDOWN, Adapter
from .memory_tool import MEMORY_TOOL
from .obsidian import OBSIDIAN

IMPORTERS: dict[str, Adapter] = {
    adapter.kind: adapter
    for adapter in (OBSIDIAN, CLAUDE_CODE, MEMORY_TOOL, BASIC_MEMORY, MARKDOWN)
}
