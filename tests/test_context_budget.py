"""The context builder at small budgets and on fields with little to load: what it keeps,
and that it says what it left out."""

from __future__ import annotations

import deepfield
from deepfield.context import build_context

from .conftest import Cli

GARDEN = ("Lena planted three apple trees in the garden last Saturday, Boskoop from the "
          "nursery in Celle, and she will water the apple trees every morning this summer "
          "while her neighbour Jonas, who lent her the spade and the wheelbarrow, looks after "
          "the roses along the fence behind the shed.")


def _ops(store: deepfield.Store) -> deepfield.Field:
    field = store.create_field("ops")
    field.add("Garden chat", GARDEN, summary=GARDEN, frontmatter={"kind": "blog"})
    for name in ("Tom", "Ute", "Max"):
        field.add(f"{name} moved", f"{name} moved to Berlin.", summary=f"{name} moved.",
                  frontmatter={"kind": "blog"})
    return field


def test_a_small_budget_puts_back_no_stub_less_related_than_one_left_out(
        keyword_store: deepfield.Store) -> None:
    field = _ops(keyword_store)
    result = build_context(field, "When did Lena plant the apple trees?", budget=100)
    assert result.tokens <= 100
    kept = [b["filename"] for b in result.blocks]
    # The answer's stub does not fit: no unrelated one takes its place
    assert "garden-chat.md" not in kept and kept == [], kept
    assert any("research on the task was left out" in w for w in result.warnings)
    roomy = build_context(field, "When did Lena plant the apple trees?", budget=2000)
    assert not any("left out" in w for w in roomy.warnings)
    assert "Boskoop" in roomy.text


def test_light_context_of_a_plain_field_says_it_has_nothing_to_load(
        keyword_store: deepfield.Store) -> None:
    field = _ops(keyword_store)
    light = build_context(field, level="light", budget=300)
    assert light.blocks == []
    assert any("--level medium" in w and "domain new ops" in w for w in light.warnings)
    assert build_context(field, level="medium", budget=300).warnings == []


def test_cli_context_says_what_the_research_found(cli: Cli) -> None:
    cli("new", "ops")
    cli("add", "ops", "--title", "Boiler log", "The boiler failed on 3 June.")
    out = cli("context", "What is Zoe's favourite colour?", "--field", "ops", "--budget", "300")
    assert out.exit_code == 0 and "— research: none — " in out.stderr
    found = cli("context", "When did the boiler fail?", "--field", "ops", "--budget", "300")
    assert "— research: " in found.stderr and "3 June" in found.stdout
