"""``deepfield setup AGENT``: add deepfield's MCP server to an agent's configuration (thin;
the work is in deepfield.agentsetup)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import click

from ..agentsetup import AGENTS, Host, apply, get_agent, plan_setup, snippet
from ..agentsetup.plan import DEFAULT_SERVER_NAME, SetupPlan, entry_store
from ..errors import AgentSetupError
from ..store_openers import url_scheme
from .app import app, json_option, print_json, settings, store_exists, warn


def server_command(store: Path | str, embedder: str | None = None) -> list[str]:
    """How the agent should start ``deepfield mcp STORE`` (a folder, or an ``s3://`` URL as
    given), with ``--embedder`` when one was chosen: the deepfield script installed beside
    this Python (agents started from a desktop often lack the shell's PATH), else the one on
    PATH, else this Python with ``-m deepfield``."""
    tail = [*(["--embedder", embedder] if embedder else []), "mcp", str(store)]
    scripts = Path(sys.executable).parent
    for name in ("deepfield.exe", "deepfield") if sys.platform == "win32" else ("deepfield",):
        if (scripts / name).is_file():
            return [str(scripts / name), *tail]
    found = shutil.which("deepfield")
    if found:
        return [str(Path(found).resolve()), *tail]
    return [sys.executable, "-m", "deepfield", *tail]


WORKSPACE_FOLDER = {"cursor": "${workspaceFolder}", "vscode": "${workspaceFolder}"}
"""Agents whose project configuration expands a variable to the project's folder in a
server's args (cursor.com/docs/mcp and VS Code's mcp.json: ``${workspaceFolder}``)."""

PROJECT_DIR_ENV = {"claude-code"}
"""Agents that pass the project's folder to the servers they start as $CLAUDE_PROJECT_DIR
(anthropics/claude-code#58121): their project entry names a store inside the project by its
relative path, which ``deepfield mcp`` takes inside that folder. The other agents are given
absolute paths, which a project entry can only share as they are."""


def shareable(agent: str, command: list[str], store: Path | str,
              project: Path) -> tuple[list[str], list[str]]:
    """A project-scope command teammates can use too, and what in it stays this machine's:
    ``deepfield`` from PATH when the PATH one is the script setup chose, and a store inside
    the project as ``${workspaceFolder}/…`` where the agent expands that, or as its relative
    path where the agent passes $CLAUDE_PROJECT_DIR."""
    shared, local = list(command), []
    found = shutil.which("deepfield")
    if found and Path(found).resolve() == Path(command[0]).resolve():
        shared[0] = "deepfield"
    else:
        local.append(command[0])
    if isinstance(store, Path):
        variable = WORKSPACE_FOLDER.get(agent)
        inside = store.relative_to(project).as_posix() if store.is_relative_to(project) \
            else None
        if inside is not None and variable:
            shared[-1] = variable if inside == "." else f"{variable}/{inside}"
        elif inside is not None and agent in PROJECT_DIR_ENV:
            shared[-1] = inside
        else:
            local.append(str(store))
    return shared, local


def _list_agents(as_json: bool, host: Host, project: Path) -> None:
    rows: list[dict[str, Any]] = []
    for agent in AGENTS.values():
        paths = {scope: str(agent.config_path(scope, host, project)) for scope in agent.scopes}
        rows.append({"agent": agent.name, "title": agent.title, "format": agent.format,
                     "key": agent.key, "paths": paths,
                     "instructions": agent.instructions is not None, "source": agent.source})
    if as_json:
        print_json({"agents": rows})
        return
    for row in rows:
        click.echo(f"{row['agent']:<15} {row['title']}")
        for scope, path in row["paths"].items():
            click.echo(f"  {scope:<8} {path}")


def _report(plan: SetupPlan, dry_run: bool) -> None:
    for change in plan.changes:
        action = change.action
        if dry_run and action not in ("unchanged", "absent"):
            action = f"would be {action}"
        backup = f" (backup: {change.backup})" if change.backup else ""
        click.echo(f"{change.path}: {action}{backup}")
        if dry_run and change.before != change.after:
            click.echo(change.diff(), nl=False)
    if not dry_run and plan.changed and not plan.remove:
        click.echo(f"restart {plan.agent.title} to load the `{plan.server}` MCP server")


def _keep_connected(ctx: click.Context, plan: SetupPlan, store: Path, project: Path) -> None:
    """Refuse to move an entry off the store it opens to the default ./memory that holds no
    store (running setup again for --instructions, without --store): the agent would lose
    its memory. A store named with --store or $DEEPFIELD_STORE may still be made later."""
    source = ctx.find_root().get_parameter_source("store_path")
    if source is not click.core.ParameterSource.DEFAULT:
        return
    current = entry_store(plan.previous)
    if current is None or current == str(store):
        return
    # A relative store (Claude Code's project entry) is inside the project folder.
    folder = project / Path(current).expanduser()
    if folder == store:
        return
    if url_scheme(current) is None:
        if not store_exists(folder):
            return  # the entry's store is gone too: nothing to keep
        current = str(folder)
    raise AgentSetupError(
        f"{plan.agent.title}'s `{plan.server}` server opens the store {current}, and there is "
        f"no store at {store}",
        f"pass --store {current} to keep it, or run `deepfield init DIR` and pass --store DIR "
        "to use another; nothing was changed")


@app.command("setup")
@click.argument("agent", required=False)
@click.option("--scope", type=click.Choice(["user", "project"]), default=None,
              help="user: your own configuration (default where the agent has one); project: "
              "the project folder's, to share with a team.")
# The project folder must exist: a mistyped one would be created, config and all.
@click.option("--dir", "project_dir", type=click.Path(path_type=Path, file_okay=False,
                                                       exists=True),
              default=".", show_default=True, help="The project folder (project scope and "
              "instruction files).")
@click.option("--print", "print_only", is_flag=True,
              help="Only print the JSON (TOML for codex) snippet; change nothing.")
@click.option("--dry-run", is_flag=True, help="Show the diff of every file; change nothing.")
@click.option("--remove", is_flag=True, help="Take deepfield's entry (and, with "
              "--instructions, its instruction block) out again.")
@click.option("--instructions", "with_instructions", is_flag=True,
              help="Also add a short block saying when to search, read, remember and research "
              "to the file the agent reads (CLAUDE.md, AGENTS.md, GEMINI.md, .cursor/rules, ...).")
@click.option("--name", "server_name", default=DEFAULT_SERVER_NAME, show_default=True,
              help="The MCP server's name in the agent's configuration: letters, digits, '-' "
              "and '_' (what every agent accepts).")
@click.option("--list", "list_agents", is_flag=True,
              help="List the agents and the files setup would edit.")
@json_option
@click.pass_context
def setup_cmd(ctx: click.Context, agent: str | None, scope: str | None, project_dir: Path,
              print_only: bool, dry_run: bool, remove: bool, with_instructions: bool,
              server_name: str, list_agents: bool, as_json: bool) -> None:
    """Add deepfield's MCP server for the store (--store) to AGENT's configuration: claude-code,
    claude-desktop, cursor, vscode, windsurf, codex, gemini, zed or continue.

    Only deepfield's entry changes; other servers, settings and comments are kept, the old
    file is backed up (NAME.deepfield-backup-TIME) and running it again changes nothing.
    A malformed or read-only file is refused and nothing is written.
    """
    host = Host.current()
    project = project_dir.resolve()
    if list_agents or agent is None:
        if agent is None and not list_agents:
            raise AgentSetupError("name the agent to set up",
                                  "known agents: " + ", ".join(AGENTS))
        _list_agents(as_json, host, project)
        return
    chosen = get_agent(agent)
    env = settings(ctx)
    env.scheme()  # a URL of a scheme no opener takes (ftp://) goes into no agent's config
    # A bucket store is passed through as its URL (`deepfield mcp s3://…` opens it); its
    # store_path is only this process's working copy, no store the agent could open.
    store: Path | str = env.store_url or env.store_path.resolve()
    # --embedder (or $DEEPFIELD_EMBEDDER, which an agent started from a desktop lacks) goes
    # into the command: the server would otherwise build the store's own, another model.
    command = server_command(store, env.embedder_name)
    if env.embed_options:
        warn("the agent starts `deepfield mcp` without this shell's DEEPFIELD_EMBED_* "
             "settings: put them in the store's deepfield.toml ([embedding]) or in the "
             "server's env")
    if env.store_url is not None:
        warn(f"the agent starts `deepfield mcp {env.store_url}`: it needs the AWS_* "
             "credentials (and AWS_ENDPOINT_URL, if any) in its own environment")
    # --print is a project entry only when asked for: it is pasted anywhere.
    default = "user" if "user" in chosen.scopes else "project"
    if (scope or ("user" if print_only else default)) == "project":
        command, local = shareable(chosen.name, command, store, project)
        if local and not remove:
            warn(f"the project entry names {' and '.join(local)}, on this machine only: "
                 "teammates need the same paths (put `deepfield` on PATH; Claude Code, Cursor "
                 "and VS Code entries name a store inside the project relative to it)")
    if print_only:
        text = snippet(chosen, command, server_name)
        if as_json:
            print_json({"agent": chosen.name, "format": chosen.format, "snippet": text})
        else:
            click.echo(text, nl=False)
        return
    plan = plan_setup(chosen, command, host=host, project=project, scope=scope,
                      server=server_name, remove=remove, with_instructions=with_instructions)
    if not remove and isinstance(store, Path) and not store_exists(store):
        _keep_connected(ctx, plan, store, project)
        warn(f"there is no store at {store} yet: create it with `deepfield init {store}`")
    if not dry_run:
        apply(plan)
    if as_json:
        print_json({**plan.to_json(), "dry_run": dry_run, "store": str(store)})
    else:
        _report(plan, dry_run)
