"""The review queue: duplicates and contradictions found on write, resolved by a person."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import deepfield
from deepfield.manage.review import QUEUE_FILE, REVIEW_DIR, items, resolve_item
from deepfield.manage.supersede import supersede

from .conftest import Cli


def _all_pages(field: deepfield.Field) -> set[str]:
    """Every page file in the field and its archive (nothing may ever disappear)."""
    return {p.name for p in field.path.glob("*.md")} | {
        p.name.split("--archived-")[0].removesuffix(".md") + ".md"
        for p in (field.path / "archive").glob("*.md")
    }


def _seed(field: deepfield.Field) -> str:
    field.add("Bob's favourite food", "Bob loves ramen and eats it every Friday.")
    field.add("Project Atlas budget", "The Atlas project has a budget of 40k EUR for 2024.")
    return field.add("Alice's team", "Alice's team is based in the Berlin office.",
                     summary="Alice's team works from Berlin.").pages[0].filename


def test_a_contradiction_is_queued_and_the_page_flagged(field: deepfield.Field) -> None:
    old = _seed(field)
    result = field.add("Alice's team moved", "Alice's team moved from the Berlin office "
                       "to Lisbon in March.", summary="Alice's team now works from Lisbon.")
    new = result.pages[0].filename
    assert any("contradiction" in w and old in w for w in result.warnings)
    assert field.load(new)[1].get("review") == "pending"
    queued, warnings = items(field)
    assert not warnings and len(queued) == 1
    item = queued[0]
    assert (item.kind, item.new, item.old) == ("contradiction", new, old)
    assert "lisbon" in item.reason.lower()


def test_unrelated_pages_and_updates_are_not_queued(field: deepfield.Field) -> None:
    old = _seed(field)
    field.add("Carol's hobby", "Carol paints watercolours on weekends.")
    page = field.load(old)[1]
    page.body = "Alice's team is based in the Hamburg office.\n"
    field.write(page)  # an update of the same uuid is the author's own change
    assert items(field)[0] == []
    assert not (field.path / REVIEW_DIR / QUEUE_FILE).exists()


def test_near_duplicates_are_queued(field: deepfield.Field) -> None:
    field.add("Deploy checklist", "Run the tests, tag the release, push the image, "
              "announce in the channel.")
    field.add("Deploy steps", "Run the tests, tag the release, push the image, "
              "announce in the channel.")
    (item,) = items(field)[0]
    assert item.kind == "duplicate"


def test_review_can_be_switched_off(field: deepfield.Field,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(field)
    field.add("Alice's team moved", "Alice's team moved from Berlin to Lisbon.", review=False)
    monkeypatch.setenv("DEEPFIELD_REVIEW", "0")
    fresh = deepfield.open_field(field.path, field.embedder)
    fresh.add("Alice's team again", "Alice's team moved from Berlin to Porto.")
    assert items(field)[0] == []


def test_accept_supersedes_and_clears_the_flag(field: deepfield.Field) -> None:
    old = _seed(field)
    before = _all_pages(field)
    new = field.add("Alice's team moved", "Alice's team moved from Berlin to Lisbon.",
                    ).pages[0].filename
    (item,) = items(field)[0]
    outcome = resolve_item(field, item.id[:4], "accept")
    assert outcome["action"] == "accept"
    assert field.load(new)[1].get("review") is None
    assert field.load(old)[1].get("superseded_by") == new
    assert old not in [h.filename for h in field.search("Alice team", mode="bm25").results]
    assert items(field)[0] == []
    (done,) = items(field, include_resolved=True)[0]
    assert done.status == "accepted"
    assert _all_pages(field) == before | {new}
    with pytest.raises(deepfield.ReviewItemError, match="already accepted"):
        resolve_item(field, item.id, "keep-both")


def test_merge_appends_and_archives_never_deletes(field: deepfield.Field) -> None:
    old = _seed(field)
    new = field.add("Alice's team moved", "Alice's team moved from Berlin to Lisbon.",
                    frontmatter={"source": "https://example.com/memo"}).pages[0].filename
    before = _all_pages(field)
    (item,) = items(field)[0]
    outcome = resolve_item(field, item.id, "merge")
    assert outcome["archived"].startswith("archive/")
    merged = field.load(old)[1]
    assert "moved from Berlin to Lisbon" in merged.body
    assert merged.get("sources") == ["https://example.com/memo"]
    assert not (field.path / new).exists()
    assert _all_pages(field) == before


def test_keep_both_and_corrupt_queue_lines(field: deepfield.Field) -> None:
    _seed(field)
    new = field.add("Alice's team moved", "Alice's team moved from Berlin to Lisbon.",
                    ).pages[0].filename
    with (field.path / REVIEW_DIR / QUEUE_FILE).open("a") as handle:
        handle.write("{not json\n")
    queued, warnings = items(field)
    assert len(queued) == 1 and warnings == [f"{REVIEW_DIR}/{QUEUE_FILE}: line 2 is corrupt, "
                                             "skipped"]
    resolve_item(field, queued[0].id, "keep-both")
    assert field.load(new)[1].get("review") is None
    with pytest.raises(deepfield.ReviewItemError):
        resolve_item(field, "zzzz", "accept")
    with pytest.raises(deepfield.ReviewItemError):
        resolve_item(field, queued[0].id, "delete")


def test_cli_review(cli: Cli, tmp_path: Path) -> None:
    cli("new", "notes")
    cli("add", "notes", "Alice's team is based in the Berlin office.", "--title", "Alice team")
    out = cli.json("add", "notes", "Alice's team moved from Berlin to Lisbon.",
                   "--title", "Alice team moved")
    assert any("review" in w for w in out["warnings"])
    listed = cli.json("review", "notes")
    (item,) = listed["items"]
    assert item["kind"] == "contradiction"
    text = cli("review", "notes").output
    assert item["id"] in text
    done = cli.json("review", "notes", item["id"], "accept")
    assert done["supersede"]["superseded"] == ["alice-team.md"]
    assert cli.json("review", "notes")["items"] == []
    lines = (tmp_path / "clistore" / "notes" / REVIEW_DIR / QUEUE_FILE).read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["pending", "accepted"]


def test_a_proposed_supersession_waits_for_confirmation(field: deepfield.Field) -> None:
    from deepfield.manage.review import propose

    old = field.add("Office", "The office is in Berlin.").pages[0].filename
    new = field.add("Office address", "Our office address: Lisbon, Rua Augusta 1.",
                    review=False).pages[0].filename
    item = propose(field, new, old, "the LLM says the office moved")
    assert field.load(new)[1].get("review") == "pending"
    assert field.load(old)[1].get("superseded_by") is None  # nothing applied yet
    resolve_item(field, item, "accept")
    assert field.load(old)[1].get("superseded_by") == new
    assert field.load(new)[1].get("review") is None


def test_merge_keeps_supersession_links_sound(field: deepfield.Field) -> None:
    from deepfield.manage.review import propose

    old = field.add("Office", "The office is in Berlin.").pages[0].filename
    older = field.add("Office 2019", "The office was in Bonn.", review=False).pages[0].filename
    # the new page replaces both; merging it into `old` must not make `old` supersede itself
    new = field.add("Office now", "The office is in Lisbon.", review=False,
                    frontmatter={"supersedes": [old, older]}).pages[0].filename
    assert field.load(old)[1].get("superseded_by") == new
    before = _all_pages(field)
    resolve_item(field, propose(field, new, old, "same office"), "merge")
    merged = field.load(old)[1]
    assert merged.get("supersedes") == older and merged.get("superseded_by") is None
    assert field.load(older)[1].get("superseded_by") == old
    assert "Lisbon" in merged.body and not (field.path / new).exists()
    assert old in [h.filename for h in field.search("office", mode="bm25").results]
    assert _all_pages(field) == before


def test_a_renamed_page_keeps_its_flag_while_items_are_pending(field: deepfield.Field) -> None:
    from deepfield.manage.review import propose

    a = field.add("Office", "The office is in Berlin.").pages[0].filename
    b = field.add("Office hours", "The office opens at nine.").pages[0].filename
    new = field.add("Office update", "The office is in Lisbon now.", review=False).pages[0]
    first = propose(field, new.filename, a, "moved?")
    propose(field, new.filename, b, "hours?")
    (field.path / new.filename).rename(field.path / "office-latest.md")
    field.ensure_synced(embed=False)
    resolve_item(field, first, "keep-both")
    assert field.load("office-latest")[1].get("review") == "pending"  # one item still open


def test_superseding_by_hand_settles_the_pairs_review_item(cli: Cli) -> None:
    """`deepfield supersede` (either way round) or a page written with ``supersedes`` decides
    what the queue asked about that pair: the item and the page's flag go."""
    cli("new", "notes")
    cli("add", "notes", "Alice's team is based in the Berlin office.", "--title", "Alice team")
    cli("add", "notes", "Alice's team moved from Berlin to Lisbon.", "--title", "Alice team moved")
    cli("add", "notes", "Bob's budget is 40k EUR for 2024.", "--title", "Bob budget")
    cli("add", "notes", "Bob's budget is 55k EUR for 2024.", "--title", "Bob budget revised")
    alice, bob = cli.json("review", "notes")["items"]
    assert (alice["new"], bob["new"]) == ("alice-team-moved.md", "bob-budget-revised.md")
    # The queue's "new" page is the one superseded here: the pair is settled all the same.
    done = cli.json("supersede", "notes", "alice-team-moved", "alice-team")
    assert done["settled_reviews"] == [alice["id"]]
    assert [i["id"] for i in cli.json("review", "notes")["items"]] == [bob["id"]]
    shown = cli.json("read", "notes", "alice-team-moved")
    assert "review" not in (shown.get("frontmatter") or {})
    settled = [i for i in cli.json("review", "notes", "--all")["items"] if i["id"] == alice["id"]]
    assert settled and settled[0]["status"] == "superseded"
    # A page rewritten with `supersedes:` settles its own pair.
    text = "---\ntitle: Bob budget revised\nsupersedes: bob-budget\n---\nBob's budget is " \
           "55k EUR for 2024.\n"
    cli("write", "notes", "-", "--name", "bob-budget-revised", input=text)
    assert cli.json("review", "notes")["items"] == []


def test_a_name_with_digits_is_one_name_not_a_value() -> None:
    from deepfield.manage.review import compare, features
    from deepfield.page import Page

    old = features(Page(body="We chose NMC cells on 2024-03-12."), "Battery choice")
    new = features(Page(body="We now choose LiFePO4 cells, decided 2024-06-01."),
                   "Battery choice v2")
    assert "lifepo4" in new.entities and "v2" in new.title
    assert new.values == {"2024-06-01"}  # not "4" (LiFePO4) or "2" (v2)
    found = compare(new, old)
    assert found is not None and found[0] == "contradiction"
    assert found[1].endswith("→ 2024-06-01, lifepo4"), found[1]


def test_skeleton_headings_do_not_make_pages_duplicates(keyword_store: deepfield.Store) -> None:
    # Method pages added without text share only `domain add`'s skeleton (## Problem,
    # ## Method …), which made "Reflexion" 83% the same as "Reflexion loops".
    from deepfield.domains.domain import add_atomic, create_domain

    create_domain(keyword_store, "agents")
    field = keyword_store.field("agents")
    for title in ("MemGPT", "Reflexion loops", "Reflexion", "MemGPT v2"):
        result = add_atomic(field, title, "method", category="Memory")
        assert not [w for w in result.warnings if "duplicate" in w], title
    assert items(field)[0] == []
    # Sections with text still count: the same text under the skeleton is a duplicate.
    text = "# {}\n\n## Problem\n\nAgents forget long chats.\n\n## Method\n\nPaged memory.\n"
    add_atomic(field, "Paged one", "method", text=text.format("Paged one"))
    again = add_atomic(field, "Paged two", "method", text=text.format("Paged one"))
    assert any("duplicate" in w for w in again.warnings)


def test_a_page_whose_successor_was_deleted_counts_for_duplicates(field: deepfield.Field
                                                                  ) -> None:
    # Search shows a page again once its successor is deleted by hand; the duplicate finder
    # still skipped it as superseded, so a new copy of it was never queued.
    field.add("Deploy checklist", "Run the tests, tag the release, push the image, "
              "announce in the channel.")
    field.add("Deploy notes", "A newer deploy write-up about something else entirely.")
    supersede(field, "deploy-checklist", "deploy-notes")
    (field.path / "deploy-notes.md").unlink()
    field.index()
    field.add("Deploy steps", "Run the tests, tag the release, push the image, "
              "announce in the channel.")
    (item,) = items(field)[0]
    assert (item.kind, item.old) == ("duplicate", "deploy-checklist.md")
