"""Write docs/CLI.md from the CLI's own --help texts, so the reference never drifts.

    python scripts/cli_docs.py          # rewrite docs/CLI.md
    python scripts/cli_docs.py --check  # exit 1 if docs/CLI.md is out of date (used by tests)
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from deepfield.cli import app
from deepfield.cli.app import load_all_commands

DOC = Path(__file__).resolve().parent.parent / "docs" / "CLI.md"

HEADER = """# deepfield command line

Generated from `--help` by `scripts/cli_docs.py`; do not edit by hand.

Conventions: every command takes `--json` and then prints one JSON document on stdout
(`search --batch` prints one JSON object per line). Errors print one line on stderr,
`error: <what went wrong> (<what to do>)`, and exit with status 1 (with `--json` also a JSON
`{"error": {"type", "message", "hint"}}` on stdout); usage errors exit with status 2.
Global options (`--store`, `--embedder`) go before or after the command name; `--json` may
go before it too (`deepfield --json status`).
Environment: `DEEPFIELD_STORE`, `DEEPFIELD_EMBEDDER`, `DEEPFIELD_EMBED_MODEL`,
`DEEPFIELD_EMBED_URL`, `DEEPFIELD_EMBED_MODEL_CODE`, `DEEPFIELD_EMBED_API_KEY_ENV`,
`DEEPFIELD_EMBED_THREADS`.
"""


def _commands(group: click.Group, path: list[str]) -> list[tuple[list[str], click.Command]]:
    load_all_commands()  # the group imports command modules lazily
    found: list[tuple[list[str], click.Command]] = []
    for name in sorted(group.commands):
        command = group.commands[name]
        found.append(([*path, name], command))
        if isinstance(command, click.Group):
            found += _commands(command, [*path, name])
    return found


def render() -> str:
    parts = [HEADER]
    with click.Context(app, info_name="deepfield", terminal_width=100) as ctx:
        parts.append("## deepfield\n\n```text\n" + app.get_help(ctx).rstrip() + "\n```\n")
        for path, command in _commands(app, []):
            parent = ctx
            for name in path[:-1]:
                parent = click.Context(app.commands[name], info_name=name, parent=parent)
            sub = click.Context(command, info_name=path[-1], parent=parent, terminal_width=100)
            usage = command.get_help(sub).rstrip()
            parts.append(f"## deepfield {' '.join(path)}\n\n```text\n{usage}\n```\n")
    return "\n".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not DOC.exists() or DOC.read_text() != text:
            print("docs/CLI.md is out of date: run python scripts/cli_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
