"""Commands for research domains: create one, file atomic pages, list domains, the taxonomy."""

from __future__ import annotations

import click

from ..domains.atomic import KINDS
from ..domains.domain import add_atomic, create_domain, domain_summary, taxonomy_report
from ..domains.taxonomy import render_tree
from ..errors import DeepfieldError, InvalidPageError
from .app import app, json_option, print_json, print_json_or_fail, read_input, settings, warn


@app.group("domain")
def domain_group() -> None:
    """Research domains: a field per domain with well-known pages and atomic knowledge.

    A domain field holds basic-info.md, taxonomy.md (basic context), main-challenge.md,
    network.md (cognition) and human-preference.md (alignment), plus atomic pages tagged with
    a kind (method, benchmark, survey, blog), a category and concepts. Switching domain is
    switching field.
    """


@domain_group.command("new")
@click.argument("name")
@click.option("--description", default=None,
              help="What the domain is (goes into index.md and basic-info.md).")
@click.option("--adopt", is_flag=True,
              help="Use an existing field: add the missing pages, keep the others as they are.")
@json_option
@click.pass_context
def domain_new(ctx: click.Context, name: str, description: str | None, adopt: bool,
               as_json: bool) -> None:
    """Create the field NAME for one research domain, with its well-known pages."""
    created = create_domain(settings(ctx).store(), name, description=description,
                            exist_ok=adopt)
    if as_json:
        print_json(created.to_json())
        return
    click.echo(f"domain {created.field} at {created.path}")
    for filename in created.created:
        click.echo(f"  created {filename}")
    for filename in created.kept:
        click.echo(f"  kept    {filename}")


@domain_group.command("add")
@click.argument("field")
@click.argument("text", metavar="[TEXT|-]", required=False)
@click.option("--kind", required=True, type=click.Choice(KINDS, case_sensitive=False),
              help="What the page is about.")
@click.option("--title", required=True, help="Title of the page (paper, benchmark, post).")
@click.option("--category", "categories", multiple=True, metavar="NAME",
              help="Taxonomy category (repeat for several).")
@click.option("--concept", "concepts", multiple=True, metavar="NAME",
              help="Taxonomy concept (repeat for several).")
@click.option("--source", default=None, help="URL, DOI or arXiv id of the original.")
@click.option("--date", default=None, help="Publication date: YYYY, YYYY-MM or YYYY-MM-DD.")
@click.option("--summary", default=None, help="One-sentence summary (shown in stubs).")
@click.option("--name", default=None, help="Filename to use (default: derived from the title).")
@json_option
@click.pass_context
def domain_add(
    ctx: click.Context, field: str, text: str | None, kind: str, title: str,
    categories: tuple[str, ...], concepts: tuple[str, ...], source: str | None,
    date: str | None, summary: str | None, name: str | None, as_json: bool,
) -> None:
    """File an atomic knowledge page in FIELD, with checked frontmatter.

    The body is TEXT, standard input for -, or, when omitted, a section skeleton for the kind
    (the body alone: the frontmatter comes from the options; `deepfield write` stores a
    whole page).
    Categories and concepts the taxonomy does not know are kept and reported as warnings.
    """
    fld = settings(ctx).field(field)
    if text == "-":
        try:
            text = read_input("-").decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidPageError("standard input is not valid UTF-8") from None
    result = add_atomic(
        fld, title, kind, category=list(categories), concepts=list(concepts), source=source,
        date=date, text=text, summary=summary, name=name,
    )
    if as_json:
        print_json(result.to_json())
        return
    for page in result.pages:
        click.echo(f"{page.action} {result.field}/{page.filename} ({page.bytes:,} bytes)")
    for warning in result.warnings:
        warn(warning)


@domain_group.command("ls")
@json_option
@click.pass_context
def domain_ls(ctx: click.Context, as_json: bool) -> None:
    """List the store's domains: their well-known pages and atomic pages by kind."""
    rows = [domain_summary(fld) for fld in settings(ctx).store().fields()]
    domains = [row for row in rows if row["is_domain"]]
    if as_json:
        print_json({"domains": domains})
        return
    if not domains:
        click.echo("no domains yet (create one with `deepfield domain new NAME`)")
    for row in domains:
        counts = [f"{n} {k}" for k, n in row["atomic"].items() if n]
        if row["atomic_other_kind"]:  # said, as in --json: `taxonomy --lint` names them
            counts.append(f"{row['atomic_other_kind']} of another kind (see `deepfield "
                          f"taxonomy {row['field']} --lint`)")
        kinds = ", ".join(counts) or "no atomic pages"
        missing = f"; missing: {', '.join(row['missing'])}" if row["missing"] else ""
        click.echo(f"{row['field']}: {kinds}{missing}")


@app.command("taxonomy")
@click.argument("field")
@click.option("--lint", is_flag=True,
              help="List pages whose categories or concepts the taxonomy does not know.")
@click.option("--strict", is_flag=True, help="With --lint: exit 1 when there are warnings.")
@json_option
@click.pass_context
def taxonomy_cmd(ctx: click.Context, field: str, lint: bool, strict: bool,
                 as_json: bool) -> None:
    """Print a domain's category → concept tree with the number of pages under each."""
    if strict and not lint:
        raise click.UsageError("--strict applies to --lint: give both")
    report = taxonomy_report(settings(ctx).field(field))
    n = len(report.issues)
    said = f"{n} lint warning{'' if n == 1 else 's'}"  # "1 lint warnings" read wrong
    failure = DeepfieldError(f"{said} and --strict was given",
                             "fix the pages named, or add their names to the taxonomy"
                             ) if lint and strict and report.issues else None
    if as_json:
        print_json_or_fail(report.to_json(), failure)
    else:
        taxonomy, counts = report.taxonomy, report.counts
        click.echo(
            f"{report.field}/{taxonomy.filename}: {len(taxonomy.categories())} categories, "
            f"{len(taxonomy.concepts())} concepts; {counts.atomic} atomic pages, "
            f"{len(counts.unplaced)} not placed in the tree"
        )
        click.echo(render_tree(taxonomy, counts) or "(the taxonomy is empty)\n", nl=False)
        if lint:
            for issue in report.issues:
                click.echo(f"lint: {issue}")
            click.echo(said)
        elif report.issues:
            warn(f"{said} (see `deepfield taxonomy {field} --lint`)")
        print_json_or_fail(None, failure)
