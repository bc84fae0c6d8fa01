"""Memory management defects a new user met (walk-manage): supersession of the special
files, review items whose page was archived, forgetting a successor, dangling links."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import deepfield
from deepfield.domains.levels import level_blocks
from deepfield.errors import InvalidNameError, InvalidPageError, PageNotFoundError, ReviewItemError
from deepfield.manage import review
from deepfield.manage.activation_log import ACTIVATION_DIR, read_log
from deepfield.manage.forget import forget
from deepfield.manage.supersede import supersede
from deepfield.server.fallback import substring_matches

from .conftest import Cli, run_deepfield
from .test_domains import _domain


@pytest.fixture
def kfield(keyword_store: deepfield.Store) -> Iterator[deepfield.Field]:
    yield keyword_store.create_field("proj", intro="About.")


def test_supersede_refuses_the_listing_and_the_introduction(kfield: deepfield.Field) -> None:
    alpha = kfield.add("Alpha", "Alpha fact one.").pages[0].filename
    listing = (kfield.path / "listing.md").read_text()
    intro = (kfield.path / "index.md").read_text()
    for old, new in (("listing", "alpha"), ("index", "alpha"), ("alpha", "index"),
                     ("alpha", "listing.md")):
        with pytest.raises(InvalidNameError, match="not a page name"):
            supersede(kfield, old, new)
    with pytest.raises(InvalidNameError, match="not a page name"):
        kfield.write("---\ntitle: S\nsupersedes: listing\n---\nx\n")
    assert (kfield.path / "listing.md").read_text() == listing
    assert (kfield.path / "index.md").read_text() == intro
    assert "superseded_by" not in (kfield.path / alpha).read_text()
    kfield.add("Beta", "Beta fact two.")
    assert "beta" in (kfield.path / "listing.md").read_text().lower()  # still maintained


BATTERY_A = "We chose LiFePO4 battery, 12.8 V 6 Ah pack."
BATTERY_B = "We chose NMC battery, 14.8 V 5 Ah pack."


def _queued(fld: deepfield.Field) -> tuple[str, str]:
    """Two contradicting pages; (the queued item id, the flagged new page)."""
    fld.add("Battery choice", BATTERY_A)
    written = fld.add("Battery decision", BATTERY_B)
    (item,) = review.items(fld)[0]
    return item.id, written.pages[0].filename


def test_archiving_a_page_closes_its_review_items_and_clears_the_flag(
        kfield: deepfield.Field) -> None:
    item, new = _queued(kfield)
    assert "review: pending" in (kfield.path / new).read_text()
    result = kfield.archive_page("battery-choice")
    assert result.settled == [item]
    assert review.items(kfield)[0] == []
    (closed,) = review.items(kfield, include_resolved=True)[0]
    assert closed.status == "obsolete"
    assert "review:" not in (kfield.path / new).read_text()  # forget may archive it now
    report = forget(kfield, keep_top=0, dry_run=True)
    assert new in [e.filename for e in report.forgotten]


def test_an_item_whose_page_went_by_hand_can_be_kept_both_not_accepted(
        kfield: deepfield.Field) -> None:
    item, new = _queued(kfield)
    (kfield.path / "battery-choice.md").unlink()  # removed outside deepfield
    with pytest.raises(ReviewItemError, match="no longer in proj") as caught:
        review.resolve_item(kfield, item, "accept")
    assert "keep-both" in caught.value.hint
    outcome = review.resolve_item(kfield, item, "keep-both")
    assert outcome["old"] == "battery-choice.md"
    assert "review:" not in (kfield.path / new).read_text()


def test_keep_both_works_when_the_new_page_is_gone(kfield: deepfield.Field) -> None:
    item, new = _queued(kfield)
    (kfield.path / new).unlink()
    assert review.resolve_item(kfield, item, "keep-both")["new"] == new
    assert review.items(kfield)[0] == []


def test_forget_keeps_a_successor_while_its_predecessor_stays(kfield: deepfield.Field) -> None:
    kfield.add("Battery choice", BATTERY_A, review=False)
    kfield.add("Battery decision", BATTERY_B, review=False)
    kfield.add("Other", "Unrelated note about widgets.", review=False)
    supersede(kfield, "battery-choice", "battery-decision")
    for _ in range(3):
        kfield.read("battery-choice")  # read for reference: it now ranks first
    dry = forget(kfield, keep_top=1, dry_run=True)
    assert "battery-decision.md" not in [e.filename for e in dry.forgotten]
    (kept,) = [e for e in dry.kept if e.filename == "battery-decision.md"]
    assert "supersedes battery-choice.md" in kept.reason
    report = forget(kfield, keep_top=1)
    assert (kfield.path / "battery-decision.md").is_file()
    assert "superseded_by" in (kfield.path / "battery-choice.md").read_text()
    assert [a.split("/")[-1][:5] for a in report.archived] == ["other"]
    top = kfield.search("which battery did we choose", k=1).results
    assert [h.filename for h in top] == ["battery-decision.md"]


def test_a_page_whose_successor_was_deleted_by_hand_is_found_again(
        field: deepfield.Field) -> None:
    old = field.add("Zed old", "Old zed fact is here.", review=False).pages[0].filename
    field.add("Zed new", "New zed statement.", review=False)
    field.add("Yak", "Yak page is unrelated.", review=False)
    supersede(field, "zed-old", "zed-new")
    for mode in ("bm25", "hybrid"):
        assert old not in [h.filename for h in field.search("old zed fact", mode=mode).results]
    assert field.warnings() == []
    (field.path / "zed-new.md").unlink()  # by hand, or a git checkout
    field.ensure_synced(embed=False)
    assert [w for w in field.warnings() if "which is gone" in w] == [
        "zed-old.md: superseded_by zed-new.md, which is gone (the page is shown in search "
        "again); remove the key, or restore the successor"]
    for mode in ("bm25", "vector", "hybrid"):
        assert old in [h.filename for h in field.search("old zed fact", mode=mode).results]
    field.write("---\ntitle: Zed new\n---\nNew zed statement.\n", name="zed-new")  # back
    assert old not in [h.filename for h in field.search("old zed fact").results]


def test_merge_keeps_what_both_pages_superseded(kfield: deepfield.Field) -> None:
    kfield.add("Zed old", "Old zed fact obsolete.", review=False)
    kfield.add("Yak old", "Yak fact obsolete nu.", review=False)
    text = "Router admin password rotates every 90 days, stored in vault."
    kfield.add("Router password policy", text, review=False)
    supersede(kfield, "zed-old", "router-password-policy")
    kfield.add("Router password policy again", text)
    (item,) = review.items(kfield)[0]
    supersede(kfield, "yak-old", "router-password-policy-again")
    outcome = review.resolve_item(kfield, item.id, "merge")
    assert outcome["relinked"] == ["yak-old.md"]
    page = kfield.load("router-password-policy")[1]
    assert page.get("supersedes") == ["zed-old.md", "yak-old.md"]
    assert kfield.load("yak-old")[1].get("superseded_by") == "router-password-policy.md"
    assert "yak-old.md" not in [h.filename for h in kfield.search("yak fact").results]


def test_superseding_again_moves_the_claim_to_the_new_successor(
        kfield: deepfield.Field) -> None:
    for t in "abc":
        kfield.add(f"Page {t}", f"Text of page {t}.", review=False)
    supersede(kfield, "page-a", "page-b")
    result = supersede(kfield, "page-a", "page-c")
    assert result.warnings == ["page-a.md was superseded by page-b.md; it is now superseded by "
                               "page-c.md (page-a.md was removed from page-b.md's supersedes)"]
    assert kfield.load("page-b")[1].get("supersedes") is None
    assert kfield.load("page-a")[1].get("superseded_by") == "page-c.md"
    assert kfield.warnings() == []
    written = kfield.write("---\ntitle: Page d\nsupersedes: page-a\n---\nText of page d.\n")
    assert any("now superseded by page-d.md" in w for w in written.warnings)
    assert kfield.load("page-c")[1].get("supersedes") is None


def test_status_warns_about_a_one_sided_supersedes(kfield: deepfield.Field) -> None:
    for t in "abc":
        kfield.add(f"Page {t}", f"Text of page {t}.", review=False)
    supersede(kfield, "page-a", "page-b")
    text = (kfield.path / "page-c.md").read_text().replace("---\n", "---\nsupersedes: page-a\n", 1)
    (kfield.path / "page-c.md").write_text(text)  # by hand: page-a still names page-b
    kfield.index()
    assert kfield.warnings() == [
        "page-c.md: supersedes page-a.md, but page-a.md is superseded by page-b.md; remove "
        "page-a.md from its `supersedes`"]


def _huge(fld: deepfield.Field) -> list[str]:
    text = "\n".join(f"## Section {i}\n\nParagraph {i} about the sigma turbine design with "
                     f"parameter value {i * 7} and more filler words.\n" for i in range(150))
    parts = [p.filename for p in fld.add("Huge doc", text, review=False).pages]
    assert len(parts) > 2
    return parts


def test_a_split_page_is_superseded_whole_never_one_part(kfield: deepfield.Field) -> None:
    parts = _huge(kfield)
    kfield.add("Note", "A short note.", review=False)
    with pytest.raises(InvalidPageError, match=r"part 3 of the split page huge-doc\.md") as caught:
        supersede(kfield, parts[2], "note")
    assert "huge-doc" in caught.value.hint
    assert all("superseded_by" not in (kfield.path / p).read_text() for p in parts)
    result = supersede(kfield, "huge-doc", "note")
    assert result.old == ["huge-doc.md"]
    assert all(kfield.load(p)[1].get("superseded_by") == "note.md" for p in parts)
    assert kfield.search("Paragraph 75 sigma").results == []
    kfield.add("Other", "Another short note.", review=False)
    assert supersede(kfield, "other", parts[1]).new == "huge-doc.md"  # NEW: the whole page


def test_forget_older_than_counts_a_hand_edit_as_a_change(kfield: deepfield.Field) -> None:
    kfield.write("---\ntitle: Imported note\nupdated: '2020-01-02T00:00:00Z'\n---\nZeta is 41.\n")
    kfield.write("---\ntitle: Untouched\nupdated: '2020-01-02T00:00:00Z'\n---\nEta is 3.\n")
    path = kfield.path / "untouched.md"
    os.utime(path, (path.stat().st_atime, 1_577_923_200))  # 2020-01-02, as its date says
    with (kfield.path / "imported-note.md").open("a") as page:
        page.write("Edited by hand today: zeta is now 42.\n")
    kfield.index()
    report = forget(kfield, older_than_days=30, dry_run=True)
    assert [e.filename for e in report.forgotten] == ["untouched.md"]


def test_future_dated_and_unknown_activation_events_are_skipped(
        kfield: deepfield.Field) -> None:
    kfield.write("---\ntitle: Old page\nupdated: '2020-01-02T00:00:00Z'\n---\nOld.\n")
    path = kfield.path / "old-page.md"
    os.utime(path, (1_577_923_200, 1_577_923_200))
    kfield.index()
    folder = kfield.path / ACTIVATION_DIR
    folder.mkdir()
    (folder / "skewed.jsonl").write_text(
        '{"t": "2999-01-01T00:00:00Z", "page": "old-page.md", "uuid": null, "event": "read"}\n'
        '{"t": "2020-01-03T00:00:00Z", "page": "old-page.md", "uuid": null, "event": "bogus"}\n')
    log_ = read_log(folder)
    assert log_.events == 0
    assert log_.warnings == [
        "activation/skewed.jsonl: skipped 1 line(s) dated in the future (a wrong clock?), "
        "1 line(s) with an unknown event (not read, open, cite, search-hit)"]
    report = forget(kfield, older_than_days=30, dry_run=True)
    assert [e.filename for e in report.forgotten] == ["old-page.md"]


def test_search_says_when_a_superseded_page_matched(kfield: deepfield.Field) -> None:
    kfield.add("Wifi password", "The office wifi password is hunter2.", review=False)
    kfield.add("Network notes", "We moved the office network to a new router.", review=False)
    supersede(kfield, "wifi-password", "network-notes")
    response = kfield.search("office wifi password")
    assert [h.filename for h in response.results] == ["network-notes.md"]
    assert response.warnings == [
        "1 superseded page also matched (left out; search with --include-superseded, "
        "include_superseded=True, to see them)"]
    assert kfield.search("office wifi password", include_superseded=True).warnings == []
    assert kfield.search("router network").warnings == []  # the old page did not match


def test_small_messages_of_ls_forget_rm_supersede_and_write(cli: Cli) -> None:
    cli("new", "proj")
    cli("add", "proj", "--title", "Alpha", "Alpha fact.")
    cli("add", "proj", "--title", "Beta", "Beta fact.")
    listed = cli("ls", "--archived")
    assert listed.exit_code == 2 and "--archived needs FIELD" in listed.output
    for bad in ("inf", "nan", "-1"):
        ran = cli("forget", "proj", "--older-than", bad, "--dry-run")
        assert ran.exit_code == 2, ran.output
        assert "--keep-top" not in ran.output
    text = cli("forget", "proj", "--keep-top", "0", "--dry-run").output
    assert "0 cold pages kept (protected)" in text
    cli("rm", "proj", "alpha")
    for args in (("rm", "proj", "alpha"), ("supersede", "proj", "alpha", "beta")):
        with pytest.raises(PageNotFoundError) as caught:
            cli(*args)
        assert caught.value.message.endswith("alpha.md is archived")
        assert caught.value.hint == "bring it back with `deepfield restore proj alpha`"
    written = cli.json("write", "proj", "-", input="---\ntitle: Self sup\nsupersedes: self-sup\n"
                       "---\nx\n")
    assert written["warnings"] == [
        "supersedes 'self-sup': a page cannot supersede itself (left as written)"]


def test_a_skipped_activation_line_is_said_once(keyword_store: deepfield.Store) -> None:
    fld = keyword_store.create_field("proj")
    fld.add("Alpha", "Alpha fact.", review=False)
    (fld.path / ACTIVATION_DIR).mkdir()
    (fld.path / ACTIVATION_DIR / "vm.jsonl").write_text("not json\n")
    for command in (("forget", "proj", "--keep-top", "5", "--dry-run"), ("activation", "proj")):
        ran = run_deepfield("--store", str(keyword_store.root), *command)
        assert ran.returncode == 0, ran.stderr
        assert ran.stderr.decode().count("skipped 1 corrupt line(s)") == 1, ran.stderr


def test_keep_top_ranks_a_split_page_once_and_not_protected_pages(
        kfield: deepfield.Field) -> None:
    parts = _huge(kfield)
    kfield.add("Pinned", "Pinned fact.", frontmatter={"pinned": True}, review=False)
    for name in ("one", "two", "three"):
        kfield.add(name.title(), f"Fact {name}.", review=False)
    for _ in range(3):
        kfield.read("pinned")
        for part in parts:
            kfield.read(part)
    kfield.read("two")
    report = forget(kfield, keep_top=2, dry_run=True)
    forgotten = {e.filename: e.reason for e in report.forgotten}
    assert set(forgotten) == {"one.md", "three.md"}  # kept: the split page (1 rank) and two
    assert {e.reason.split(";")[0] for e in report.forgotten} == {
        "rank 3 by activation (keeping 2)", "rank 4 by activation (keeping 2)"}


def test_level_material_shows_a_page_whose_successor_was_deleted(
        keyword_store: deepfield.Store) -> None:
    fld = _domain(keyword_store)
    supersede(fld, "old-method.md", "new-method.md")
    assert "old-method.md" not in [b.filename for b in level_blocks(fld, "medium")]
    (fld.path / "new-method.md").unlink()
    fld.ensure_synced(embed=False)
    assert "old-method.md" in [b.filename for b in level_blocks(fld, "medium")]


def test_merging_one_item_settles_the_others_naming_the_merged_page(
        kfield: deepfield.Field) -> None:
    text = "The deploy port of the staging server is 8443, opened in the firewall."
    kfield.add("Deploy port", text)
    kfield.add("Deploy port again", text)
    kfield.add("Deploy port third", text)
    other = review.propose(kfield, "deploy-port-third", "deploy-port-again", "same port")
    first = next(i for i in review.items(kfield)[0] if i.new == "deploy-port-again.md")
    outcome = review.resolve_item(kfield, first.id, "merge")
    assert outcome["settled_reviews"] == [other]  # it named the page merged away
    left = review.items(kfield)[0]
    assert all("deploy-port-again.md" not in (i.new, i.old) for i in left) and left
    for item in left:  # what remains can be resolved
        review.resolve_item(kfield, item.id, "keep-both")
    assert review.items(kfield)[0] == []
    assert all("review:" not in p.read_text() for p in kfield.path.glob("deploy-port*.md"))


def test_the_substring_fallback_shows_a_page_whose_successor_was_deleted(
        kfield: deepfield.Field) -> None:
    kfield.add("Gasket supplier", "Acme makes them.", review=False)
    kfield.add("Seal vendor", "Bolt Ltd makes them now.", review=False)
    supersede(kfield, "gasket-supplier", "seal-vendor")
    assert substring_matches(kfield, "asket suppl", set(), 5) == []
    (kfield.path / "seal-vendor.md").unlink()
    kfield.ensure_synced(embed=False)
    found = substring_matches(kfield, "asket suppl", set(), 5)
    assert [m["filename"] for m in found] == ["gasket-supplier.md"]
