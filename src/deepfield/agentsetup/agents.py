"""The agents ``deepfield setup`` knows: where each keeps its MCP servers, in what shape, and
which instruction file it reads.

Every path and key below was looked up in the agent's own documentation or source (the
``source`` of each entry); none is guessed. Paths are computed from a :class:`Host` (home,
environment, platform) so tests run on a temporary home and never touch the real one.

- claude-code: ~/.claude.json (user), .mcp.json (project); ``mcpServers``
- claude-desktop: <app config>/Claude/claude_desktop_config.json (user); ``mcpServers``
- cursor: ~/.cursor/mcp.json, .cursor/mcp.json; ``mcpServers``
- vscode: <app config>/Code/User/mcp.json, .vscode/mcp.json; ``servers``
- windsurf: ~/.codeium/windsurf/mcp_config.json (user); ``mcpServers``
- codex: $CODEX_HOME/config.toml (default ~/.codex), .codex/config.toml; ``[mcp_servers]``
- gemini: ~/.gemini/settings.json, .gemini/settings.json; ``mcpServers``
- zed: <zed config>/settings.json, .zed/settings.json; ``context_servers``
- continue: ~/.continue/mcpServers/deepfield.json, .continue/mcpServers/deepfield.json
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AgentSetupError

USER = "user"
PROJECT = "project"


@dataclass(frozen=True)
class Host:
    """Where a user's configuration lives: the home folder, the environment and the platform
    (``sys.platform``: linux, darwin, win32). Injected, so tests use a temporary home."""

    home: Path
    env: Mapping[str, str]
    platform: str

    @classmethod
    def current(cls) -> Host:
        env = dict(os.environ)
        home = env.get("USERPROFILE" if sys.platform == "win32" else "HOME")
        return cls(Path(home) if home else Path.home(), env, sys.platform)

    def _dir_from_env(self, name: str) -> Path | None:
        value = self.env.get(name, "")
        return Path(value) if value and Path(value).is_absolute() else None

    def xdg_config(self) -> Path:
        """$XDG_CONFIG_HOME, else ~/.config (the XDG rule: a relative value is ignored)."""
        return self._dir_from_env("XDG_CONFIG_HOME") or self.home / ".config"

    def appdata(self) -> Path:
        """%APPDATA% on Windows (roaming), else its usual place under the home folder."""
        return self._dir_from_env("APPDATA") or self.home / "AppData" / "Roaming"

    def app_config(self) -> Path:
        """Where desktop (Electron) apps keep per-user settings on this platform."""
        if self.platform == "win32":
            return self.appdata()
        if self.platform == "darwin":
            return self.home / "Library" / "Application Support"
        return self.xdg_config()


def stdio_entry(command: list[str]) -> dict[str, Any]:
    """The ``{"command", "args"}`` object most agents share (Claude Desktop's format)."""
    return {"command": command[0], "args": command[1:]}


def _claude_code(command: list[str]) -> dict[str, Any]:
    # What `claude mcp add` itself writes for a stdio server.
    return {"type": "stdio", **stdio_entry(command), "env": {}}


def _vscode(command: list[str]) -> dict[str, Any]:
    return {"type": "stdio", **stdio_entry(command)}


def _zed(command: list[str]) -> dict[str, Any]:
    # Earlier Zed releases required "source": "custom" (a tagged enum); current ones read the
    # same object untagged and ignore the key, so writing it serves both. "args" is required.
    return {"source": "custom", **stdio_entry(command), "env": {}}


def _codex_home(host: Host) -> Path:
    return host._dir_from_env("CODEX_HOME") or host.home / ".codex"


def _zed_config(host: Host) -> Path:
    if host.platform == "win32":
        return host.appdata() / "Zed"
    if host.platform == "darwin":
        return host.home / ".config" / "zed"
    return (host._dir_from_env("FLATPAK_XDG_CONFIG_HOME") or host.xdg_config()) / "zed"


ZED_RULE_FILES = (".rules", ".cursorrules", ".windsurfrules", ".clinerules",
                  ".github/copilot-instructions.md", "AGENT.md", "AGENTS.md", "CLAUDE.md",
                  "GEMINI.md")
"""Zed reads the first of these that exists at the project root (zed.dev/docs/ai/rules)."""


def _zed_rules(project: Path) -> Path:
    # Writing .rules beside an existing AGENTS.md would hide AGENTS.md from Zed: add the block
    # to the file Zed already reads instead.
    for name in ZED_RULE_FILES:
        if (project / name).is_file():
            return project / name
    return project / "AGENTS.md"


@dataclass(frozen=True)
class Instructions:
    """The file an agent reads standing instructions from, and how deepfield writes there:
    ``block`` adds a marked block to a shared file; the other styles own a whole file
    (``cursor``: an .mdc rule, ``windsurf``: a workspace rule, ``continue``: a rule block)."""

    style: str
    project: Callable[[Path], Path]
    user: Callable[[Host], Path] | None = None
    candidates: Callable[[Path], list[Path]] | None = None
    """Every project file the block may have gone to (Zed: the rule file it read then, which
    another agent's file may have displaced since): --remove looks for its block in each."""


@dataclass(frozen=True)
class Agent:
    name: str
    title: str
    format: str  # json (strict), jsonc (comments and trailing commas allowed), toml
    key: str  # the object (table) holding the servers
    entry: Callable[[list[str]], dict[str, Any]]
    source: str
    user: Callable[[Host], Path] | None = None
    project: str | None = None
    own_file: bool = False
    """The config file holds deepfield's entry alone (Continue): --remove deletes it."""
    instructions: Instructions | None = None

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(s for s, where in ((USER, self.user), (PROJECT, self.project)) if where)

    def config_path(self, scope: str, host: Host, project: Path) -> Path:
        if scope == USER and self.user is not None:
            return self.user(host)
        if scope == PROJECT and self.project is not None:
            return project / self.project
        raise AgentSetupError(
            f"{self.title} has no {scope} configuration",
            f"use --scope {' or --scope '.join(self.scopes)}")


def _block(name: str, user: Callable[[Host], Path] | None = None) -> Instructions:
    return Instructions("block", lambda project: project / name, user)


AGENTS: dict[str, Agent] = {a.name: a for a in (
    Agent("claude-code", "Claude Code", "json", "mcpServers", _claude_code,
          "code.claude.com/docs/en/mcp (scopes: user in ~/.claude.json, project in .mcp.json)",
          user=lambda h: h.home / ".claude.json", project=".mcp.json",
          instructions=_block("CLAUDE.md", lambda h: h.home / ".claude" / "CLAUDE.md")),
    Agent("claude-desktop", "Claude Desktop", "json", "mcpServers", stdio_entry,
          "modelcontextprotocol.io/quickstart/user (macOS ~/Library/Application Support/Claude, "
          "Windows %APPDATA%\\Claude; Linux builds use ~/.config/Claude)",
          user=lambda h: h.app_config() / "Claude" / "claude_desktop_config.json"),
    Agent("cursor", "Cursor", "jsonc", "mcpServers", stdio_entry,
          "cursor.com/docs/mcp (global ~/.cursor/mcp.json, project .cursor/mcp.json); "
          "cursor.com/docs/rules (.cursor/rules/*.mdc)",
          user=lambda h: h.home / ".cursor" / "mcp.json", project=".cursor/mcp.json",
          instructions=Instructions("cursor", lambda p: p / ".cursor/rules/deepfield.mdc")),
    Agent("vscode", "VS Code (GitHub Copilot)", "jsonc", "servers", _vscode,
          "code.visualstudio.com/docs/copilot/reference/mcp-configuration (.vscode/mcp.json or "
          "mcp.json in the user profile, top-level \"servers\"); repository instructions in "
          ".github/copilot-instructions.md",
          user=lambda h: h.app_config() / "Code" / "User" / "mcp.json",
          project=".vscode/mcp.json",
          instructions=_block(".github/copilot-instructions.md")),
    Agent("windsurf", "Windsurf", "jsonc", "mcpServers", stdio_entry,
          "docs.windsurf.com/windsurf/cascade/mcp (~/.codeium/windsurf/mcp_config.json); "
          "workspace rules in .windsurf/rules/",
          user=lambda h: h.home / ".codeium" / "windsurf" / "mcp_config.json",
          instructions=Instructions("windsurf", lambda p: p / ".windsurf/rules/deepfield.md")),
    Agent("codex", "Codex CLI", "toml", "mcp_servers", stdio_entry,
          "github.com/openai/codex docs/config.md ([mcp_servers.NAME] in $CODEX_HOME/config.toml, "
          "default ~/.codex; .codex/config.toml in trusted projects); AGENTS.md",
          user=lambda h: _codex_home(h) / "config.toml", project=".codex/config.toml",
          instructions=_block("AGENTS.md", lambda h: _codex_home(h) / "AGENTS.md")),
    Agent("gemini", "Gemini CLI", "jsonc", "mcpServers", stdio_entry,
          "geminicli.com/docs/cli/configuration (~/.gemini/settings.json, "
          ".gemini/settings.json); GEMINI.md context files",
          user=lambda h: h.home / ".gemini" / "settings.json", project=".gemini/settings.json",
          instructions=_block("GEMINI.md", lambda h: h.home / ".gemini" / "GEMINI.md")),
    Agent("zed", "Zed", "jsonc", "context_servers", _zed,
          "zed.dev/docs/ai/mcp (\"context_servers\" in settings.json; paths::config_dir: "
          "~/.config/zed, $XDG_CONFIG_HOME/zed, %APPDATA%\\Zed); zed.dev/docs/ai/rules",
          user=lambda h: _zed_config(h) / "settings.json", project=".zed/settings.json",
          instructions=Instructions("block", _zed_rules, candidates=lambda p: [
              p / name for name in ZED_RULE_FILES])),
    Agent("continue", "Continue", "jsonc", "mcpServers", stdio_entry,
          "docs.continue.dev/customize/deep-dives/mcp (JSON MCP files in .continue/mcpServers/; "
          "core/context/mcp/json/loadJsonMcpConfigs.ts also reads ~/.continue/mcpServers); "
          ".continue/rules/",
          user=lambda h: h.home / ".continue" / "mcpServers" / "deepfield.json",
          project=".continue/mcpServers/deepfield.json", own_file=True,
          instructions=Instructions("continue", lambda p: p / ".continue/rules/deepfield.md")),
)}

ALIASES = {"claude": "claude-code", "code": "vscode", "vs-code": "vscode", "copilot": "vscode",
           "codex-cli": "codex", "gemini-cli": "gemini", "continue-dev": "continue"}


def get_agent(name: str) -> Agent:
    """The agent called ``name`` (or one of its aliases); the error lists the known ones."""
    key = name.strip().lower()
    agent = AGENTS.get(ALIASES.get(key, key))
    if agent is None:
        raise AgentSetupError(f"unknown agent {name!r}",
                              "known agents: " + ", ".join(AGENTS))
    return agent
