"""Forgetting: cold pages move to archive/ (never deleted); pinned and domain pages stay."""

from __future__ import annotations

import os
import time

import pytest

import deepfield
from deepfield.manage.activation import record_activation
from deepfield.manage.forget import forget

from .conftest import Cli

DAY = 86_400


def _page(field: deepfield.Field, name: str, days_old: int, **keys: object) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days_old * DAY))
    front = {"created": stamp, "updated": stamp, **keys}
    filename = field.add(name.title(), f"Notes about {name}.", name=name,
                         frontmatter=front, review=False).pages[0].filename
    moment = time.time() - days_old * DAY  # the file as old as its date: a hand edit counts
    os.utime(field.path / filename, (moment, moment))
    field.index()
    return filename


def _populate(field: deepfield.Field) -> None:
    _page(field, "fresh", 1)
    _page(field, "old-used", 400)
    _page(field, "old-cold", 300)
    _page(field, "ancient", 900)
    _page(field, "pinned-note", 1000, pinned=True)
    _page(field, "basic-info", 1000, role="basic-info")
    record_activation(field, ["old-used.md"] * 3, "cite", when=time.time() - 2 * DAY)


def test_dry_run_lists_cold_pages_and_keeps_protected_ones(field: deepfield.Field) -> None:
    _populate(field)
    report = forget(field, keep_top=2, dry_run=True)
    assert [e.filename for e in report.forgotten] == ["old-cold.md", "ancient.md"]
    assert {e.filename: e.reason for e in report.kept} == {
        "pinned-note.md": "pinned", "basic-info.md": "domain page (role: basic-info)"}
    assert report.archived == [] and len(field.pages()) == 6


def test_older_than_and_a_real_run_archives(field: deepfield.Field) -> None:
    _populate(field)
    report = forget(field, older_than_days=365)
    assert [e.filename for e in report.forgotten] == ["ancient.md"]  # old-used was cited
    assert report.archived == ["archive/ancient.md"]
    assert {e.filename for e in report.kept} == {"pinned-note.md", "basic-info.md"}
    assert "ancient.md" not in {d.filename for d in field.pages()}
    assert (field.path / "archive" / "ancient.md").is_file()
    assert field.restore("ancient") == "ancient.md"
    both = forget(field, keep_top=3, older_than_days=200, dry_run=True)
    # the restored file is new on disk (a person just brought it back): old-cold goes first
    assert [e.filename for e in both.forgotten] == ["old-cold.md"]


def test_forget_needs_a_rule(field: deepfield.Field) -> None:
    with pytest.raises(deepfield.DeepfieldError, match="needs a rule"):
        forget(field)


@pytest.mark.parametrize("days", [float("nan"), float("inf"), -1.0])
def test_an_age_that_is_no_number_of_days_is_refused(field: deepfield.Field,
                                                     days: float) -> None:
    # "nan" compares false with everything: every page counted as older than it.
    with pytest.raises(deepfield.DeepfieldError, match="--older-than must be a finite number"):
        forget(field, older_than_days=days, dry_run=True)


def test_the_console_refuses_them_too() -> None:
    from deepfield.server.console.common import float_arg

    for raw in ("nan", "inf", "1e400", "-1"):
        with pytest.raises(deepfield.DeepfieldError, match="from 0 up"):
            float_arg(raw, "older than (days)")
    assert float_arg(" 2.5 ", "older than (days)") == 2.5


def test_cli_forget(cli: Cli) -> None:
    cli("new", "notes")
    cli("add", "notes", "a", "--title", "Alpha")
    cli("add", "notes", "b", "--title", "Beta")
    cli("read", "notes", "beta")
    out = cli.json("forget", "notes", "--keep-top", "1", "--dry-run")
    assert [e["filename"] for e in out["forgotten"]] == ["alpha.md"] and out["dry_run"]
    out = cli.json("forget", "notes", "--keep-top", "1")
    assert out["archived"] == ["archive/alpha.md"]
    assert cli.json("ls", "notes", "--archived")["archived"] == ["alpha.md"]
    text = cli("forget", "notes", "--keep-top", "0", "--dry-run").output
    assert "would archive beta.md" in text


def test_pinned_spellings_and_pending_reviews_are_kept(field: deepfield.Field) -> None:
    for name, value in (("pin-yes", "yes"), ("pin-text", "'true'"), ("pin-one", "1"),
                        ("not-pinned", "'false'")):
        (field.path / f"{name}.md").write_text(
            f"---\npinned: {value}\nupdated: '2001-01-01T00:00:00Z'\n---\n# {name}\n\nx\n")
        os.utime(field.path / f"{name}.md", (978_307_200, 978_307_200))  # 2001 too
    _page(field, "disputed", 900, review="pending")
    report = forget(field, older_than_days=30)
    assert [e.filename for e in report.forgotten] == ["not-pinned.md"]
    assert {e.filename: e.reason.split(" (")[0] for e in report.kept} == {
        "pin-yes.md": "pinned", "pin-text.md": "pinned", "pin-one.md": "pinned",
        "disputed.md": "review pending"}
    assert sorted(d.filename for d in field.pages()) == [
        "disputed.md", "pin-one.md", "pin-text.md", "pin-yes.md"]
    assert (field.path / "archive" / "not-pinned.md").is_file()  # moved, never deleted


def test_a_page_gone_before_archiving_is_a_warning(field: deepfield.Field,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _page(field, "first", 400)
    _page(field, "second", 400)
    real = field.archive

    def flaky(ref: str) -> str:
        if ref == "first.md":
            raise deepfield.PageNotFoundError("no page 'first.md' in notes")
        return real(ref)

    monkeypatch.setattr(field, "archive", flaky)
    report = forget(field, older_than_days=30)
    assert report.archived == ["archive/second.md"]
    assert report.warnings == ["first.md was not archived: no page 'first.md' in notes"]
    assert report.not_archived == ["first.md"]


def test_cli_forget_says_what_it_could_not_move(cli: Cli,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    cli("new", "notes")
    cli("add", "notes", "a", "--title", "Alpha")
    cli("add", "notes", "b", "--title", "Beta")
    real = deepfield.Field.archive

    def locked(self: deepfield.Field, ref: str) -> str:
        if ref == "alpha.md":
            raise PermissionError(1, "Operation not permitted")
        return real(self, ref)

    monkeypatch.setattr(deepfield.Field, "archive", locked)
    result = cli("forget", "notes", "--keep-top", "0")
    assert result.exit_code == 1
    assert "archived beta.md" in result.stdout and "archived alpha.md" not in result.stdout
    assert "1 of 2 pages archived" in result.stdout
    assert "1 page(s) could not be archived" in result.stderr
