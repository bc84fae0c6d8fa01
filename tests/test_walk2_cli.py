"""The CLI as a new user meets it: options honoured in every mode, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import Cli, MainCli


def _superseded_pair(cli: Cli) -> None:
    cli("new", "notes")
    cli("add", "notes", "--title", "Wok old", "the wok recipe, first version")
    cli("add", "notes", "--title", "Wok new", "the wok recipe, second version")
    assert cli("supersede", "notes", "wok-old", "wok-new").exit_code == 0


def test_batch_search_honours_include_superseded(cli: Cli, tmp_path: Path) -> None:
    _superseded_pair(cli)
    batch = tmp_path / "q.txt"
    batch.write_text("wok recipe\n")
    hidden = json.loads(cli("search", "--batch", str(batch)).stdout)
    assert [r["filename"] for r in hidden["results"]] == ["wok-new.md"]
    shown = json.loads(cli("search", "--batch", str(batch), "--include-superseded").stdout)
    assert sorted(r["filename"] for r in shown["results"]) == ["wok-new.md", "wok-old.md"]


def test_batch_line_with_an_unknown_key_is_an_error_line(cli: Cli, tmp_path: Path) -> None:
    _superseded_pair(cli)
    batch = tmp_path / "q.jsonl"
    batch.write_text('{"id": 7, "query": "wok", "field": "elsewhere"}\n{"query": "wok"}\n')
    lines = [json.loads(line) for line in cli("search", "--batch", str(batch)).stdout.splitlines()]
    assert lines[0]["id"] == 7 and "unknown key \"field\"" in lines[0]["error"]
    assert lines[1]["count"] == 1


def test_a_mistyped_command_names_the_likely_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran = MainCli(tmp_path / "s", capsys, monkeypatch)("serch", "wok")
    assert ran.exit_code == 2 and "Did you mean 'search'?" in ran.stderr
    assert ran.stderr.count("\n") == 1


def test_a_trailing_store_without_a_value_says_it_needs_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran = MainCli(tmp_path / "s", capsys, monkeypatch)("ls", "notes", "--store")
    assert ran.exit_code == 2
    assert "'--store' requires an argument" in ran.stderr and "No such option" not in ran.stderr
