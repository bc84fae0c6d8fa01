"""GAM commands: remember a session, research a question, build a context block."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..context import build_context
from ..domains.levels import LEVELS
from ..fence import check_fenced_budget, fence_research
from ..memorize import remember
from ..research import research
from ..sessions import FORMATS
from .app import app, json_option, print_json, settings, warn
from .indexing import describe_document, fast_option, index_after_write
from .terminal import counted

_OFFLINE = click.option(
    "--offline", is_flag=True,
    help="Do not call a model even if one is configured ([llm] in deepfield.toml or "
    "$DEEPFIELD_LLM_URL / $DEEPFIELD_LLM_MODEL).",
)


@app.command("remember")
@click.argument("field_name", metavar="FIELD")
@click.argument("session", metavar="SESSION")
@click.option("--format", "format_", type=click.Choice(FORMATS), default="auto",
              show_default=True, help="Session format (auto: by extension and content).")
@click.option("--session", "session_number", type=int, default=None,
              help="Session number, for a LoCoMo conversation file.")
@click.option("--project", default=None, help="Project the session belongs to.")
@click.option("--topic", default=None, help="Topic of the session (default: derived).")
@click.option("--index/--no-index", "do_index", default=True, show_default=True,
              help="Index and embed the new page now (else the next search or `deepfield "
              "index` does).")
@fast_option
@_OFFLINE
@json_option
@click.pass_context
def remember_command(ctx: click.Context, field_name: str, session: str, format_: str,
                     session_number: int | None, project: str | None, topic: str | None,
                     do_index: bool, fast: bool | None, offline: bool, as_json: bool) -> None:
    """File SESSION (a file, or - for stdin) as a page of FIELD with a memo and header.

    Accepts OpenAI-style messages (JSON or JSONL), a LoCoMo session, or a Markdown/text
    transcript. With a model configured it writes the memo in one call; without one the memo
    is extractive. Remembering the same session twice changes nothing (a --topic or
    --project given then is not applied, and a warning says so).
    """
    env = settings(ctx)
    field = env.field(field_name)
    llm = env.llm("memorizer", offline=offline)
    text = None
    if session == "-":
        text = sys.stdin.buffer.read().decode("utf-8", errors="strict")
    elif not Path(session).is_file():
        raise click.BadParameter(f"no session file {session}", param_hint="SESSION")
    result = remember(field, "stdin" if text is not None else session, llm=llm,
                      format=format_, session=session_number, text=text, project=project,
                      topic=topic)
    indexed = index_after_write([field], fast=fast, as_json=as_json) if do_index else []
    if as_json:
        print_json(result.to_json() | ({"indexed": indexed[0]} if indexed else {}))
        return
    for warning in result.warnings:
        warn(warning)
    click.echo(f"{result.action}: {field.name}/{result.filename} ({result.memo_by} memo)")
    click.echo(f"  {result.memo}")
    if indexed:
        click.echo(f"  {describe_document(indexed[0])}")


@app.command("research")
@click.argument("question")
@click.option("--field", "-f", "fields", multiple=True,
              help="Field to research (repeatable; default: all fields of the store).")
@click.option("--max-rounds", type=click.IntRange(1, 10), default=3, show_default=True)
@click.option("--budget", type=int, default=1000, show_default=True,
              help="Tokens the returned context may take.")
@_OFFLINE
@json_option
@click.pass_context
def research_command(ctx: click.Context, question: str, fields: tuple[str, ...],
                     max_rounds: int, budget: int, offline: bool, as_json: bool) -> None:
    """Research QUESTION: rounds of plan, search, integrate, reflect; prints the context.

    Without a model the heuristic researcher runs (entity and keyword queries, bridge
    entities for multi-hop questions, coverage checks). Evidence is shown page by page, the
    page with the best line first. --json adds the evidence, sources, the per-round trace and
    the cost.

    The last line on stderr (and "confidence" in --json) says how far the evidence supports an
    answer: high (lines about the question's subject hold its words: answer from them), low
    (partly: research further or hedge) or none (nothing found, a name appears nowhere, or the
    matching lines are about someone else: say the memory does not know), with the reason.
    """
    env = settings(ctx)
    chosen = env.chosen_fields(fields)
    check_fenced_budget(budget, [f.name for f in chosen], question)
    llm = env.llm("researcher", offline=offline)
    result = fence_research(research(chosen, question, llm=llm, max_rounds=max_rounds,
                                     budget=budget), [f.name for f in chosen])
    if as_json:
        print_json(result.to_json())
        return
    for warning in result.warnings:
        warn(warning)
    if result.context:
        click.echo(result.context)
    elif result.left_out:  # found, but not even one line fits
        click.echo(f"(no evidence fits in {budget} tokens: {counted(result.left_out, 'line')} "
                   "found; raise --budget)")
    else:
        click.echo("(no evidence found)")
    usage = result.to_json()["usage"]
    confidence = result.confidence
    click.echo(
        f"\n— {counted(len(result.evidence), 'evidence line')} from "
        f"{counted(len(result.sources), 'page')}, {result.tokens}/{budget} tokens, "
        f"{counted(len(result.rounds), 'round')}, {counted(usage['calls'], 'model call')}, "
        f"{usage['seconds']:.2f} s ({result.mode})\n"
        f"— confidence: {confidence.level} — {confidence.reason}", err=True)


@app.command("context")
@click.argument("task", required=False, default="")
@click.option("--field", "-f", "field_names", required=True, multiple=True,
              help="Field to build from (one).")
@click.option("--level", type=click.Choice(LEVELS), default="deep", show_default=True,
              help="light: basic info + taxonomy; medium: + challenges, network, outlines, "
              "stubs; deep: + research on TASK (so it needs TASK).")
@click.option("--budget", type=int, default=2000, show_default=True,
              help="Tokens the whole block may take.")
@click.option("--max-rounds", type=click.IntRange(1, 10), default=3, show_default=True)
@_OFFLINE
@json_option
@click.pass_context
def context_command(ctx: click.Context, task: str, field_names: tuple[str, ...], level: str,
                    budget: int, max_rounds: int, offline: bool, as_json: bool) -> None:
    """A context block for TASK to paste into an agent's prompt, within --budget tokens.

    Always-load pages (human preferences) come first, then the field's introduction, the
    level's domain material and, at the deep level, research on TASK. Memory is fenced in
    <memory> elements and labelled as data, not instructions.
    """
    if len(set(field_names)) > 1:  # click would keep the last silently
        raise click.UsageError("a context block is built from one --field; use `deepfield "
                               "research -f A -f B` to search several")
    if level == "deep" and not task.strip():  # as HTTP and MCP: deep means research on TASK
        raise click.UsageError("--level deep researches TASK: give the task, or ask for "
                               "--level light or medium")
    env = settings(ctx)
    field = env.field(field_names[0])
    llm = env.llm("researcher", offline=offline) if task else None
    result = build_context(field, task, budget=budget, level=level, llm=llm,
                           max_rounds=max_rounds)
    if as_json:
        print_json(result.to_json())
        return
    for warning in result.warnings:
        warn(warning)
    click.echo(result.text, nl=False)
    left: list[Any] = [f"{o.label} ({o.reason})" for o in result.omitted]
    click.echo(f"— {result.tokens}/{budget} tokens" + (
        f"; left out: {', '.join(left)}" if left else ""), err=True)
    if result.research is not None:
        # As `research` ends: an empty research block is otherwise absent without a word.
        confidence = result.research.confidence
        dropped = result.research.ranked and not result.research.evidence
        click.echo(f"— research: {confidence.level} — {confidence.reason}"
                   + (" (none of it fits in the context)" if dropped else ""), err=True)
