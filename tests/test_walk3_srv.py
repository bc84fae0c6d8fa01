"""The HTTP server, pages and their frontmatter, domain pages and context, used as a demanding
client would (third walk): hints in HTTP's terms, odd paths, odd frontmatter."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield.server import create_app

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client(keyword_store: deepfield.Store) -> TestClient:
    field = keyword_store.create_field("notes")
    field.add("Woks", "Carbon steel woks heat quickly.\n", name="woks")
    return TestClient(create_app(keyword_store), client=("127.0.0.1", 40000), base_url=BASE)


def test_budget_hints_name_the_query_parameter(client: TestClient) -> None:
    refused = client.get("/notes/_/research", params={"q": "woks heat", "budget": 50})
    assert refused.status_code == 400
    hint = refused.json()["error"]["hint"]
    assert "--budget" not in hint and "budget=" in hint  # was "raise --budget to …"
    built = client.get("/notes/_/context", params={"task": "woks heat " * 60, "budget": 100})
    assert built.status_code == 200, built.text
    said = [*built.json()["warnings"], *(o["reason"] for o in built.json()["omitted"])]
    assert any("budget=" in text for text in said), said
    assert not any("--" in text for text in said), said


def test_the_deepfield_prefix_alone_is_a_404_naming_the_routes(client: TestClient) -> None:
    for path in ("/notes/_/", "/notes/_"):
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code == 404, path  # /_/ was a 307 to /_, a 404 about pages
        assert "/notes/_/context" in answer.json()["error"]["hint"]
    assert client.put("/notes/_", content=b"x").status_code in (400, 404)


def test_a_title_that_is_a_list_is_a_warning(client: TestClient) -> None:
    body = b"---\ntitle: [a, b]\nsummary: {x: 1}\n---\n\nCast iron pans.\n"
    written = client.put("/notes/pans.md", content=body)
    assert written.status_code in (200, 201), written.text
    warnings = written.json()["warnings"]
    assert any("title is a YAML list" in w and "['a', 'b']" in w for w in warnings), warnings
    assert any("summary is a YAML mapping" in w for w in warnings), warnings


def test_a_put_over_one_part_of_a_split_page_keeps_it_a_part(
        keyword_store: deepfield.Store, client: TestClient) -> None:
    field = keyword_store.field("notes")
    body = "".join(f"## Section {i}\n\n" + "Woks and pans and steel. " * 40 + "\n\n"
                   for i in range(12))
    written = field.add("Long", body, name="long")
    names = [p.filename for p in written.pages]
    assert "long-part-2.md" in names, names
    before = deepfield.Page.parse((field.path / "long-part-2.md").read_text("utf-8"))
    answer = client.put("/notes/long-part-2.md", content=b"## Section 4\n\nRewritten.\n")
    assert answer.status_code in (200, 204), answer.text
    after = deepfield.Page.parse((field.path / "long-part-2.md").read_text("utf-8"))
    for key in ("split_from", "part", "parts", "uuid"):
        assert after.get(key) == before.get(key), key  # were dropped: a page of its own
    own = b"---\npart: 9\n---\n\nMine.\n"  # a body naming its own part keys is kept as sent
    assert client.put("/notes/long-part-2.md", content=own).status_code in (200, 204)
    mine = deepfield.Page.parse((field.path / "long-part-2.md").read_text("utf-8"))
    assert mine.get("part") == 9 and mine.get("split_from") is None


def test_a_split_taxonomy_names_lines_of_its_part_files(keyword_store: deepfield.Store) -> None:
    """The tree was parsed from the joined parts: a node in part 2 had the line of the joined
    text, which is no line of any file."""
    from deepfield.domains.domain import create_domain, taxonomy_report

    create_domain(keyword_store, "research")
    domain = keyword_store.field("research")
    lines = ["---", "title: Taxonomy", "role: taxonomy", "---", "# Taxonomy", ""]
    for c in range(40):
        lines += [f"## Category {c}"] + [
            f"- Concept {c}.{k}: a description of this concept that takes some room"
            for k in range(6)] + [""]
    lines += ["## Category 0", ""]  # a repeat, in the last part
    assert len(domain.write("\n".join(lines), name="taxonomy").pages) > 1
    report = taxonomy_report(domain)
    for node in report.taxonomy.nodes():
        text = (domain.path / node.file).read_text("utf-8").split("\n")
        assert node.name in text[node.line - 1], (node.file, node.line, node.name)
    last = report.taxonomy.roots[-1]
    assert last.file != "taxonomy.md"
    tree = report.to_json()["tree"]
    assert tree[-1]["file"] == last.file and tree[0]["file"] == "taxonomy.md"
    repeat = [w for w in report.taxonomy.warnings if "repeats" in w]
    assert repeat and repeat[0].startswith(f"{last.file} line {last.line}:"), repeat
    assert "(taxonomy.md line " in repeat[0]


def test_left_out_reasons_state_the_room_the_finished_context_leaves(
        keyword_store: deepfield.Store) -> None:
    """The intro was left out at the first packing (half the budget kept for research) and
    its reason said so ("283 left") though research took 13 tokens and 558 were left."""
    from deepfield.context import FENCE_TOKENS, build_context

    field = keyword_store.create_field("notes")
    field.write_intro(("# Notes\n\n" + " ".join(f"intro{j}" for j in range(300))
                       + ".\n").encode())
    field.add("Woks", "Carbon steel woks heat quickly.\n", name="woks")
    built = build_context(field, "woks heat", budget=650)
    (intro,) = [o for o in built.omitted if o.filename == "index.md"]
    left = built.budget - built.tokens - FENCE_TOKENS
    assert intro.reason == f"over the budget: needs {intro.tokens} tokens, {left} left"


def test_a_page_made_by_hand_under_a_non_spec_name_can_be_deleted(
        keyword_store: deepfield.Store, client: TestClient) -> None:
    folder = keyword_store.field("notes").path
    (folder / "My Notes.md").write_text("# My notes\n\nHand made woks.\n", encoding="utf-8")
    assert client.get("/notes/My%20Notes.md").status_code == 200
    gone = client.delete("/notes/My%20Notes.md")
    assert gone.status_code == 204, gone.text  # was 400 "not a spec filename"
    assert gone.headers["x-deepfield-archived-as"] == "archive/My Notes.md"
    assert not (folder / "My Notes.md").exists()
    assert client.delete("/notes/My%20Notes.md").status_code == 404  # gone: as any page
    assert client.put("/notes/My%20Notes.md", content=b"x").status_code == 400


def test_not_found_hints_name_routes_not_cli_commands(client: TestClient) -> None:
    # They said "list fields with `deepfield ls`" and "see the page's headings with
    # `deepfield read FIELD PAGE --outline`": commands an HTTP client cannot run.
    client.put("/notes/pans.md", content=b"# Pans\n\n## Heat\n\nCast iron.\n")
    answers = {
        "GET /": client.get("/nope/_/pages"),
        "/notes/_/pages": client.get("/notes/_/read/nothing-here"),
        "view=outline": client.get("/notes/_/read/pans", params={"section": "Nope"}),
    }
    for wanted, answer in answers.items():
        assert answer.status_code == 404, answer.text
        hint = answer.json()["error"]["hint"]
        assert wanted.replace("/notes/", "/FIELD/") in hint and "deepfield ls" not in hint
    assert client.put("/nope/a.md", content=b"x").status_code == 404


def test_an_empty_context_says_why_without_claiming_the_field_has_no_page(
        keyword_store: deepfield.Store) -> None:
    """The warning said "nothing for --level deep to load (no page)" of a field with pages;
    the reason was a task of common words alone."""
    from deepfield.context import build_context

    field = keyword_store.create_field("notes")
    field.add("Woks", "Carbon steel woks heat quickly.\n", name="woks")
    (deep,) = build_context(field, "do it").warnings
    assert "no page" not in deep and "'do it' names nothing to research" in deep
    (medium,) = build_context(field, "woks", level="medium").warnings
    assert "no page" not in medium and "no always-load page" in medium


def test_listing_links_hand_made_names_that_hold_url_characters(
        keyword_store: deepfield.Store, client: TestClient) -> None:
    from urllib.parse import unquote

    folder = keyword_store.field("notes").path
    for name in ("Notes #1.md", "100% done.md", "Plan (v2).md"):
        (folder / name).write_text(f"# {name[:-3]}\n\nHand made.\n", encoding="utf-8")
    client.put("/notes/pans.md", content=b"# Pans\n\nCast iron.\n")  # renders listing.md
    listing = client.get("/notes/listing.md").text
    targets = [line.split("](", 1)[1].split(")", 1)[0] for line in listing.splitlines()
               if line.startswith("- [")]
    assert "Notes%20%231.md" in targets and "100%25%20done.md" in targets, targets
    assert "Plan%20%28v2%29.md" in targets  # as before
    for target in targets:  # every link reaches its page
        assert client.get(f"/notes/{target}").status_code == 200, unquote(target)
