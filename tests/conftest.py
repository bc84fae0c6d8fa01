"""Shared fixtures: a temp store on the fake embedder, a keyword-only store, a CLI runner.

Everything uses real files and real SQLite; nothing is mocked below the embedder.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import deepfield
from deepfield.cli import app, main
from deepfield.config import EmbeddingConfig

from .fake_openai import openai_server  # noqa: F401 (the shared fixture)
from .fakes import FakeEmbedder, register

register()

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the user's environment, cache or store."""
    for key in list(os.environ):
        if key.startswith("DEEPFIELD_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def store(tmp_path: Path, embedder: FakeEmbedder) -> Iterator[deepfield.Store]:
    deepfield.init(tmp_path / "store", EmbeddingConfig("fake"))
    opened = deepfield.open(tmp_path / "store", embedder=embedder)
    yield opened
    opened.close()


@pytest.fixture
def field(store: deepfield.Store) -> deepfield.Field:
    return store.create_field("notes")


@pytest.fixture
def keyword_store(tmp_path: Path) -> Iterator[deepfield.Store]:
    deepfield.init(tmp_path / "kstore", EmbeddingConfig("none"))
    opened = deepfield.open(tmp_path / "kstore")
    yield opened
    opened.close()


class Cli:
    """Runs the real click app in-process against one store folder."""

    def __init__(self, store_path: Path) -> None:
        self.store_path = store_path
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | bytes | None = None) -> Result:
        return self.runner.invoke(
            app, ["--store", str(self.store_path), *args], input=input, catch_exceptions=False
        )

    def json(self, *args: str, input: str | bytes | None = None) -> Any:
        result = self(*args, "--json", input=input)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """CLI on a store that uses the fake embedder."""
    path = tmp_path / "clistore"
    deepfield.init(path, EmbeddingConfig("fake"))
    return Cli(path)


def run_deepfield(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    """The installed console script in a real subprocess (for exit codes and stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "deepfield", *args], cwd=cwd, env={**os.environ, **(env or {})},
        input=input, capture_output=True, timeout=timeout, check=False,
    )


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str


class MainCli:
    """The real entry point (``deepfield.cli.main``: one-line errors, exit codes) in-process."""

    def __init__(self, store: Path | str, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.store, self.capsys, self.monkeypatch = store, capsys, monkeypatch

    def __call__(self, *args: str, input: str | None = None) -> Ran:
        self.capsys.readouterr()
        if input is not None:
            self.monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(input.encode())))
        try:
            main(["--store", str(self.store), *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = self.capsys.readouterr()
        return Ran(code, out.out, out.err)
