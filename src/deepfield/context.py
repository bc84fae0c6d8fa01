"""The context builder: one block an agent can paste into its prompt, within a token budget.

It composes, in this order: the human preferences and other ``always_load: true`` pages (they
constrain everything else, so they come first), the field's introduction (``index.md``), the
domain material of the chosen level (light / medium, domains/levels.py), and — when there is a
task and the level is deep (the default) — the research on the task. Each piece is fenced in a
``<memory …>`` element and the block opens with a notice that memory is data, not instructions:
pages are written by people and tools the agent should not take orders from. Pieces that do not
fit are left out (or cut, for required ones) and listed in ``omitted``; with a task, the stubs of
atomic pages the task's words do not find are the first left out, and room the research does
not use goes back to the pieces left out.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from typing import Any

from .domains.domain import later_parts, whole_text
from .domains.levels import (
    LEVELS,
    LevelBlock,
    OmittedBlock,
    check_level,
    clean_page,
    level_blocks,
    pack_blocks,
)
from .errors import BudgetError, DeepfieldError
from .fence import fence, notice
from .field import Field
from .index.keyword import content_terms
from .llm.base import ChatModel
from .manage.activation import hidden_as_superseded
from .page import INTRO_FILE
from .research import ResearchResult, research
from .research.packing import pack_research
from .search import search_fields
from .tokens import count_tokens

MIN_BUDGET = 100
RESEARCH_SHARE = 0.5
"""Share of the budget kept for research when there is a task (the rest: fixed material)."""
FENCE_TOKENS = 20
"""Cost of one ``<memory …>`` element's opening and closing lines."""


@dataclass
class ContextResult:
    field: str
    task: str
    level: str
    text: str
    budget: int
    tokens: int
    blocks: list[dict[str, Any]]
    omitted: list[OmittedBlock]
    research: ResearchResult | None
    seconds: float
    warnings: list[str] = dc_field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "field": self.field, "task": self.task, "level": self.level, "text": self.text,
            "budget": self.budget, "tokens": self.tokens, "blocks": self.blocks,
            "omitted": [o.to_json() for o in self.omitted],
            "research": self.research.to_json() if self.research else None,
            "seconds": round(self.seconds, 4), "warnings": self.warnings,
        }


def build_context(
    field: Field,
    task: str = "",
    *,
    budget: int = 2000,
    level: str = "deep",
    llm: ChatModel | None = None,
    max_rounds: int = 3,
) -> ContextResult:
    """The context block for ``task`` from ``field``; see the module docstring."""
    started = time.perf_counter()
    if not isinstance(field, Field):
        raise DeepfieldError(f"build_context needs a Field, not {type(field).__name__}",
                             "store.field(NAME) gives one")
    if not isinstance(task, str):
        raise DeepfieldError(f"the task must be text, not {type(task).__name__}")
    check_level(level)
    if budget < MIN_BUDGET:
        raise BudgetError(f"a context budget of {budget} tokens is too small",
                          f"raise --budget to at least {MIN_BUDGET} tokens")
    task = " ".join(task.split())
    opening = notice([field.name])  # fence.py: the same notice and fence on every surface
    left = budget - count_tokens(opening) - 2
    # A task of stop words alone ("do it") has nothing to research (research refuses it).
    want_research = bool(task and content_terms(task)) and level == LEVELS[-1]
    blocks, related = _by_task(_fixed_blocks(field, level), field, task)
    # Required blocks (human preferences) are packed against the whole budget; research gets
    # its share of what is left after them.
    required = sum(count_tokens(b.text) + FENCE_TOKENS for b in blocks if b.required)
    fixed_budget = left
    if want_research:
        fixed_budget = min(left, max(int(left * (1 - RESEARCH_SHARE)), required))
    kept, omitted = pack_blocks(blocks, fixed_budget, count_tokens, per_block=FENCE_TOKENS)
    parts = [opening]
    described: list[dict[str, Any]] = []
    for block in kept:
        parts.append(fence(field.name, block.filename, block.layer, block.text))
        described.append({"label": block.label, "filename": block.filename,
                          "layer": block.layer, "tokens": count_tokens(block.text)})
    found: ResearchResult | None = None
    warnings: list[str] = []
    if want_research:
        def with_research(context: str) -> str:
            return "\n\n".join([*parts, fence(field.name, "research", "research", context,
                                               task=task)]) + "\n"

        # The fence names the task, so its cost is measured, not assumed.
        room = budget - count_tokens(with_research(""))
        if room >= 50:
            found = research([field], task, llm=llm, max_rounds=max_rounds, budget=room)
            found = _fit(_without_pages(found, field.name, {b.filename for b in kept if b.whole}),
                         lambda context: count_tokens(with_research(context)) - budget)
            warnings += found.warnings
            if found.context:
                parts.append(fence(field.name, "research", "research", found.context,
                                   task=task))
                described.append({"label": "Research on the task", "filename": None,
                                  "layer": "research", "tokens": found.tokens,
                                  "sources": len(found.sources)})
        else:
            # The research block repeats the task in its fence: a task as long as the budget
            # leaves no room for what research finds, which is worth saying.
            why = ("the task itself takes the budget (shorten the task or raise --budget)"
                   if count_tokens(task) >= budget // 2 else "no budget left")
            omitted.append(OmittedBlock("Research on the task", "", why, 0))
            warnings.append(f"the research on the task was left out ({why}); the context "
                            "holds no answer to the task: raise --budget (a few hundred "
                            "tokens at least)")
    _refill(parts, described, omitted, blocks, field.name, budget, before=len(kept) + 1,
            related=related)
    if found is not None and found.context:
        trimmed = _drop_repeats(parts, described, found, blocks, field.name, task)
        if trimmed is not found:  # the room the repeats took: more blocks may come back
            found = trimmed
            _refill(parts, described, omitted, blocks, field.name, budget,
                    before=len(parts) - 1, related=related)
    if not blocks and not want_research:
        warnings.append(_nothing_to_load(field.name, level, task))
    text = "\n\n".join(parts) + "\n"
    used = count_tokens(text)
    return ContextResult(field.name, task, level, text, budget, used, described,
                         _restated(omitted, budget - used), found,
                         time.perf_counter() - started, warnings)


def _restated(omitted: list[OmittedBlock], room: int) -> list[OmittedBlock]:
    """The left-out blocks with the room the finished context leaves (``room`` tokens): their
    reasons were written at the first packing, against the fixed material's share, and were
    stale once research took less than its share and _refill put blocks back."""
    left = max(room - FENCE_TOKENS, 0)
    out = []
    for gap in omitted:
        if gap.reason.startswith("over the budget:"):
            reason = (f"over the budget: needs {gap.tokens} tokens, {left} left"
                      if gap.tokens > left else
                      f"left out: a page the task ranks higher did not fit ({left} tokens left)")
            gap = replace(gap, reason=reason)
        out.append(gap)
    return out


def _fit(found: ResearchResult, overrun: Callable[[str], int]) -> ResearchResult:
    """``found`` repacked tighter while the whole block would pass the budget: the estimate
    of joined text is not the sum of its parts' estimates, so a context packed to ``room``
    can still come out a token or two over."""
    while found.context and (over := overrun(found.context)) > 0:
        try:
            packed = found.repack(found.budget - over)
        except BudgetError:
            return replace(found, context="", evidence=[], tokens=0,
                           left_out=len(found.ranked))
        found = replace(found, context=packed.text, evidence=packed.evidence,
                        tokens=packed.tokens, left_out=packed.left_out,
                        budget=found.budget - over)
    return found


def _without_pages(found: ResearchResult, field_name: str, shown: set[str]) -> ResearchResult:
    """``found`` repacked without the evidence from pages the context already shows whole
    (basic info, taxonomy, preferences …): quoting them again spent the budget twice. Kept as
    it is when nothing else was found (an empty research block would read as "nothing")."""
    others = [e for e in found.ranked if not (e.field == field_name and e.filename in shown)]
    if len(others) == len(found.ranked) or not others:
        return found
    try:
        packed = pack_research(others, found.budget, found.summary, found.spread)
    except BudgetError:
        return found
    return replace(found, context=packed.text, evidence=packed.evidence, tokens=packed.tokens,
                   left_out=packed.left_out, ranked=others)


def _drop_repeats(parts: list[str], described: list[dict[str, Any]], found: ResearchResult,
                  blocks: list[LevelBlock], field_name: str, task: str) -> ResearchResult:
    """The research block (last in ``parts``) without the quotes from pages that _refill put
    back whole after the research ran (the taxonomy tree left out at first for want of room):
    the context held them twice. Only shrinks, so the budget still holds."""
    shown_now = {d.get("filename") for d in described}
    shown = {b.filename for b in blocks if b.whole and b.filename in shown_now}
    trimmed = _without_pages(found, field_name, shown)
    if trimmed is found:
        return found
    parts[-1] = fence(field_name, "research", "research", trimmed.context, task=task)
    for entry in described:
        if entry.get("layer") == "research":
            entry.update(tokens=trimmed.tokens, sources=len(trimmed.sources))
    return trimmed


def _nothing_to_load(field_name: str, level: str, task: str) -> str:
    """Why a context without research holds the notice alone (it said "no page" of fields
    full of pages: the levels load always-load, introduction and domain pages only)."""
    adopt = f"make the field a domain (`deepfield domain new {field_name} --adopt`)"
    if level == "light":
        return (f"{field_name} has no human preferences, basic info or taxonomy page, which is "
                "all --level light loads, so the context is the memory notice alone: use "
                "--level deep with a task, or --level medium (a line per atomic page), or "
                f"{adopt}")
    loads = (f"{field_name} has no always-load page, introduction or domain page (basic "
             "info, taxonomy, challenges, network, atomic pages)")
    if level == "medium":
        return (f"{loads}, which is all --level medium loads, so the context is the memory "
                f"notice alone: use --level deep with a task, or {adopt}")
    why = (f"the task {task!r} names nothing to research (only common words)" if task
           else "no task was given, so nothing was researched")
    return (f"{why}, and {loads}, so the context is the memory notice alone: say what the "
            "task is about")


def _by_task(blocks: list[LevelBlock], field: Field,
             task: str) -> tuple[list[LevelBlock], set[str]]:
    """``blocks`` with the atomic-page stubs that match ``task`` (keyword page search, best
    first) ahead of the others: over budget, the stubs least related to the task go first.
    Other blocks keep their places. Also the filenames of the stubs the task found."""
    stubs = [b for b in blocks if b.layer == "atomic"]
    if not task or len(stubs) < 2:
        return blocks, set()
    # Parts of split pages and pages without a stub take places in the ranking too.
    hits = search_fields([field], task, k=min(1000, 4 * len(stubs) + 20), mode="bm25",
                         sync=False, activation=False).results
    rank = {hit.filename: position for position, hit in enumerate(hits)}
    ordered = iter(sorted(stubs, key=lambda b: rank.get(b.filename, len(rank))))
    return [next(ordered) if b.layer == "atomic" else b for b in blocks], \
        {b.filename for b in stubs if b.filename in rank}


def _refill(parts: list[str], described: list[dict[str, Any]], omitted: list[OmittedBlock],
            blocks: list[LevelBlock], field_name: str, budget: int, before: int,
            related: set[str] | None = None) -> None:
    """Blocks left out for want of room, put back (before the research, at ``before``) while
    the whole context stays within ``budget``: the research may not use all its share.
    Stubs come back in task-rank order, and once a stub the task found (``related``) does
    not fit, no later stub does: a smaller one less related to the task took its place, and
    the context then held an unrelated page instead of the answer's."""
    by_key = {(b.label, b.filename): b for b in blocks if not b.required}
    order = {(b.label, b.filename): position for position, b in enumerate(blocks)}
    stubs_done = False
    for gap in sorted(omitted, key=lambda o: order.get((o.label, o.filename), len(order))):
        block = by_key.get((gap.label, gap.filename))
        if block is None or (stubs_done and block.layer == "atomic"):
            continue
        piece = fence(field_name, block.filename, block.layer, block.text)
        trial = [*parts[:before], piece, *parts[before:]]
        if count_tokens("\n\n".join(trial) + "\n") > budget:
            stubs_done = stubs_done or (block.layer == "atomic"
                                        and block.filename in (related or set()))
            continue
        parts.insert(before, piece)
        described.insert(before - 1, {"label": block.label, "filename": block.filename,
                                      "layer": block.layer, "tokens": count_tokens(block.text)})
        omitted.remove(gap)
        before += 1


def _fixed_blocks(field: Field, level: str) -> list[LevelBlock]:
    """Human preferences first, then other always-load pages, the introduction and the
    level's domain material (no repeats, nothing superseded, template comments removed)."""
    first: list[LevelBlock] = []
    always: list[LevelBlock] = []
    docs = field.pages()
    hidden = hidden_as_superseded(  # a page whose successor is gone is shown
        field.index_handle(), {doc.filename: doc.frontmatter for doc in docs})
    parts = later_parts(docs)  # a split page is loaded once, all its parts in order
    for doc in docs:
        meta = doc.frontmatter or {}
        if doc.filename in hidden or doc.filename in parts:
            continue
        preference = meta.get("role") == "human-preference"
        if not (preference or _truthy(meta.get("always_load"))):
            continue
        text = clean_page(whole_text(field.path, doc.filename))
        if text.strip():
            title = _PART_TITLE.sub("", doc.title)
            (first if preference else always).append(
                LevelBlock(title, doc.filename, text.strip(), "alignment", True))
    blocks = first + always
    intro = field.intro()
    if intro and intro.strip():
        blocks.append(LevelBlock("Introduction", INTRO_FILE, intro.strip(), "basic-context",
                                 False))
    seen = {b.filename for b in blocks}
    for block in level_blocks(field, level):
        if block.filename not in seen:
            blocks.append(block)
            seen.add(block.filename)
    return blocks


_PART_TITLE = re.compile(r" \(part \d+ of \d+\)$")


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "yes", "1")
