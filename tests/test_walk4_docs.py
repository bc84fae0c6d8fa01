"""Defects found by running the docs' examples as a new user (walk 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from deepfield.cli import app
from deepfield.memo import topic_terms_of
from deepfield.salience import key_terms
from deepfield.sessions import parse_session


def _init(*args: str) -> str:
    result = CliRunner().invoke(app, [*args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_init_elsewhere_suggests_next_steps_with_that_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `deepfield init DIR` said "next: `deepfield new FIELD`", which writes into ./memory.
    monkeypatch.chdir(tmp_path)
    out = _init("--embedder", "none", "init", "notes")
    assert "`deepfield --store notes new FIELD`" in out
    assert "`deepfield --store notes add FIELD --title T TEXT`" in out
    out = _init("--embedder", "none", "--store", "my store", "init")
    assert "`deepfield --store 'my store' new FIELD`" in out


def test_init_of_the_default_store_suggests_bare_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert "next: `deepfield new FIELD`" in _init("--embedder", "none", "init")
    assert "next: `deepfield new FIELD`" in _init("--store", "./memory", "init")
    monkeypatch.setenv("DEEPFIELD_STORE", str(tmp_path / "elsewhere"))
    assert "next: `deepfield new FIELD`" in _init("--embedder", "none", "init")


def test_contractions_are_no_topic_terms() -> None:
    # docs/MCP.md's remember example ("noted, I'll order a damper") got "i'll" as a topic term,
    # which then went into the query for related pages.
    session = parse_session("user: the plot 3 pump rattles again\n"
                            "assistant: noted, I'll order a damper. We'll see, don't worry.\n")
    terms = topic_terms_of(session)
    assert "rattles" in terms
    assert not {"i'll", "we'll", "don't"} & set(terms)
    assert not {"i'll", "we'll", "don't", "didn't"} & set(
        key_terms(["I'll go, we'll stay, I didn't know, don't ask; solder solder"]))
