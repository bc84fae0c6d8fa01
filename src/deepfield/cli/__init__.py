"""The ``deepfield`` command: a thin layer that parses, calls the library and prints.

Every command takes ``--json`` and then prints one JSON document (``--batch`` prints JSON
lines). Errors print one line, ``error: what went wrong (what to do)``, to stderr (or a JSON
``{"error": …}`` object with ``--json``) and exit with status 1; usage errors exit with 2.
Settings come from flags, then ``DEEPFIELD_*`` environment variables, then the store's
``deepfield.toml``.
"""

from __future__ import annotations

import sqlite3
import sys
from typing import NoReturn

import click

from ..errors import DeepfieldError
from ..page_text import UTF8_HINT
from .app import app, emit_error, json_errors_on, print_json, set_json_errors

__all__ = ["app", "main"]


_NO_ARGS_IS_HELP: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("_NeverRaised", (click.UsageError,), {}))
"""What click (8.2 and later) raises for a group given no command: its message is the help."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    # An error raised before the command reads its own --json (a bad $DEEPFIELD_EMBED_THREADS,
    # an empty --store) is a JSON object on stdout too, as every other error with --json is.
    set_json_errors(_asks_json(sys.argv[1:] if argv is None else argv))
    try:
        # Without standalone mode click *returns* the status a command gave ``ctx.exit(n)``
        # (an --json failure, Ctrl-C's 130, --strict) instead of exiting with it.
        status = app.main(args=argv, prog_name="deepfield", standalone_mode=False)
    except click.exceptions.Abort:
        _interrupted("aborted")
    except KeyboardInterrupt:
        _interrupted("interrupted")
    except _NO_ARGS_IS_HELP as exc:
        # `deepfield` or `deepfield domain` alone: the help, as it reads (folded into one
        # "error:" line it was a wall of text), and status 2 as click gives it.
        click.echo(exc.format_message(), err=True)
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        # One line, like every other error (click's own shows usage, a hint and the error on
        # four); with --json anywhere on the line, the JSON error object too.
        if _asks_json(sys.argv[1:] if argv is None else argv):
            set_json_errors(True)
        command = exc.ctx.command_path if exc.ctx is not None else "deepfield"
        hint = f"see `{command} --help`"
        if isinstance(exc, click.NoSuchOption) and not exc.option_name.startswith("--"):
            # "-1.72" or "- We keep 850": a query or text, not an option
            hint = f"text that starts with '-' goes after '--': {command} -- \"-1.72\"; {hint}"
        emit_error("UsageError", exc.format_message(), hint)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        emit_error(type(exc).__name__, exc.format_message(), "")
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except DeepfieldError as exc:
        emit_error(type(exc).__name__, exc.message, exc.hint)
        sys.exit(1)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        emit_error("OSError", f"{exc.strerror or exc}{where}", "check the path and permissions")
        sys.exit(1)
    except sqlite3.Error as exc:  # a busy, locked or full index (damaged ones heal themselves)
        emit_error("IndexStateError", f"the index failed: {exc}",
                   "try again; if it persists, rebuild it with `deepfield reindex`")
        sys.exit(1)
    except UnicodeEncodeError:
        # An argument that is not UTF-8 (Python keeps its bytes as lone surrogates) reached
        # a place that encodes it; the library's checks catch the common ones (queries,
        # titles, page text, names) with a better message, this catches the rest.
        given = sys.argv[1:] if argv is None else argv
        bad = [arg for arg in given if not _is_utf8(arg)]
        if not bad:
            raise
        emit_error("UsageError", f"the argument {bad[0]!a} is not valid UTF-8", UTF8_HINT)
        sys.exit(2)
    if isinstance(status, int) and not isinstance(status, bool) and status != 0:
        sys.exit(status)


def _interrupted(said: str) -> NoReturn:
    """Ctrl-C: one word on stderr and status 130; with --json also the JSON error object,
    so a script reading stdout gets a document, as for every other failure."""
    if json_errors_on():
        print_json({"error": {"type": "Interrupted", "message": said,
                              "hint": "run the command again to finish"}})
    click.echo(said, err=True)
    sys.exit(130)


def _asks_json(args: list[str]) -> bool:
    """Whether ``--json`` is on the command line as an option (not as text after ``--``)."""
    return "--json" in (args[:args.index("--")] if "--" in args else args)


def _is_utf8(arg: str) -> bool:
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
