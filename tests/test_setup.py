"""`deepfield setup AGENT`: every agent's file, format and merge case, on temporary homes
(HOME / XDG_CONFIG_HOME / APPDATA / CODEX_HOME injected; the real home is never touched)."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from deepfield.agentsetup import AGENTS, Host, apply, get_agent, jsonc, plan_setup, snippet
from deepfield.agentsetup.agents import ZED_RULE_FILES
from deepfield.cli import app, main
from deepfield.errors import AgentSetupError

COMMAND = ["/opt/df/bin/deepfield", "mcp", "/home/me/memory"]
KEYS = {"claude-code": "mcpServers", "claude-desktop": "mcpServers", "cursor": "mcpServers",
        "vscode": "servers", "windsurf": "mcpServers", "codex": "mcp_servers",
        "gemini": "mcpServers", "zed": "context_servers", "continue": "mcpServers"}


def host(tmp_path: Path, platform: str = "linux", **env: str) -> Host:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return Host(home, env, platform)


def load(path: Path, fmt: str) -> Any:
    text = path.read_text()
    return tomllib.loads(text) if fmt == "toml" else jsonc.loads(text)


def setup(agent: str, tmp_path: Path, **options: Any) -> Any:
    h = options.pop("host", None) or host(tmp_path)
    project = options.pop("project", tmp_path / "project")
    project.mkdir(exist_ok=True)
    return apply(plan_setup(get_agent(agent), COMMAND, host=h, project=project, **options))


def backups(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.deepfield-backup-*"))


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_agent_user_scope_is_merged_idempotent_and_removable(tmp_path: Path,
                                                                    name: str) -> None:
    agent = AGENTS[name]
    assert set(KEYS) == set(AGENTS) and agent.key == KEYS[name]
    plan = setup(name, tmp_path)
    path = plan.changes[0].path
    assert str(path).startswith(str(tmp_path / "home")), path  # never the real home
    assert plan.changes[0].action == "created" and plan.changes[0].backup is None
    entry = load(path, agent.format)[agent.key]["deepfield"]
    assert entry["command"] == COMMAND[0] and entry["args"] == COMMAND[1:]
    assert entry == agent.entry(COMMAND)
    first = path.read_bytes()
    again = setup(name, tmp_path)  # idempotent: nothing written, no backup
    assert not again.changed and again.changes[0].action == "unchanged"
    assert path.read_bytes() == first and backups(path.parent) == []
    removed = setup(name, tmp_path, remove=True)
    # Setup created the file: --remove leaves none (no `{}`), and no copy of setup's own text.
    assert removed.changes[0].action == "removed" and removed.changes[0].backup is None
    assert not path.exists() and backups(path.parent) == []
    assert not setup(name, tmp_path, remove=True).changed
    # A file that was there before setup stays, with the user's text as it was.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(own := ("" if agent.format == "toml" else "{}\n"))
    setup(name, tmp_path)
    removed = setup(name, tmp_path, remove=True)
    assert removed.changes[0].backup is not None
    if agent.own_file:
        assert not path.exists()  # Continue's file holds deepfield's entry alone
    else:
        assert path.read_text() == own


@pytest.mark.parametrize("name", [n for n in sorted(AGENTS) if AGENTS[n].project])
def test_project_scope_writes_in_the_project(tmp_path: Path, name: str) -> None:
    agent = AGENTS[name]
    project = tmp_path / "repo"
    project.mkdir()
    plan = setup(name, tmp_path, scope="project", project=project)
    assert plan.changes[0].path == project / str(agent.project)
    assert load(plan.changes[0].path, agent.format)[agent.key]["deepfield"]
    state = tmp_path / "home/.local/state/deepfield"  # setup's record of what it created
    assert not (tmp_path / "home").exists() or not [
        p for p in (tmp_path / "home").rglob("*.json") if p.parent != state]


def test_paths_per_platform_follow_each_agents_rules(tmp_path: Path) -> None:
    project = tmp_path / "p"
    linux = host(tmp_path, "linux", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    home = linux.home
    expected = {
        "claude-code": home / ".claude.json",
        "claude-desktop": tmp_path / "xdg/Claude/claude_desktop_config.json",
        "cursor": home / ".cursor/mcp.json",
        "vscode": tmp_path / "xdg/Code/User/mcp.json",
        "windsurf": home / ".codeium/windsurf/mcp_config.json",
        "codex": home / ".codex/config.toml",
        "gemini": home / ".gemini/settings.json",
        "zed": tmp_path / "xdg/zed/settings.json",
        "continue": home / ".continue/mcpServers/deepfield.json",
    }
    for name, path in expected.items():
        assert AGENTS[name].config_path("user", linux, project) == path, name
    mac = host(tmp_path, "darwin")
    support = mac.home / "Library/Application Support"
    assert AGENTS["claude-desktop"].config_path("user", mac, project) == \
        support / "Claude/claude_desktop_config.json"
    assert AGENTS["vscode"].config_path("user", mac, project) == support / "Code/User/mcp.json"
    assert AGENTS["zed"].config_path("user", mac, project) == mac.home / ".config/zed/settings.json"
    win = host(tmp_path, "win32", APPDATA=str(tmp_path / "roaming"),
               CODEX_HOME=str(tmp_path / "codexhome"))
    assert AGENTS["claude-desktop"].config_path("user", win, project) == \
        tmp_path / "roaming/Claude/claude_desktop_config.json"
    assert AGENTS["zed"].config_path("user", win, project) == tmp_path / "roaming/Zed/settings.json"
    assert AGENTS["codex"].config_path("user", win, project) == tmp_path / "codexhome/config.toml"
    relative_xdg = host(tmp_path, "linux", XDG_CONFIG_HOME="not/absolute")
    assert AGENTS["zed"].config_path("user", relative_xdg, project) == \
        relative_xdg.home / ".config/zed/settings.json"  # the XDG rule: relative is ignored
    with pytest.raises(AgentSetupError, match="no project configuration"):
        AGENTS["claude-desktop"].config_path("project", linux, project)


JSONC_BEFORE = """{
\t// my editor settings
\t"theme": "One Dark", /* keep me */
\t"context_servers": {
\t\t"other": {"command": "other-mcp", "args": []}, // a trailing comma follows
\t},
}
"""


def test_jsonc_comments_trailing_commas_and_tabs_survive(tmp_path: Path) -> None:
    h = host(tmp_path, "linux")
    path = AGENTS["zed"].config_path("user", h, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(JSONC_BEFORE)
    plan = setup("zed", tmp_path, host=h)
    text = path.read_text()
    for line in ("// my editor settings", '"theme": "One Dark", /* keep me */',
                 '"other": {"command": "other-mcp", "args": []}, // a trailing comma follows'):
        assert line in text
    assert '\t\t"deepfield": {\n\t\t\t"source": "custom"' in text  # the file's own tabs
    servers = jsonc.loads(text)["context_servers"]
    assert set(servers) == {"other", "deepfield"}
    assert plan.changes[0].backup is not None
    assert plan.changes[0].backup.read_text() == JSONC_BEFORE
    setup("zed", tmp_path, host=h, remove=True)
    assert path.read_text() == JSONC_BEFORE  # removing restores the text byte for byte


def test_strict_json_keeps_other_servers_and_key_order(tmp_path: Path) -> None:
    h = host(tmp_path)
    path = h.home / ".claude.json"
    original = {"numStartups": 7, "mcpServers": {"github": {"command": "gh-mcp", "args": ["x"]}},
                "projects": {"/repo": {"allowedTools": []}}, "oauthAccount": {"id": "secret"}}
    path.write_text(json.dumps(original, indent=2) + "\n")
    os.chmod(path, 0o600)
    setup("claude-code", tmp_path, host=h)
    merged = json.loads(path.read_text())
    assert list(merged) == list(original)
    assert merged["mcpServers"]["github"] == original["mcpServers"]["github"]
    assert merged["mcpServers"]["deepfield"]["type"] == "stdio"
    assert {k: v for k, v in merged.items() if k != "mcpServers"} == \
        {k: v for k, v in original.items() if k != "mcpServers"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # a private file stays private
    # a changed command replaces the entry in place
    plan = apply(plan_setup(get_agent("claude-code"), ["/new/deepfield", "mcp", "/m"], host=h,
                            project=tmp_path))
    assert plan.changes[0].action == "updated"
    assert json.loads(path.read_text())["mcpServers"]["deepfield"]["command"] == "/new/deepfield"


def test_codex_toml_keeps_comments_and_tables(tmp_path: Path) -> None:
    h = host(tmp_path)
    path = h.home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True)
    before = ('# my codex settings\nmodel = "o4-mini"  # fast\n\n'
              '[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = ["--port", "1"]\n')
    path.write_text(before)
    setup("codex", tmp_path, host=h)
    text = path.read_text()
    assert text.startswith(before.rstrip("\n"))
    assert "[mcp_servers.deepfield]" in text and "\n[mcp_servers]\n" not in text
    parsed = tomllib.loads(text)
    assert parsed["model"] == "o4-mini" and parsed["mcp_servers"]["docs"]["command"] == "docs-mcp"
    assert parsed["mcp_servers"]["deepfield"] == {"command": COMMAND[0], "args": COMMAND[1:]}
    setup("codex", tmp_path, host=h, remove=True)
    assert tomllib.loads(path.read_text()) == tomllib.loads(before)
    assert "# my codex settings" in path.read_text() and "# fast" in path.read_text()


@pytest.mark.parametrize("text", ["{}", "{}\n", "{\n}\n"])
def test_remove_restores_an_empty_object(tmp_path: Path, text: str) -> None:
    h = host(tmp_path)
    path = AGENTS["claude-desktop"].config_path("user", h, tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    setup("claude-desktop", tmp_path, host=h)
    setup("claude-desktop", tmp_path, host=h, remove=True)
    assert path.read_text() == text.replace("{\n}", "{}")
    # beside other settings an empty servers object stays: it may have been there before
    path.write_text('{"theme": "dark", "mcpServers": {}}\n')
    setup("claude-desktop", tmp_path, host=h)
    setup("claude-desktop", tmp_path, host=h, remove=True)
    assert path.read_text() == '{"theme": "dark", "mcpServers": {}}\n'


@pytest.mark.parametrize("text", [
    "",
    "model = 'o3'\n",
    "model = 'o3'\n\n[profiles.x]\nmodel = 'a'\n",
    "[mcp_servers.docs]\ncommand = 'd'\n\n[profiles.x]\nmodel = 'a'\n",
    "[mcp_servers.docs]\ncommand = 'd'\n\n# the profile\n[profiles.x]\nmodel = 'a'\n",
])
def test_codex_table_is_set_apart_and_removed_without_a_trace(tmp_path: Path,
                                                              text: str) -> None:
    h = host(tmp_path, CODEX_HOME=str(tmp_path / "codex"))
    path = tmp_path / "codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(text)
    setup("codex", tmp_path, host=h)
    written = path.read_text()
    for line_before, line in zip(written.splitlines(), written.splitlines()[1:], strict=False):
        if line.startswith(("[", "#")) and not line_before.startswith("#"):
            assert line_before == "", written  # every table (or its comment) set apart
    setup("codex", tmp_path, host=h, remove=True)
    assert path.read_text() == text


def test_codex_entry_update_keeps_the_comment_above_the_next_table(tmp_path: Path) -> None:
    h = host(tmp_path, CODEX_HOME=str(tmp_path / "codex"))
    path = tmp_path / "codex" / "config.toml"
    path.parent.mkdir()
    path.write_text("[mcp_servers.deepfield]\ncommand = 'old'\n\n# the profile\n"
                    "[profiles.x]\nmodel = 'a'\n")
    setup("codex", tmp_path, host=h)
    text = path.read_text()
    assert text.endswith('args = ["mcp", "/home/me/memory"]\n\n# the profile\n'
                         "[profiles.x]\nmodel = 'a'\n"), text


@pytest.mark.parametrize("before", [
    'mcp_servers = { docs = { command = "docs-mcp" } }\nmodel = "o4"\n',
    'mcp_servers.docs.command = "docs-mcp"\nmodel = "o4"\n',  # dotted keys, then more keys
])
def test_codex_inline_tables_and_dotted_keys_mean_the_same_after(tmp_path: Path,
                                                                  before: str) -> None:
    h = host(tmp_path)
    path = h.home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(before)
    setup("codex", tmp_path, host=h)
    parsed = tomllib.loads(path.read_text())
    assert parsed["model"] == "o4"  # not swallowed into the new table
    assert parsed["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert parsed["mcp_servers"]["deepfield"]["command"] == COMMAND[0]
    setup("codex", tmp_path, host=h, remove=True)
    assert tomllib.loads(path.read_text()) == tomllib.loads(before)


@pytest.mark.parametrize(("name", "text", "line"), [
    ("cursor", '{\n  "mcpServers": {\n    "a": {"command": "x"}\n    "b": 1\n  }\n}\n', 4),
    ("claude-desktop", '{\n  // a comment Claude Desktop cannot read\n  "mcpServers": {}\n}\n', 2),
    ("claude-code", '{\n  "mcpServers": {},\n}\n', 2),
    ("gemini", '{\n  "mcpServers": {\n', 3),
    ("codex", 'model = "o4"\n[mcp_servers.docs\ncommand = "x"\n', 2),
])
def test_malformed_files_are_refused_with_file_and_line(tmp_path: Path, name: str, text: str,
                                                         line: int) -> None:
    h = host(tmp_path)
    path = AGENTS[name].config_path("user", h, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    with pytest.raises(AgentSetupError) as caught:
        setup(name, tmp_path, host=h)
    assert str(path) in caught.value.message and f"line {line}" in caught.value.message
    assert "nothing was changed" in caught.value.hint
    assert path.read_text() == text and backups(path.parent) == []


@pytest.mark.parametrize("text", ["[1, 2]\n", '{"mcpServers": ["not", "an object"]}\n',
                                  '{"mcpServers": {"deepfield": 3}, "x": 1}\n'])
def test_wrong_shapes_are_refused_or_replaced_only_where_ours(tmp_path: Path, text: str) -> None:
    h = host(tmp_path)
    path = h.home / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    if '"deepfield": 3' in text:  # our own entry in a strange shape is simply replaced
        setup("cursor", tmp_path, host=h)
        assert jsonc.loads(path.read_text())["x"] == 1
        return
    with pytest.raises(AgentSetupError, match="not an object"):
        setup("cursor", tmp_path, host=h)
    assert path.read_text() == text


def test_a_read_only_config_gets_a_clear_error(tmp_path: Path) -> None:
    h = host(tmp_path)
    path = h.home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"theme": "Dracula"}\n')
    os.chmod(path, 0o444)
    with pytest.raises(AgentSetupError, match="read-only"):
        setup("gemini", tmp_path, host=h)
    assert path.read_text() == '{"theme": "Dracula"}\n' and backups(path.parent) == []


def test_a_symlinked_config_stays_a_link(tmp_path: Path) -> None:
    h = host(tmp_path)
    dotfiles = tmp_path / "dotfiles" / "mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"mcpServers": {}}\n')
    link = h.home / ".cursor" / "mcp.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    setup("cursor", tmp_path, host=h)
    assert link.is_symlink() and "deepfield" in jsonc.loads(dotfiles.read_text())["mcpServers"]


def test_unknown_agent_lists_the_known_ones() -> None:
    with pytest.raises(AgentSetupError) as caught:
        get_agent("emacs")
    assert all(name in caught.value.hint for name in AGENTS)
    assert get_agent("Claude").name == "claude-code" and get_agent("copilot").name == "vscode"


def test_snippets_parse_in_their_format() -> None:
    assert json.loads(snippet(AGENTS["claude-desktop"], COMMAND))["mcpServers"]["deepfield"] == \
        {"command": COMMAND[0], "args": COMMAND[1:]}
    assert json.loads(snippet(AGENTS["vscode"], COMMAND))["servers"]["deepfield"]["type"] == "stdio"
    assert tomllib.loads(snippet(AGENTS["codex"], COMMAND))["mcp_servers"]["deepfield"][
        "args"] == COMMAND[1:]
    with pytest.raises(AgentSetupError, match="empty"):
        snippet(AGENTS["cursor"], [])


# ---------------------------------------------------------------------- instructions


def test_instruction_blocks_are_idempotent_and_removable(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    claude_md = project / "CLAUDE.md"
    claude_md.write_text("# Repo rules\n\nUse tabs.\n")
    setup("claude-code", tmp_path, scope="project", project=project, with_instructions=True)
    text = claude_md.read_text()
    assert text.startswith("# Repo rules\n\nUse tabs.\n\n<!-- deepfield:begin")
    for word in ("search", "read", "remember", "research"):
        assert f"`{word}`" in text
    plan = setup("claude-code", tmp_path, scope="project", project=project,
                 with_instructions=True)
    assert not plan.changed and text.count("deepfield:begin") == 1
    setup("claude-code", tmp_path, scope="project", project=project, with_instructions=True,
          remove=True)
    assert claude_md.read_text() == "# Repo rules\n\nUse tabs.\n"
    assert not (project / ".mcp.json").exists()  # setup made it from nothing


def test_instruction_files_per_agent(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    h = host(tmp_path)
    written = {}
    for name in ("cursor", "windsurf", "continue", "vscode", "gemini", "codex"):
        plan = setup(name, tmp_path, host=h, project=project, with_instructions=True)
        written[name] = plan.changes[1].path
    assert written["cursor"] == project / ".cursor/rules/deepfield.mdc"
    assert "alwaysApply: true" in written["cursor"].read_text()
    assert written["windsurf"].read_text().startswith("---\ntrigger: always_on\n---\n")
    assert written["continue"] == project / ".continue/rules/deepfield.md"
    assert written["vscode"] == project / ".github/copilot-instructions.md"
    assert written["gemini"] == h.home / ".gemini/GEMINI.md"  # user scope: the user's file
    assert written["codex"] == h.home / ".codex/AGENTS.md"
    removed = setup("cursor", tmp_path, host=h, project=project, with_instructions=True,
                    remove=True)
    assert not written["cursor"].exists() and removed.changes[1].backup is None  # setup's own
    assert (project / ".windsurf/rules/deepfield.md").exists()  # another agent's file stays
    with pytest.raises(AgentSetupError, match="reads no instruction file"):
        setup("claude-desktop", tmp_path, host=h, with_instructions=True)


def test_zed_adds_its_block_to_the_rules_file_it_already_reads(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    plan = setup("zed", tmp_path, project=project, with_instructions=True)
    assert plan.changes[1].path == project / "AGENTS.md"  # none yet: the shared name
    other = tmp_path / "repo2"
    other.mkdir()
    (other / "CLAUDE.md").write_text("Be brief.\n")
    assert ZED_RULE_FILES.index("CLAUDE.md") > ZED_RULE_FILES.index("AGENTS.md")
    plan = setup("zed", tmp_path, project=other, with_instructions=True)
    assert plan.changes[1].path == other / "CLAUDE.md" and not (other / "AGENTS.md").exists()


def test_remove_takes_out_only_the_block_that_agents_setup_wrote(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    h = host(tmp_path)
    setup("zed", tmp_path, host=h, project=project, with_instructions=True)  # AGENTS.md
    setup("vscode", tmp_path, host=h, project=project, with_instructions=True)
    copilot = project / ".github/copilot-instructions.md"
    vscode_text = copilot.read_text()
    # Zed now reads copilot-instructions.md first, but its block went to AGENTS.md
    removed = setup("zed", tmp_path, host=h, project=project, with_instructions=True,
                    remove=True)
    assert [c.path for c in removed.changes[1:]] == [project / "AGENTS.md"]
    assert not (project / "AGENTS.md").exists() and copilot.read_text() == vscode_text
    # Codex and Zed share AGENTS.md: one block naming both, which stays for the other
    setup("codex", tmp_path, host=h, scope="project", project=project, with_instructions=True)
    (project / ".github").rename(tmp_path / "aside")
    setup("zed", tmp_path, host=h, project=project, with_instructions=True)
    agents_md = project / "AGENTS.md"
    assert agents_md.read_text().count("deepfield:begin for=codex,zed ") == 1
    setup("codex", tmp_path, host=h, scope="project", project=project, with_instructions=True,
          remove=True)
    assert "deepfield:begin for=zed " in agents_md.read_text()
    setup("zed", tmp_path, host=h, project=project, with_instructions=True, remove=True)
    assert not agents_md.exists()


def test_a_block_from_before_agent_names_is_still_removed(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    old = ("# Notes\n\n<!-- deepfield:begin (written by `deepfield setup`; edit or remove it "
           "freely) -->\nold text\n<!-- deepfield:end -->\n")
    (project / "CLAUDE.md").write_text(old)
    (project / "GEMINI.md").write_text(old)
    setup("claude-code", tmp_path, scope="project", project=project, with_instructions=True,
          remove=True)
    assert (project / "CLAUDE.md").read_text() == "# Notes\n"
    # Zed takes an unnamed block only out of the file it reads, not out of every rules file
    setup("zed", tmp_path, project=project, with_instructions=True, remove=True)
    assert (project / "GEMINI.md").read_text() == old


def test_an_unclosed_block_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    (project / "AGENTS.md").write_text("intro\n<!-- deepfield:begin -->\nhalf a block\n")
    with pytest.raises(AgentSetupError, match="line 2"):
        setup("codex", tmp_path, scope="project", project=project, with_instructions=True)
    assert not (project / ".codex").exists()  # nothing at all was written


# ---------------------------------------------------------------------- CLI


def test_cli_dry_run_print_list_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for key, value in (("HOME", home), ("XDG_CONFIG_HOME", tmp_path / "xdg"),
                       ("APPDATA", tmp_path / "appdata"), ("CODEX_HOME", tmp_path / "codex")):
        monkeypatch.setenv(key, str(value))
    runner = CliRunner()
    store = tmp_path / "memory"

    def run(*args: str) -> Any:
        return runner.invoke(app, ["--store", str(store), "setup", *args])

    dry = run("cursor", "--dry-run")
    assert dry.exit_code == 0 and "would be created" in dry.output and '+    "deepfield"' in \
        dry.output and not (home / ".cursor").exists()
    assert "no store" in dry.stderr
    printed = run("codex", "--print")
    entry = tomllib.loads(printed.stdout)["mcp_servers"]["deepfield"]
    assert entry["args"][-2:] == ["mcp", str(store.resolve())]
    assert Path(entry["command"]).is_absolute()  # agents started from a desktop lack PATH
    done = runner.invoke(app, ["--store", str(store), "setup", "gemini", "--json"])
    report = json.loads(done.stdout)
    assert report["files"][0]["action"] == "created" and report["scope"] == "user"
    assert (home / ".gemini/settings.json").is_file()
    listed = json.loads(run("--list", "--json").stdout)
    assert {row["agent"] for row in listed["agents"]} == set(AGENTS)
    bad = tmp_path / "codex" / "config.toml"
    bad.parent.mkdir(parents=True)
    bad.write_text("[broken\n")
    for args, line in ((["emacs"], "error: unknown agent 'emacs' (known agents: claude-code, "),
                       (["codex"], f"error: {bad} is not valid TOML at line 1"),
                       ([], "error: name the agent to set up (known agents: claude-code")):
        with pytest.raises(SystemExit) as exited:
            main(["--store", str(store), "setup", *args])
        assert exited.value.code == 1
        assert "\n" + line in "\n" + capsys.readouterr().err
    assert bad.read_text() == "[broken\n"


def test_cli_keeps_an_agent_on_its_store_when_the_default_has_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DEEPFIELD_STORE", raising=False)
    monkeypatch.chdir(project)
    runner = CliRunner()
    store = tmp_path / "memory"
    assert runner.invoke(app, ["--embedder", "none", "init", str(store)]).exit_code == 0
    assert runner.invoke(app, ["--store", str(store), "setup", "claude-code"]).exit_code == 0
    config = home / ".claude.json"
    written = config.read_text()
    with pytest.raises(SystemExit) as exited:  # again for --instructions, without --store
        main(["setup", "claude-code", "--instructions"])
    assert exited.value.code == 1 and config.read_text() == written
    assert not (home / ".claude" / "CLAUDE.md").exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"opens the store {store}, and there is no store at " \
        f"{project / 'memory'} (pass --store {store} to keep it" in err
    # A store named on purpose may be made later: the entry moves, with a warning
    moved = runner.invoke(app, ["--store", str(tmp_path / "new"), "setup", "claude-code"])
    assert moved.exit_code == 0 and "no store" in moved.stderr
    assert json.loads(config.read_text())["mcpServers"]["deepfield"]["args"][-1] == \
        str(tmp_path / "new")
    # ... and then nothing is left to keep: ./memory (not made yet either) is accepted
    assert runner.invoke(app, ["setup", "claude-code"]).exit_code == 0


@pytest.mark.parametrize("name", ["", "my server", "a.b", "ü", "x/y"])
def test_server_names_every_agent_accepts(tmp_path: Path, name: str) -> None:
    for agent in ("codex", "cursor"):
        with pytest.raises(AgentSetupError, match="invalid server name"):
            setup(agent, tmp_path, server=name)
        with pytest.raises(AgentSetupError, match="invalid server name"):
            snippet(AGENTS[agent], COMMAND, name)
    assert not (tmp_path / "home" / ".codex").exists()
    setup("cursor", tmp_path, server="my_memory-2")
    # --remove still takes out a name an older setup wrote
    path = tmp_path / "home" / ".cursor" / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {name: {"command": "x"}, "other": {}}}))
    setup("cursor", tmp_path, server=name, remove=True)
    assert json.loads(path.read_text()) == {"mcpServers": {"other": {}}}


# ---------------------------------------------------------------------- the JSONC editor

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(document=st.dictionaries(st.text(max_size=6), values, max_size=5),
       indent=st.sampled_from([None, 2, 4, "\t"]),
       servers=st.dictionaries(st.text(max_size=6), values, max_size=3))
def test_jsonc_set_and_remove_touch_nothing_else(document: dict[str, Any], indent: Any,
                                                 servers: dict[str, Any]) -> None:
    document = {**document, "mcpServers": {k: v for k, v in servers.items() if k != "deepfield"}}
    text = json.dumps(document, indent=indent)
    entry = {"command": "deepfield", "args": ["mcp", "/m"]}
    edited = jsonc.set_value(text, ["mcpServers", "deepfield"], entry, strict=True)
    parsed = json.loads(edited)  # still strict JSON
    assert parsed["mcpServers"]["deepfield"] == entry
    assert {k: v for k, v in parsed.items() if k != "mcpServers"} == \
        {k: v for k, v in document.items() if k != "mcpServers"}
    back = jsonc.remove_value(edited, ["mcpServers", "deepfield"], strict=True)
    assert json.loads(back) == document


def test_update_keeps_what_the_user_added_to_the_entry(tmp_path: Path) -> None:
    # An API key in the entry's env (the openai embedder needs one), a timeout: a new store
    # path used to replace the whole entry and drop them.
    h = host(tmp_path)
    path = h.home / ".claude.json"
    path.write_text(json.dumps({"mcpServers": {"deepfield": {
        "type": "stdio", "command": "/old/deepfield", "args": ["mcp", "/old/store"],
        "env": {"OPENAI_API_KEY": "sk-mine"}, "timeout": 60000}}}, indent=2))
    plan = setup("claude-code", tmp_path, host=h)
    entry = load(path, "json")["mcpServers"]["deepfield"]
    assert entry["args"] == COMMAND[1:] and entry["command"] == COMMAND[0]
    assert entry["env"] == {"OPENAI_API_KEY": "sk-mine"} and entry["timeout"] == 60000
    assert plan.entry == entry  # --json reports what was written
    assert not setup("claude-code", tmp_path, host=h).changed  # and again: nothing to do
    # An entry that reached a server over HTTP is replaced whole (its url would not fit).
    path.write_text(json.dumps({"mcpServers": {"deepfield": {"type": "http",
                                                             "url": "http://x/mcp"}}}))
    setup("claude-code", tmp_path, host=h)
    assert load(path, "json")["mcpServers"]["deepfield"] == AGENTS["claude-code"].entry(COMMAND)


CODEX_WITH_ENV = ('model = "o3"\n\n[mcp_servers.deepfield]\ncommand = "old"\n'
                  'args = ["mcp", "/old"]\nstartup_timeout_sec = 30\n\n'
                  '[mcp_servers.deepfield.env]\nFOO = "1"\n\n[profiles.x]\nmodel = "a"\n')


def test_codex_update_keeps_the_entrys_env_table_and_remove_takes_it_out(
        tmp_path: Path) -> None:
    h = host(tmp_path)
    path = h.home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(CODEX_WITH_ENV)
    setup("codex", tmp_path, host=h)
    assert path.read_text() == CODEX_WITH_ENV.replace('"old"', f'"{COMMAND[0]}"').replace(
        '["mcp", "/old"]', '["mcp", "/home/me/memory"]')
    # --remove used to cut [mcp_servers.deepfield] and leave [mcp_servers.deepfield.env]:
    # an entry without a command, which Codex refuses to start with.
    setup("codex", tmp_path, host=h, remove=True)
    assert tomllib.loads(path.read_text()) == {"model": "o3", "profiles": {"x": {"model": "a"}}}


def test_cli_carries_the_embedder_into_the_agents_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `deepfield --embedder none setup …` (or $DEEPFIELD_EMBEDDER, which an agent started
    # from a desktop lacks) used to be dropped: the agent's server built the store's own.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = tmp_path / "memory"
    runner = CliRunner()
    assert runner.invoke(app, ["--embedder", "none", "init", str(store)]).exit_code == 0
    printed = runner.invoke(app, ["--store", str(store), "--embedder", "none", "setup",
                                  "codex", "--print"])
    entry = tomllib.loads(printed.stdout)["mcp_servers"]["deepfield"]
    assert entry["args"] == ["--embedder", "none", "mcp", str(store.resolve())]
    monkeypatch.setenv("DEEPFIELD_EMBEDDER", "none")
    monkeypatch.setenv("DEEPFIELD_EMBED_URL", "http://127.0.0.1:9/v1")
    done = runner.invoke(app, ["--store", str(store), "setup", "cursor"])
    assert done.exit_code == 0 and "DEEPFIELD_EMBED_*" in done.stderr
    written = json.loads((tmp_path / "home" / ".cursor" / "mcp.json").read_text())
    assert written["mcpServers"]["deepfield"]["args"][:3] == ["--embedder", "none", "mcp"]


def test_codex_file_with_windows_line_endings_keeps_them(tmp_path: Path) -> None:
    # The table setup added came with `\n` endings into a `\r\n` file (JSON files kept theirs).
    h = host(tmp_path)
    path = h.home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True)
    before = b'model = "o3"\r\n\r\n[mcp_servers.other]\r\ncommand = "x"\r\n'
    path.write_bytes(before)
    setup("codex", tmp_path, host=h)
    data = path.read_bytes()
    assert b"[mcp_servers.deepfield]\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n"), data
    setup("codex", tmp_path, host=h, remove=True)
    assert path.read_bytes() == before


def test_instruction_block_in_a_file_with_windows_line_endings_keeps_them(
        tmp_path: Path) -> None:
    h = host(tmp_path)
    path = h.home / ".claude" / "CLAUDE.md"
    path.parent.mkdir(parents=True)
    before = b"# Rules\r\n\r\nBe terse.\r\n"
    path.write_bytes(before)
    setup("claude-code", tmp_path, host=h, with_instructions=True)
    data = path.read_bytes()
    assert b"deepfield:begin" in data and data.count(b"\n") == data.count(b"\r\n"), data
    assert not setup("claude-code", tmp_path, host=h, with_instructions=True).changed
    setup("claude-code", tmp_path, host=h, with_instructions=True, remove=True)
    assert path.read_bytes() == before


def test_cli_refuses_a_project_folder_that_does_not_exist(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A mistyped --dir used to be created, with .cursor/mcp.json in it.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = tmp_path / "memory"
    runner = CliRunner()
    assert runner.invoke(app, ["--embedder", "none", "init", str(store)]).exit_code == 0
    typo = tmp_path / "projcts" / "app"
    done = runner.invoke(app, ["--store", str(store), "setup", "cursor", "--scope", "project",
                               "--dir", str(typo)])
    assert done.exit_code == 2 and "does not exist" in done.stderr
    assert not (tmp_path / "projcts").exists()


def test_codex_servers_as_an_array_of_tables_is_refused_in_plain_words(tmp_path: Path) -> None:
    h = host(tmp_path)
    path = h.home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[[mcp_servers]]\nname = "x"\n')
    with pytest.raises(AgentSetupError, match=r"mcp_servers is a TOML array of tables \(\[\["):
        setup("codex", tmp_path, host=h)  # it used to say "a TOML AoT", tomlkit's class name
    assert path.read_text() == '[[mcp_servers]]\nname = "x"\n'


def test_zed_servers_object_holding_only_a_comment_is_restored_byte_for_byte(
        tmp_path: Path) -> None:
    # The entry went in above the comment with a line of blanks between them, and --remove
    # left that line behind.
    h = host(tmp_path)
    path = h.home / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True)
    before = '{\n  "theme": "One Dark",\n  "context_servers": {\n    // none yet\n  },\n}\n'
    path.write_text(before)
    setup("zed", tmp_path, host=h)
    written = path.read_text()
    assert all(line.strip() for line in written.splitlines()), written
    assert "    }\n    // none yet\n  },\n" in written
    setup("zed", tmp_path, host=h, remove=True)
    assert path.read_text() == before


class _CountingText(str):
    """A text that counts the characters its ``find`` calls look through."""

    scanned = 0

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        found = super().find(sub, start, end)
        _CountingText.scanned += (found if found >= 0 else len(self)) - (start or 0)
        return found


def test_a_large_json_file_is_read_in_one_pass() -> None:
    # Every string looked for a backslash to the end of the file: a 5 MB ~/.claude.json
    # (Claude Code keeps its history there) took 20 seconds to set up.
    text = _CountingText(json.dumps({"projects": {f"/p/{i}": {"history": "x" * 50}
                                                  for i in range(2000)}}))
    _CountingText.scanned = 0
    assert len(jsonc.loads(text, strict=True)["projects"]) == 2000
    assert _CountingText.scanned <= 2 * len(text), (_CountingText.scanned, len(text))
