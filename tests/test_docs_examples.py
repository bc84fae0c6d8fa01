"""The docs' examples run: every ```python block of README.md and docs/API.md, in order, in a
temporary store on the shared fake embedder, and every ``deepfield <command> --option`` that
README.md or docs/*.md names is an option the CLI has.

A block that cannot run offline carries ``<!-- docs-test: skip (why) -->`` on the line above its
fence; the tests count those, so a newly skipped block changes a number here and is seen.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

import deepfield
from deepfield import store_openers
from deepfield.cli import app
from deepfield.config import EmbeddingConfig
from deepfield.embed import base as embed_base

REPO = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\b[^>]*-->")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")


@dataclass
class Block:
    """One fenced block of a Markdown file: its language, text, first line and skip mark."""

    lang: str
    text: str
    line: int
    skipped: bool


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order (a fence closes with the same marker)."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        marker, lang, start = opened.group(2), opened.group(3).lower(), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(marker):
            body.append(lines[i])
            i += 1
        above = next((line for line in reversed(lines[:start]) if line.strip()), "")
        blocks.append(Block(lang, "\n".join(body) + "\n", start + 1, bool(SKIP.search(above))))
        i += 1
    return blocks


def python_blocks(path: Path) -> list[Block]:
    return [block for block in fenced_blocks(path) if block.lang in ("python", "py")]


# --- the Python examples ---------------------------------------------------------------------

LOCOMO_CONV = [{
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        **{f"session_{n}_date_time": f"1:00 pm on {n} May, 2023" for n in (1, 2, 3)},
        **{f"session_{n}": [
            {"speaker": "Ana", "dia_id": f"D{n}:1", "text": f"I fixed the boiler on day {n}."},
            {"speaker": "Ben", "dia_id": f"D{n}:2", "text": "Good, the radiators are warm."},
        ] for n in (1, 2, 3)},
    },
}]


def _files_the_examples_name(root: Path, home: Path) -> None:
    """The inputs the examples read (chat.jsonl, conv.json, ~/Vault, docs/)."""
    (root / "chat.jsonl").write_text("\n".join(json.dumps(m) for m in [
        {"role": "user", "content": "Ana fixed the boiler on Monday."},
        {"role": "assistant", "content": "Noted: the boiler was fixed on Monday."},
    ]) + "\n", encoding="utf-8")
    (root / "conv.json").write_text(json.dumps(LOCOMO_CONV), encoding="utf-8")
    (home / "Vault").mkdir(parents=True)
    (home / "Vault" / "Boiler.md").write_text("# Boiler\n\nAna fixed it. See [[Radiators]].\n",
                                              encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n\nHow the heating works.\n",
                                            encoding="utf-8")


@pytest.fixture
def docs_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the examples take as given: ``store`` (./memory on the fake embedder), ``field``
    (its ``notes`` field, holding a page), a field ``ops``, ``raw_text`` and ``Path``."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    _files_the_examples_name(tmp_path, home)
    deepfield.init(tmp_path / "memory", EmbeddingConfig("fake"))
    store = deepfield.open(tmp_path / "memory")
    field = store.create_field("notes")
    field.add("Carbon fibre woks", "Carbon fibre woks heat unevenly.", summary="Wok notes.")
    store.create_field("ops").add("Boiler", "Ana fixed the boiler on Monday.")
    # An example registers an embedder of its own: leave the registry as it was.
    monkeypatch.setattr(embed_base, "_registered", dict(embed_base._registered))
    # ... and a store opener (``mine://``): leave that registry as it was too.
    monkeypatch.setattr(store_openers, "_registered", dict(store_openers._registered))
    return {"store": store, "field": field, "raw_text": "Ana: the boiler is fixed.",
            "Path": Path, "__name__": "docs_example"}


def _run_blocks(path: Path, namespace: dict[str, Any]) -> tuple[int, int]:
    ran = skipped = 0
    for block in python_blocks(path):
        if block.skipped:
            skipped += 1
            continue
        code = compile(block.text, f"{path.name}:{block.line}", "exec")
        try:
            exec(code, namespace)  # the docs are this repository's own text
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(
                f"{path.name} block at line {block.line} fails: {type(exc).__name__}: {exc}"
            ) from exc
        ran += 1
    return ran, skipped


def test_readme_python_runs(docs_namespace: dict[str, Any]) -> None:
    assert _run_blocks(REPO / "README.md", docs_namespace) == (1, 0)


def test_api_python_blocks_run_in_order(docs_namespace: dict[str, Any]) -> None:
    ran, skipped = _run_blocks(REPO / "docs" / "API.md", docs_namespace)
    # Ran includes the custom StoreOpener example. Skipped: open/init over an endpoint and a
    # bucket, a signature, remote fields, Claude's client. Change these numbers only with a
    # skip mark that says why.
    assert (ran, skipped) == (8, 4)


def test_skip_marks_are_counted(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("<!-- docs-test: skip (needs a bucket) -->\n```python\nboom()\n```\n\n"
                   "```python\nx = 1\n```\n", encoding="utf-8")
    assert _run_blocks(doc, {}) == (1, 1)


# --- the CLI options the docs name -----------------------------------------------------------

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL = {"", "bash", "sh", "shell", "console", "zsh"}
COMMAND_LINE = re.compile(r"(?:^|[;&|(]\s*|\$\s+)(deepfield\s[^;&|#`)]*)")


def _command_lines(path: Path) -> list[str]:
    """``deepfield …`` invocations: in shell blocks and in inline code spans."""
    found: list[str] = []
    for block in fenced_blocks(path):
        if block.lang in SHELL:
            for line in block.text.replace("\\\n", " ").splitlines():
                found.extend(COMMAND_LINE.findall(line.strip()))
    prose = re.sub(r"^(\s*)(```+|~~~+).*?^\1\2", "", path.read_text(encoding="utf-8"),
                   flags=re.S | re.M)
    found.extend(re.findall(r"`(deepfield\s[^`]*)`", prose))
    return found


def _option_names(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def _check(line: str) -> list[str]:
    """What ``line`` names that the CLI lacks: an unknown command or option."""
    tokens = line.split()[1:]
    command: click.Command = app
    problems: list[str] = []
    options: list[str] = []
    known = _option_names(app) | {"--help"}
    expect_value = False
    for token in tokens:
        if token.startswith("--"):
            options.append(token.split("=")[0])
            expect_value = token == "--store"
            continue
        if expect_value:
            expect_value = False
            continue
        if isinstance(command, click.Group):
            sub = command.get_command(click.Context(command), token)
            if sub is None and command is app and re.fullmatch(r"[a-z][a-z-]*", token):
                problems.append(f"no command {token!r}")
                break
            if sub is not None:
                command = sub
                known |= _option_names(sub)
    problems += [f"no option {opt}" for opt in options
                 if re.fullmatch(r"--[a-z0-9][a-z0-9-]*", opt) and opt not in known]
    return problems


def test_every_documented_option_exists() -> None:
    checked, wrong = 0, []
    for doc in DOCS:
        for line in _command_lines(doc):
            checked += 1
            wrong += [f"{doc.name}: `{line.strip()}`: {p}" for p in _check(line)]
    assert checked > 80  # the extraction still finds the docs' command lines
    assert not wrong, "\n".join(wrong)


def test_the_option_check_catches_a_wrong_one() -> None:
    assert _check("deepfield search wok --mode bm25 --json") == []
    assert _check("deepfield --store memory domain add x --kind method") == []
    assert _check("deepfield search wok --colour red") == ["no option --colour"]
    assert _check("deepfield serach wok") == ["no command 'serach'"]


# --- the Python names the docs give ----------------------------------------------------------

NOT_PYTHON = {"deepfield.toml", "deepfield.embedders", "deepfield.llms"}
"""Dotted names in the docs that are no module or attribute: the store's configuration file
and the entry-point groups."""


def _resolves(ref: str) -> bool:
    parts = ref.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_documented_python_name_exists() -> None:
    wrong = sorted({f"{doc.name}: {ref}" for doc in DOCS
                    for ref in re.findall(r"`(deepfield(?:\.[A-Za-z_]\w*)+)",
                                          doc.read_text(encoding="utf-8"))
                    if ref not in NOT_PYTHON and not _resolves(ref)})
    assert not wrong, "\n".join(wrong)
    assert not _resolves("deepfield.search.NO_SUCH_NAME")


def test_every_environment_variable_read_is_documented() -> None:
    docs = "\n".join(doc.read_text(encoding="utf-8") for doc in DOCS)
    read = {name for path in (REPO / "src" / "deepfield").rglob("*.py")
            for name in re.findall(r"[\"'](DEEPFIELD_[A-Z0-9_]*[A-Z0-9])[\"']",
                                   path.read_text(encoding="utf-8"))}
    assert "DEEPFIELD_STORE" in read
    assert not sorted(name for name in read if name not in docs)
