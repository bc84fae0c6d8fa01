"""Plan and carry out ``deepfield setup``: merge deepfield's MCP server into an agent's config.

:func:`plan_setup` reads the agent's files and works out the new text of each (nothing is
written), so ``--dry-run`` can show the diff; :func:`apply` writes the plan. The rules every
change follows:

- only deepfield's own entry changes: other servers, settings, comments and formatting stay
  as they were (see :mod:`.jsonc` and :mod:`.formats`);
- a file that would not change is not written (running setup twice changes nothing);
- an existing file is copied to ``<name>.deepfield-backup-<time>`` before it is replaced or
  removed (the suffix keeps the copy out of folders an agent scans for ``*.json`` / ``*.md``),
  except a file setup created that ``--remove`` deletes (:mod:`.created`: no file, as before);
- writes are atomic (temporary file + rename) and keep the file's permissions; a symbolic link
  (dotfiles) is followed, so the link stays and its target is updated;
- a malformed file is refused with its line and column, a read-only file with a clear error,
  and then nothing at all is written.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import AgentSetupError
from . import formats, instructions
from .agents import PROJECT, USER, Agent, Host
from .created import Created, missing_folders

DEFAULT_SERVER_NAME = "deepfield"
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")
"""The server names setup writes: what every agent accepts. Codex refuses others in
``[mcp_servers]``, and agents name the tools ``mcp__NAME__search`` or the like, which model
APIs accept only in these characters."""


@dataclass
class FileChange:
    """One file setup touches: its text before and after (None: absent / to be deleted)."""

    path: Path
    kind: str  # config | instructions
    before: str | None
    after: str | None
    backup: Path | None = None
    made_by_setup: bool = False
    """Setup created the file (created.py): deleted, it gets no backup of setup's own text."""

    @property
    def action(self) -> str:
        if self.before == self.after:
            return "unchanged" if self.before is not None else "absent"
        if self.before is None:
            return "created"
        return "removed" if self.after is None else "updated"

    def diff(self) -> str:
        name = str(self.path)
        return "".join(difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=name if self.before is not None else "/dev/null",
            tofile=name if self.after is not None else "/dev/null"))

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind, "action": self.action,
                "backup": str(self.backup) if self.backup else None, "diff": self.diff()}


@dataclass
class SetupPlan:
    agent: Agent
    scope: str
    server: str
    entry: dict[str, Any]
    remove: bool
    changes: list[FileChange] = field(default_factory=list)
    previous: dict[str, Any] | None = None
    """The server's entry in the config before this change (None: there was none)."""
    created: Created | None = None
    """The record of the files setup created (apply keeps it up to date)."""

    @property
    def changed(self) -> bool:
        return any(c.before != c.after for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent.name, "title": self.agent.title, "scope": self.scope,
                "server": self.server, "entry": self.entry, "remove": self.remove,
                "changed": self.changed, "files": [c.to_json() for c in self.changes],
                "source": self.agent.source}


def server_entry(agent: Agent, command: list[str]) -> dict[str, Any]:
    if not command or not all(isinstance(part, str) and part for part in command):
        raise AgentSetupError("the server command is empty", "give the command to start "
                              "`deepfield mcp`, e.g. deepfield --store DIR mcp")
    return agent.entry(list(command))


def check_server_name(server: str) -> str:
    if not SERVER_NAME.fullmatch(server):
        raise AgentSetupError(f"invalid server name {server!r}", "use only letters, digits, "
                              "- and _, which every agent accepts, e.g. --name deepfield")
    return server


def entry_store(entry: Any) -> str | None:
    """The store a server entry opens: what follows ``mcp`` in its command (or ``--store``,
    as in ``deepfield --store DIR mcp``); None when the entry is not deepfield's."""
    if not isinstance(entry, dict):
        return None
    args = entry.get("args")
    parts = [entry.get("command"), *(args if isinstance(args, list) else [])]
    for flag in ("--store", "mcp"):
        if flag in parts[:-1]:
            value = parts[parts.index(flag) + 1]
            return value if isinstance(value, str) and not value.startswith("-") else None
    return None


def snippet(agent: Agent, command: list[str], server: str = DEFAULT_SERVER_NAME) -> str:
    """The bare config text an agent needs (``--print``): JSON, or TOML for Codex."""
    check_server_name(server)
    return formats.set_entry("", agent.format, [agent.key, server], server_entry(agent, command))


def plan_setup(agent: Agent, command: list[str], *, host: Host, project: Path,
               scope: str | None = None, server: str = DEFAULT_SERVER_NAME,
               remove: bool = False, with_instructions: bool = False) -> SetupPlan:
    """Work out every file change (nothing is written). ``scope`` defaults to the agent's user
    configuration (its project one when it has no user scope)."""
    chosen = scope or (USER if USER in agent.scopes else PROJECT)
    path = agent.config_path(chosen, host, project)
    entry = server_entry(agent, command)
    if not remove:  # --remove takes any name out, even one an older setup accepted
        check_server_name(server)
    before = read_text(path)
    if before is not None and not remove:
        entry = merged_entry(_previous(agent, path, before, server), entry)
    plan = SetupPlan(agent, chosen, server, entry, remove)
    if agent.own_file and remove and before is not None:
        rest = edit_config(agent, path, before, server, entry, remove=True)
        # The file is deepfield's own: once its entry is gone and nothing else is left, it goes.
        after = None if rest is None or formats.check(rest, agent.format) in (
            None, {}, {agent.key: {}}) else rest
    else:
        after = edit_config(agent, path, before, server, entry, remove)
    plan.created = made = Created.load(host)
    if remove and after is not None and after != before and made.made(path) and \
            _holds_nothing(after):
        after = None  # setup created the file: --remove leaves no file, as before setup
    if before is not None:
        previous = formats.get(before, agent.format, [agent.key, server])
        plan.previous = previous if isinstance(previous, dict) else None
    plan.changes.append(FileChange(path, "config", before, after))
    if with_instructions:
        plan.changes.extend(_instruction_changes(agent, chosen, host, project, server, remove))
    for change in plan.changes:
        change.made_by_setup = remove and made.made(change.path)
    return plan


def _holds_nothing(text: str) -> bool:
    """The config text holds nothing at all: blank, or an empty object with not even a
    comment (a file with anything else in it is never deleted)."""
    return "".join(text.split()) in ("", "{}")


OTHER_TRANSPORT = ("url", "httpUrl", "serverUrl")
"""Keys of an entry that reaches its server over HTTP rather than by starting a command."""


def merged_entry(previous: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry to write over ``previous``: setup's own keys (command, args, ...) with what
    the user added to the server's entry kept: its environment (an API key the embedder
    needs), a timeout, a flag the agent reads. An entry that reached the server over HTTP is
    replaced whole, as its keys would not fit a command."""
    if not isinstance(previous, dict) or any(key in previous for key in OTHER_TRANSPORT):
        return entry
    merged = dict(previous)
    for key, value in entry.items():
        old = previous.get(key)
        merged[key] = {**old, **value} if isinstance(value, dict) and isinstance(old, dict) \
            else value
    return merged


def _previous(agent: Agent, path: Path, before: str, server: str) -> Any:
    """The server's entry in ``before`` (None where the file cannot be read as its format:
    :func:`edit_config` then says where it is broken)."""
    try:
        return formats.get(before, agent.format, [agent.key, server])
    except formats.ConfigSyntaxError:
        return None


def edit_config(agent: Agent, path: Path, before: str | None, server: str,
                entry: dict[str, Any], remove: bool) -> str | None:
    text = before or ""
    key_path = [agent.key, server]
    try:
        if remove:
            if before is None:
                return None
            after = formats.remove_entry(text, agent.format, key_path)
            if after != before and formats.check(after, agent.format) == {agent.key: {}}:
                # Setup added the servers object to a file that held nothing (`{}`): take it
                # out with the entry, so the file reads as before. Beside other settings an
                # empty one stays, as setup cannot tell whether it was there before.
                after = formats.remove_entry(after, agent.format, [agent.key])
            return after
        if before is not None and formats.get(text, agent.format, key_path) == entry:
            return before
        return formats.set_entry(text, agent.format, key_path, entry)
    except formats.ConfigSyntaxError as exc:
        kind = "TOML" if agent.format == "toml" else "JSON"
        where = f" at line {exc.line}, column {exc.column}" if exc.line else ""
        raise AgentSetupError(
            f"{path} is not valid {kind}{where}: {exc.reason}",
            "fix the file (or move it aside) and run setup again; nothing was changed") \
            from None
    except formats.ConfigShapeError as exc:
        raise AgentSetupError(f"{path}: {exc}", "fix the file (or move it aside) and run "
                              "setup again; nothing was changed") from None


def _instruction_changes(agent: Agent, scope: str, host: Host, project: Path, server: str,
                         remove: bool) -> list[FileChange]:
    spec = agent.instructions
    if spec is None:
        raise AgentSetupError(f"{agent.title} reads no instruction file",
                              "leave out --instructions for this agent")
    path = spec.user(host) if scope == USER and spec.user else spec.project(project)
    if spec.style != "block":
        before = read_text(path)
        after = None if remove else instructions.own_file(spec.style, server)
        return [FileChange(path, "instructions", before, after)]
    if not remove:
        return [_block_change(agent, path, server, remove=False)]
    paths = [path]
    if spec.candidates is not None and path == spec.project(project):
        paths += [p for p in spec.candidates(project) if p != path]
    # A block that names no agent (older setups) is taken out of the agent's own file only.
    changes = [_block_change(agent, p, server, remove=True, unnamed=p == path) for p in paths]
    # Report the files the block was taken out of (else the agent's own file, unchanged).
    return [c for c in changes if c.before != c.after] or changes[:1]


def _block_change(agent: Agent, path: Path, server: str, remove: bool,
                  unnamed: bool = True) -> FileChange:
    before = read_text(path)
    try:
        if remove:
            after = None if before is None else instructions.remove_block(
                before, agent.name, unnamed=unnamed)
            if after is not None and after != before and not after.strip():
                after = None  # the file held nothing but the block deepfield wrote
        else:
            after = instructions.add_block(before or "", server, agent.name)
    except instructions.MarkerError as exc:
        raise AgentSetupError(f"{path}: {exc}", f"add the line {instructions.END} where the "
                              "block ends, or delete the begin line; nothing was changed") \
            from None
    return FileChange(path, "instructions", before, after)


# ---------------------------------------------------------------------- files


def read_text(path: Path) -> str | None:
    """The file's text (None when absent). A folder, a binary or non-UTF-8 file is refused."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise AgentSetupError(f"{path} is a folder, not a file",
                              "move it aside and run setup again") from None
    except PermissionError:
        raise AgentSetupError(f"cannot read {path}: permission denied",
                              "check the file's owner and permissions") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AgentSetupError(f"{path} is not UTF-8 text (bad byte at offset {exc.start})",
                              "re-save it as UTF-8; nothing was changed") from None


def _target(path: Path) -> Path:
    """The file to write: a symbolic link's target, so the link itself survives."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_writable(change: FileChange) -> None:
    """Refuse, before anything is written, a change to a file that is read-only."""
    target = _target(change.path)
    if target.exists():
        mode = target.stat().st_mode
        # The write bits count even for root: a file marked read-only was marked on purpose.
        if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or \
                not os.access(target, os.W_OK):
            raise AgentSetupError(f"{change.path} is read-only",
                                  "make it writable (chmod u+w) or edit it by hand; "
                                  "nothing was changed")
    folder = target.parent
    while not folder.exists():
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise AgentSetupError(f"cannot write in {folder}: permission denied",
                              "check the folder's permissions; nothing was changed")


def backup_name(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.deepfield-backup-{stamp}")
    count = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.deepfield-backup-{stamp}-{count}")
        count += 1
    return candidate


def _write(target: Path, text: str) -> None:
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o644
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def apply(plan: SetupPlan) -> SetupPlan:
    """Write every change of ``plan`` (backups first); files that do not change are left
    alone. All files are checked before the first one is written."""
    pending = [c for c in plan.changes if c.before != c.after]
    for change in pending:
        check_writable(change)
    made = plan.created
    for change in pending:
        target = _target(change.path)
        folders = missing_folders(target.parent) if change.before is None else []
        try:
            if change.before is not None and not (change.after is None and
                                                  change.made_by_setup):
                change.backup = backup_name(change.path)
                shutil.copy2(target, change.backup)
            if change.after is None:
                target.unlink()
            else:
                _write(target, change.after)
        except PermissionError as exc:
            raise AgentSetupError(f"cannot write {exc.filename or change.path}: permission "
                                  "denied", "check the file's and folder's permissions") \
                from None
        if made is None:
            continue
        if change.before is None:
            made.add(change.path, folders)
        elif plan.remove:  # taken out, or kept holding the user's things: theirs from now
            made.forget(change.path)
            if change.after is None:
                made.remove_folders_of(change.path)
    if made is not None and pending:
        made.save()
    return plan
