"""Print one real call of every deepfield MCP tool, as docs/MCP.md shows them.

    python scripts/mcp_examples.py            # Markdown blocks on stdout

It makes a keyword-only store in a temporary folder with the bundled sample field (aurora),
connects the official MCP SDK client to the server in-process and calls each tool; results are
trimmed (long lists cut, long strings shortened) so they fit in a page. Nothing leaves the
machine and no model is used (remember, research and context run their offline algorithms).
"""

from __future__ import annotations

import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.server.mcp_server import create_mcp_server

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_fields", {}),
    ("list_pages", {"field": "aurora"}),
    ("search", {"query": "which battery did we choose", "k": 2}),
    ("read", {"field": "aurora", "page": "decision-battery-chemistry"}),
    ("read", {"field": "aurora", "page": "decision-battery-chemistry", "mode": "section",
              "section": "Decision"}),
    ("write", {"field": "aurora", "name": "pump-noise",
               "text": "# Pump noise\n\nThe pump on plot 3 rattles above 2 bar.\n"}),
    ("remember", {"field": "aurora",
                  "text": "user: the plot 3 pump rattles again\nassistant: noted, I'll "
                          "order a damper\n"}),
    ("research", {"question": "Why do valves get stuck and which firmware fixes it?",
                  "budget": 300, "max_rounds": 2}),
    ("context", {"field": "aurora", "task": "Plan this week's work on plot 7", "budget": 400,
                 "level": "light"}),
]


ELIDED = {"frontmatter", "uuid", "summary", "path"}
"""Keys shown as "…" below the top level (a result's own frontmatter, uuid and summary stay)."""
ALWAYS_ELIDED = {"rounds", "usage"}
"""Keys always shown as "…": the research trace and model usage (docs/API.md has them)."""


def trim(value: Any, depth: int = 0) -> Any:
    """Shorten a result for the page: 2 items per list, 120 characters per string, the keys
    in ELIDED below the top level replaced by "…"."""
    if isinstance(value, dict):
        return {k: "…" if k in ALWAYS_ELIDED or (k in ELIDED and depth > 0)
                else trim(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        head = [trim(v, depth + 1) for v in value[:2]]
        return head + ([f"… {len(value) - 2} more"] if len(value) > 2 else [])
    if isinstance(value, str) and len(value) > 120:
        return value[:117] + "…"
    if isinstance(value, float):
        return round(value, 3)
    return value


def compact(value: Any, indent: str = "") -> str:
    """JSON with every object or list that fits in 96 characters on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(flat) <= 96 or not isinstance(value, dict | list) or not value:
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {compact(v, inner)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return "[\n" + ",\n".join(inner + compact(v, inner) for v in value) + "\n" + indent + "]"


async def run(store: deepfield.Store) -> None:
    server = create_mcp_server(store)
    async with Client(server) as client:
        for tool, arguments in CALLS:
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                raise SystemExit(f"{tool} failed: {result.content}")
            print(f"`{tool}` {json.dumps(arguments, ensure_ascii=False)}\n")
            print("```json")
            print(compact(trim(result.structured_content)))
            print("```\n")
    server.service.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = deepfield.init(Path(tmp) / "memory", EmbeddingConfig("none"))
        samples = resources.files("deepfield") / "samples" / "aurora"
        intro = (samples / "index.md").read_text(encoding="utf-8")
        field = store.create_field("aurora", intro=intro)
        with field.batch():
            for item in sorted(samples.iterdir(), key=lambda i: i.name):
                if item.name.endswith(".md") and item.name != "index.md":
                    field.write(item.read_bytes(), name=item.name[:-3], review=False)
        anyio.run(run, store)
        store.close()


if __name__ == "__main__":
    main()
