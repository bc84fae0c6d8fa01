"""The rough edges a new user hit (issue 18 items 5-10 and 12), each through the surface where
it was found: the CLI, the library or the HTTP server."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield.cli import main
from deepfield.errors import DuplicateUuidError
from deepfield.server import Auth, create_app
from deepfield.server.mcp_server import BasicAuthMiddleware

from .conftest import MainCli

UUID = "11111111-2222-3333-4444-555555555555"


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _page(title: str, body: str, uuid: str = UUID) -> str:
    return f"---\ntitle: {title}\nuuid: {uuid}\n---\n{body}\n"


@pytest.fixture
def kcli(keyword_store: deepfield.Store, capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> MainCli:
    keyword_store.create_field("n")
    return MainCli(keyword_store.root, capsys, monkeypatch)


def _served(store: deepfield.Store) -> TestClient:
    return TestClient(create_app(store), client=("127.0.0.1", 5000),
                      base_url="http://127.0.0.1:8765")


# ---------------------------------------------------------------- 5: one uuid, two pages


def test_two_pages_with_one_uuid(keyword_store: deepfield.Store, kcli: MainCli) -> None:
    folder = keyword_store.root / "n"
    (folder / "a.md").write_text(_page("A", "body a"))
    (folder / "b.md").write_text(_page("B", "body b"))
    indexed = kcli("index")
    assert indexed.exit_code == 0
    assert f"a.md, b.md: all carry uuid {UUID}" in indexed.stderr  # index warns
    read = kcli("read", "n", UUID)
    assert read.exit_code == 1
    assert "belongs to 2 pages in n: a.md, b.md" in read.stderr  # names both
    assert "give the full uuid" not in read.stderr  # it is the full uuid
    written = kcli("write", "n", "-", input=_page("C", "body c"))
    assert written.exit_code == 1
    assert "a.md, b.md" in written.stderr and "not written" in written.stderr
    assert "body a" in (folder / "a.md").read_text()  # neither page was replaced
    assert "body b" in (folder / "b.md").read_text()
    with pytest.raises(DuplicateUuidError):
        keyword_store.field("n").write(_page("C", "body c"))
    with _served(keyword_store) as http:  # PUT goes on returning 409
        put = http.put("/n/a.md", content=_page("C", "body c").encode())
        assert put.status_code == 409 and "b.md" in put.text
        put = http.put("/n/c.md", content=_page("C", "body c").encode())
        assert put.status_code == 409


# ---------------------------------------------------------------- 6: terminal text, PUT names


def test_terminal_output_strips_control_characters(kcli: MainCli) -> None:
    title = "Bell \a here \x1b]0;owned\x07 \x1b[2J\u202eexe.txt"
    added = kcli("add", "n", "--title", title, "A line with a \x1b[31mred\x1b[0m word.",
                 "--json")
    assert added.exit_code == 0, added.stderr
    name = json.loads(added.stdout)["pages"][0]["filename"]
    for args in (("ls", "n"), ("search", "bell"), ("read", "n", name),
                 ("search", "word", "--unit", "chunk")):
        shown = kcli(*args)
        assert shown.exit_code == 0, (args, shown.stderr)
        assert "Bell" in shown.stdout or "word" in shown.stdout
        for char in ("\a", "\x1b", "\u202e"):
            assert char not in shown.stdout + shown.stderr, (args, char)
    as_json = kcli("search", "bell", "--json")
    assert "\\u0007" in as_json.stdout  # JSON is exact (escaped), for agents


def test_put_to_an_invalid_name_is_400(keyword_store: deepfield.Store) -> None:
    keyword_store.create_field("n")
    with _served(keyword_store) as http:
        for name in ("a%00b.md", "a" * 300 + ".md"):
            put = http.put(f"/n/{name}", content=b"# Page\n\ntext\n")
            assert put.status_code == 400, (name, put.status_code, put.text)
            assert http.get(f"/n/{name}").status_code == 404  # reading one: no such page


# ---------------------------------------------------------------- 7: passwd while serving


def _until(check: Callable[[], bool], seconds: float = 2.0) -> float:
    """Seconds until ``check()`` holds (fails after ``seconds``)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < seconds, "not picked up in time"
        time.sleep(0.05)
    return time.monotonic() - started


def test_servers_pick_up_passwd_within_2_s(keyword_store: deepfield.Store,
                                            kcli: MainCli) -> None:
    page = b"# Note\n\ntext\n"

    async def ok(scope: Any, receive: Any, send: Any) -> None:  # stands for the MCP app
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    mcp = TestClient(BasicAuthMiddleware(ok, Auth.for_store(keyword_store.root)),
                     client=("127.0.0.1", 5000))
    with _served(keyword_store) as http:
        assert http.put("/n/before.md", content=page).status_code == 201  # loopback, no users
        assert mcp.post("/mcp").status_code == 200
        done = kcli("passwd", "alice", "--password-stdin", input="s3cret\n")
        assert done.exit_code == 0, done.stderr
        _until(lambda: http.put("/n/race.md", content=page).status_code == 401)
        wrong = http.put("/n/after.md", content=page, headers=basic("alice", "nope"))
        assert wrong.status_code == 401
        right = http.put("/n/after.md", content=page, headers=basic("alice", "s3cret"))
        assert right.status_code == 201
        _until(lambda: mcp.post("/mcp").status_code == 401)
        assert mcp.post("/mcp", headers=basic("alice", "s3cret")).status_code == 200
        remote = TestClient(BasicAuthMiddleware(ok, Auth.for_store(keyword_store.root)),
                            client=("203.0.113.7", 5000))
        assert remote.post("/mcp").status_code == 401


# ---------------------------------------------------------------- 8: sections in Chinese


def test_section_lookup_in_chinese(keyword_store: deepfield.Store, kcli: MainCli) -> None:
    text = ("# 项目\n\n## 供应商\n\n我们选择了供应商甲。\n\n## 价格\n\n价格是十元。\n\n"
            "## Supplier notes\n\nSome text.\n")
    keyword_store.field("n").write(text, name="cjk")
    found = kcli("read", "n", "cjk", "--section", "供应商")
    assert found.exit_code == 0, found.stderr
    assert found.stdout.startswith("## 供应商") and "供应商甲" in found.stdout
    assert "价格" not in found.stdout
    assert kcli("read", "n", "cjk", "--section", "项目 > 价格").stdout.startswith("## 价格")
    missing = kcli("read", "n", "cjk", "--section", "不存在")
    assert missing.exit_code == 1
    assert "no section '不存在'" in missing.stderr and "matches" not in missing.stderr
    assert kcli("read", "n", "cjk", "--section", "supplier-notes").exit_code == 0


# ---------------------------------------------------------------- 9: replacing keeps the old


def test_replacing_a_page_by_name_keeps_the_previous_version(
        keyword_store: deepfield.Store, kcli: MainCli) -> None:
    folder = keyword_store.root / "n"
    assert kcli("add", "n", "--title", "Plan", "--name", "plan", "First plan.").exit_code == 0
    first = (folder / "plan.md").read_text()
    replaced = kcli("add", "n", "--title", "Plan", "--name", "plan", "Second plan.")
    assert replaced.exit_code == 0 and "updated n/plan.md" in replaced.stdout
    assert "the version it replaced is kept as n/archive/plan.md" in replaced.stdout
    assert (folder / "archive" / "plan.md").read_text() == first
    written = kcli("write", "n", "-", "--name", "plan", "--json", input="# Plan\n\nThird plan.\n")
    previous = json.loads(written.stdout)["pages"][0]["previous"]
    assert previous.startswith("archive/plan--archived-")
    assert "Second plan." in (folder / previous).read_text()
    same = kcli("write", "n", "-", "--name", "plan", "--json", input="# Plan\n\nThird plan.\n")
    assert json.loads(same.stdout)["pages"][0] | {"bytes": 0} == {
        **json.loads(same.stdout)["pages"][0], "action": "unchanged", "previous": None,
        "bytes": 0}
    assert len(list((folder / "archive").iterdir())) == 2  # an unchanged write keeps nothing
    # `restore NAME` brings back the newest version; the first is named by its archive file.
    restored = kcli("restore", "n", "archive/plan.md", "--as", "plan-first")
    assert restored.exit_code == 0 and "First plan." in (folder / "plan-first.md").read_text()
    with _served(keyword_store) as http:  # PUT replaces as the spec says, copies nothing
        assert http.put("/n/plan.md", content=b"# Plan\n\nFourth.\n").status_code == 204
    assert len(list((folder / "archive").iterdir())) == 1


# ---------------------------------------------------------------- 10: superseded, one rule


def test_superseded_pages_are_hidden_by_every_search(keyword_store: deepfield.Store,
                                                     kcli: MainCli) -> None:
    fld = keyword_store.field("n")
    fld.add("Gasket supplier", "We buy gaskets from Acme.", review=False)
    fld.add("Gasket supplier 2026", "We buy gaskets from Mombasa Seals now.", review=False)
    assert kcli("supersede", "n", "gasket-supplier", "gasket-supplier-2026").exit_code == 0
    names = {h.filename for h in fld.search("gasket supplier", k=10).results}
    assert names == {"gasket-supplier-2026.md"}
    shown = kcli("search", "gasket supplier", "--json")
    assert [r["filename"] for r in json.loads(shown.stdout)["results"]] == [
        "gasket-supplier-2026.md"]
    with _served(keyword_store) as http:
        for query in ("gasket supplier", "asket suppl"):  # the second: substring fallback only
            hits = http.get("/n/search", params={"q": query, "mode": "bm25"}).json()
            assert [r["filename"] for r in hits["results"]] == ["gasket-supplier-2026.md"], query
    included = {h.filename for h in fld.search("gasket", include_superseded=True).results}
    assert "gasket-supplier.md" in included


# ---------------------------------------------------------------- 12: the small ones

STANDUP = """# Stand-up 4 May 2026

System: You are a helpful assistant. Always answer in JSON and never reveal secrets.
Alice: We picked LiFePO4 cells for the pack because they are safer than NMC.
Bob: Good, the LiFePO4 order goes out Friday with 48 cells.
Alice: I will test the BMS firmware v2.3 next week.
"""


def test_remember_keeps_digits_the_heading_date_and_no_system_prompt(
        keyword_store: deepfield.Store, tmp_path: Path) -> None:
    from deepfield.memorize import remember

    source = tmp_path / "standup.md"
    source.write_text(STANDUP)
    done = remember(keyword_store.create_field("n", exist_ok=True), source)
    assert "lifepo4" in done.filename and "LiFePO4" in done.title
    page = (keyword_store.root / "n" / done.filename).read_text()
    # The session's date is its session_date; created/updated say when it was written.
    assert "When: 4 May 2026." in page and "session_date: 4 May 2026" in page
    assert "helpful assistant" not in done.memo and "System" not in done.memo
    assert "- System" not in page  # not a participant either


def test_export_counts_pages_not_the_introduction(keyword_store: deepfield.Store,
                                                   tmp_path: Path) -> None:
    from deepfield.importers.export import export_field

    fld = keyword_store.create_field("intro", intro="What this field is for.")
    for i in range(11):
        fld.add(f"Note {i}", f"Note number {i}.", review=False)
    report = export_field(fld, tmp_path / "out")
    assert report.pages == 11 and report.intro
    assert len(list((tmp_path / "out").glob("*.md"))) == 12  # the pages and index.md


def test_the_readme_example_is_safe_to_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPFIELD_EMBEDDER", "none")
    example = example.replace('deepfield.open("memory", create=True)',
                              'deepfield.open("memory", create=True, embedder=None)')
    for _ in range(2):
        exec(compile(example, "README.md", "exec"), {})
    names = sorted(p.name for p in (tmp_path / "memory" / "notes").glob("*.md"))
    assert names == ["carbon-fibre-woks.md", "listing.md"]
    assert "carbon-fibre-woks.md" in capsys.readouterr().out


def test_store_after_the_command_and_k_hints(keyword_store: deepfield.Store,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    fld = keyword_store.create_field("n", exist_ok=True)
    fld.add("Woks", "Carbon fibre woks heat unevenly.", review=False)

    def run(*args: str) -> tuple[int, str, str]:
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    root = str(keyword_store.root)
    code, out, err = run("search", "woks", "--store", root)
    assert code == 0 and "n/woks.md" in out, err
    code, out, _ = run("search", "woks", f"--store={root}", "--json")
    assert code == 0 and json.loads(out)["results"][0]["filename"] == "woks.md"
    for wrong in ("--limit", "-n", "--top"):
        code, _, err = run("--store", root, "search", "woks", wrong, "3")
        assert code == 2 and "Did you mean '-k'?" in err, err


def test_scores_past_1_after_reads_are_bounded_and_documented(
        keyword_store: deepfield.Store) -> None:
    from deepfield.manage.activation import ACTIVATION_WEIGHT

    fld = keyword_store.create_field("n", exist_ok=True)
    fld.add("Woks", "Carbon fibre woks heat unevenly.", review=False)
    for _ in range(5):
        fld.read("woks")
    score = fld.search("woks").results[0].score
    assert 1.0 < score <= 1.0 + ACTIVATION_WEIGHT
    api = (Path(__file__).resolve().parent.parent / "docs" / "API.md").read_text()
    assert "up to 1.15" in api


def test_outline_keeps_code_spans(keyword_store: deepfield.Store) -> None:
    text = ("# Mod\n\n## Code\n\nThe `__version__` string lives in `mf/__init__.py`, "
            "and *emphasis* goes; snake_case stays.\n")
    keyword_store.create_field("n", exist_ok=True).write(text, name="code")
    outline = keyword_store.create_field("n", exist_ok=True).read("code", outline_only=True).text
    assert ("The `__version__` string lives in `mf/__init__.py`, and emphasis goes; "
            "snake_case stays.") in outline
