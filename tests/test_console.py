"""The memory console at /ui/ without a browser: its security rules (CSRF, Origin, login,
stale edits), escaping of memory text, and the bad-input pages. The browser walks through the
views in test_console_browser.py."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import deepfield
from deepfield.server import Auth, create_app, hash_password
from deepfield.server.console.render import MAX_RENDER_BYTES, chain_graph

BASE = "http://127.0.0.1:8765"
EVIL = "<script>document.title='pwned'</script>"
HOSTILE = (f"---\ntitle: \"Tricky <img src=x onerror=alert(1)>\"\nsummary: \"sum {EVIL}\"\n"
           f"note: \"<b>bold?</b>\"\n---\n# Tricky page\n\n{EVIL}\n\n<div onclick=\"x()\">raw "
           "html block</div>\n\nA [bad link](javascript:alert(1)) and a "
           "[good one](https://example.org/).\n\nSearchable marmalade words.\n")


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def notes(store: deepfield.Store) -> deepfield.Field:
    field = store.create_field("notes", intro="Notes about cooking.")
    field.add("Woks", "Carbon steel woks heat quickly.\n\n## Care\n\nOil them after use.\n",
              summary="Woks and their care.", name="woks")
    (field.path / "tricky.md").write_text(HOSTILE, encoding="utf-8")
    return field


def local(app: object, base_url: str = BASE) -> TestClient:
    return TestClient(app, client=("127.0.0.1", 40000), base_url=base_url)  # type: ignore[arg-type]


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token in the form"
    return found.group(1)


def etag_of(html: str) -> str:
    found = re.search(r'name="etag" value="([^"]*)"', html)
    assert found
    return found.group(1).replace("&#34;", '"').replace("&quot;", '"')


def test_memory_text_is_always_escaped(store: deepfield.Store, notes: deepfield.Field) -> None:
    client = local(create_app(store))
    views = [client.get("/ui/f/notes/"), client.get("/ui/f/notes/p/tricky.md"),
             client.get("/ui/f/notes/p/tricky.md?view=outline"),
             client.get("/ui/f/notes/raw/tricky.md"), client.get("/ui/f/notes/edit/tricky.md"),
             client.get("/ui/f/notes/search", params={"q": "marmalade script", "mode": "bm25"}),
             client.get("/ui/f/notes/search", params={"q": "marmalade", "unit": "chunk"}),
             client.get("/ui/f/notes/research", params={"q": "marmalade words"})]
    for response in views:
        assert response.status_code == 200, response.url
        html = response.text
        assert "<script" not in html, response.url
        assert "<img src=x" not in html and '<div onclick' not in html, response.url
        assert 'href="javascript' not in html.lower(), response.url
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy
        assert response.headers["x-frame-options"] == "DENY"
    page = views[1].text
    assert "&lt;script&gt;document.title=" in page  # shown as text
    assert "&lt;div onclick=" in page  # raw HTML in Markdown is not passed through
    assert '<a href="https://example.org/">good one</a>' in page
    assert "bad link" in page
    assert "&lt;b&gt;bold?&lt;/b&gt;" in page  # frontmatter values too
    assert "marmalade" in views[5].text and "tricky.md" in views[5].text


def test_forms_need_the_session_token_and_the_same_origin(store: deepfield.Store,
                                                          notes: deepfield.Field) -> None:
    client = local(create_app(store))
    form = client.get("/ui/f/notes/edit/woks.md")
    cookie = form.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "Path=/ui" in cookie
    token, etag = csrf_of(form.text), etag_of(form.text)
    before = (notes.path / "woks.md").read_bytes()
    edit = {"text": "# Woks\n\nChanged.\n", "etag": etag}
    url = "/ui/f/notes/edit/woks.md"
    refused = [
        client.post(url, data=edit),  # no token
        client.post(url, data={**edit, "csrf": "x" * 43}),  # not this session's
        client.post(url, data={**edit, "csrf": token}, headers={"Origin": "https://evil.example"}),
        client.post(url, data={**edit, "csrf": token}, headers={"Origin": "null"}),
        client.post(url, data={**edit, "csrf": token}, headers={"Sec-Fetch-Site": "cross-site"}),
    ]
    for response in refused:
        assert response.status_code == 403, response.text
        assert "<h1>403</h1>" in response.text
    # A forged cross-site form post: another site's page, so no cookie and a foreign Origin.
    forged = local(create_app(store)).post(
        url, data={**edit, "csrf": token}, headers={"Origin": "https://evil.example"})
    assert forged.status_code == 403
    assert (notes.path / "woks.md").read_bytes() == before
    # Reads from a script on another site are refused too; the console's own are not.
    assert client.get("/ui/", headers={"Origin": "https://evil.example"}).status_code == 403
    assert client.get("/ui/", headers={"Origin": BASE}).status_code == 200
    # DNS rebinding: a loopback request naming another host.
    assert local(create_app(store), "http://evil.example:8765").get("/ui/").status_code == 403
    saved = client.post(url, data={**edit, "csrf": token}, headers={"Origin": BASE},
                        follow_redirects=False)
    assert saved.status_code == 303 and saved.headers["location"].startswith(
        "/ui/f/notes/p/woks.md")
    assert "Changed." in (notes.path / "woks.md").read_text()
    note = "/ui/f/notes/p/woks.md?done=Call+0800+now"
    assert "Call 0800 now" in client.get(note, headers={"Sec-Fetch-Site": "same-origin"}).text
    assert "Call 0800 now" not in client.get(note, headers={"Sec-Fetch-Site": "cross-site"}).text
    # From another machine without users: reads open, writes refused (the HTTP API's rule).
    remote = TestClient(create_app(store), client=("203.0.113.7", 4000))
    assert remote.get("/ui/f/notes/").status_code == 200
    token = csrf_of(remote.get("/ui/f/notes/edit/woks.md").text)
    assert remote.post(url, data={**edit, "csrf": token}).status_code == 403


def test_a_stale_edit_is_refused_with_both_versions(store: deepfield.Store,
                                                    notes: deepfield.Field) -> None:
    client = local(create_app(store))
    form = client.get("/ui/f/notes/edit/woks.md").text
    token, etag = csrf_of(form), etag_of(form)
    # Someone else saves first, through the HTTP API.
    assert client.put("/notes/woks.md", content=b"# Woks\n\nTheirs: seasoned.\n"
                      ).status_code == 204
    stale = client.post("/ui/f/notes/edit/woks.md", data={
        "csrf": token, "etag": etag, "text": "# Woks\n\nMine: <polished>.\n"})
    assert stale.status_code == 412
    assert "Mine: &lt;polished&gt;." in stale.text  # your version, in the textarea
    assert "Theirs: seasoned." in stale.text and 'id="current"' in stale.text
    assert "Theirs: seasoned." in (notes.path / "woks.md").read_text()
    # Saving over the current version is a deliberate second submit (it carries its ETag).
    again = client.post("/ui/f/notes/edit/woks.md", data={
        "csrf": token, "etag": etag_of(stale.text), "text": "# Woks\n\nMine.\n"},
        follow_redirects=False)
    assert again.status_code == 303
    assert "Mine." in (notes.path / "woks.md").read_text()
    # Bad YAML is refused with the writer's message, and the text is kept in the form.
    broken = client.post("/ui/f/notes/edit/woks.md", data={
        "csrf": token, "etag": etag_of(client.get("/ui/f/notes/edit/woks.md").text),
        "text": "---\ntitle: [unclosed\n---\nbody kept\n"})
    assert broken.status_code == 400 and "YAML" in broken.text and "body kept" in broken.text
    # A new page: created once; a second "new" of the same name is 412, both versions shown.
    new = {"csrf": token, "etag": "", "name": "pans", "text": "# Pans\n\nCast iron.\n"}
    bad = client.post("/ui/f/notes/new", data={**new, "name": "Bad Name"})
    assert bad.status_code == 400 and "Cast iron." in bad.text and "Bad Name" in bad.text
    assert client.post("/ui/f/notes/new", data=new, follow_redirects=False).status_code == 303
    clash = client.post("/ui/f/notes/new", data={**new, "text": "# Pans\n\nSteel.\n"})
    assert clash.status_code == 412 and "Cast iron." in clash.text
    assert "Cast iron." in (notes.path / "pans.md").read_text()


def test_writes_need_the_login_when_users_exist(store: deepfield.Store,
                                                notes: deepfield.Field) -> None:
    auth = Auth({"alice": hash_password("pw", n=1 << 10)})
    client = local(create_app(store, auth=auth))
    page = client.get("/ui/f/notes/p/woks.md")
    assert page.status_code == 200 and "log in" in page.text  # reads stay open
    token = csrf_of(page.text)
    archive = "/ui/f/notes/p/woks.md/archive"
    denied = client.post(archive, data={"csrf": token})
    assert denied.status_code == 401
    assert denied.headers["www-authenticate"].startswith("Basic realm=")
    assert 'id="login-prompt"' in denied.text and "/ui/login" in denied.text
    assert client.post(archive, data={"csrf": token},
                       headers=basic("alice", "wrong")).status_code == 401
    assert (notes.path / "woks.md").exists()
    prompt = client.get("/ui/login")
    assert prompt.status_code == 401 and "www-authenticate" in prompt.headers
    logged = client.get("/ui/login?next=/ui/f/notes/", headers=basic("alice", "pw"),
                        follow_redirects=False)
    assert logged.status_code == 303 and logged.headers["location"] == "/ui/f/notes/"
    assert client.get("/ui/login?next=https://evil.example/", headers=basic("alice", "pw"),
                      follow_redirects=False).headers["location"] == "/ui/"
    done = client.post(archive, data={"csrf": token}, headers=basic("alice", "pw"),
                       follow_redirects=False)
    assert done.status_code == 303
    assert not (notes.path / "woks.md").exists() and (notes.path / "archive" / "woks.md").exists()


def test_pages_deepfield_cannot_render(store: deepfield.Store, notes: deepfield.Field) -> None:
    client = local(create_app(store))
    big = "---\ntitle: Big\n---\n# Big\n\n" + "".join(
        f"## Part {i}\n\n" + f"A long line of text about part {i}. " * 40 + "\n\n"
        for i in range(MAX_RENDER_BYTES // 1400 + 10))
    (notes.path / "big.md").write_text(big, encoding="utf-8")
    shown = client.get("/ui/f/notes/p/big.md")
    assert shown.status_code == 200 and 'id="too-large"' in shown.text
    assert 'id="outline"' in shown.text and "Part 3" in shown.text
    assert 'id="rendered"' not in shown.text and 'href="/ui/f/notes/raw/big.md"' in shown.text
    (notes.path / "broken.md").write_text("---\ntitle: [unclosed\n---\n# Body <b>\n",
                                          encoding="utf-8")
    broken = client.get("/ui/f/notes/p/broken.md")
    assert broken.status_code == 200 and "malformed YAML frontmatter" in broken.text
    assert 'id="as-is"' in broken.text and "title: [unclosed" in broken.text
    assert "# Body &lt;b&gt;" in broken.text
    (notes.path / "latin.md").write_bytes(b"# Caf\xe9\n\nnot UTF-8\n")
    latin = client.get("/ui/f/notes/p/latin.md")
    assert latin.status_code == 200 and "not valid UTF-8" in latin.text
    assert "not UTF-8" in latin.text and 'id="as-is"' in latin.text
    missing = client.get("/ui/f/notes/p/nope.md")
    assert missing.status_code == 404 and "no page" in missing.text
    assert client.get("/ui/f/nope/").status_code == 404
    assert client.get("/ui/f/notes/p/..%2F..%2Fdeepfield.toml").status_code in (400, 404)
    lost = client.get("/ui/nothing/here")
    assert lost.status_code == 404 and "<h1>404</h1>" in lost.text
    bad = client.get("/ui/f/notes/search", params={"q": "x", "mode": "fuzzy"})
    assert bad.status_code == 400 and "unknown search mode" in bad.text


def test_supersession_graph_and_status(store: deepfield.Store, notes: deepfield.Field) -> None:
    client = local(create_app(store))
    notes.add("Woks (2026)", "Carbon steel woks, now pre-seasoned.", name="woks-2026")
    token = csrf_of(client.get("/ui/f/notes/p/woks-2026.md").text)
    linked = client.post("/ui/f/notes/p/woks-2026.md/supersede",
                         data={"csrf": token, "old": "woks"}, follow_redirects=False)
    assert linked.status_code == 303
    page = client.get("/ui/f/notes/p/woks.md").text
    graph = page.split('id="graph"')[1].split("</svg>")[0]
    assert "woks.md" in graph and "woks-2026.md" in graph and "<line" in graph
    assert "superseded by woks-2026.md" in page
    cycle = client.post("/ui/f/notes/p/woks.md/supersede", data={"csrf": token, "old": "woks-2026"})
    assert cycle.status_code == 409 and "cycle" in cycle.text
    status = client.get("/ui/status").text
    assert "index health" in status and ">ok<" in status and "pending vectors" in status
    assert "last sync" in status and "never" not in status.split('id="status-notes"')[1]


def test_chain_graph_layout() -> None:
    """Columns follow the longest chain of older pages; unrelated pages are left out."""
    edges = {"c.md": {"b.md"}, "b.md": {"a.md"}, "d.md": {"a.md"}, "x.md": {"y.md"}}
    graph = chain_graph(edges, "b.md")
    assert graph is not None
    where = {n.filename: (n.x, n.y) for n in graph.nodes}
    assert set(where) == {"a.md", "b.md", "c.md", "d.md"}
    assert where["a.md"][0] < where["b.md"][0] == where["d.md"][0] < where["c.md"][0]
    assert len(graph.edges) == 3 and chain_graph(edges, "z.md") is None


def test_deepfield_ui_command_starts_the_console(keyword_store: deepfield.Store,
                                                 tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    import httpx

    keyword_store.create_field("notes").add("Woks", "Carbon fibre woks heat unevenly.")
    with subprocess.Popen(
        [sys.executable, "-m", "deepfield", "ui", str(keyword_store.root), "--port", "0",
         "--no-open", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:
        try:
            assert proc.stdout is not None
            info = json.loads(proc.stdout.readline())
            assert info["url"].endswith("/ui/") and info["fields"] == ["notes"]
            page = httpx.get(info["url"], timeout=10)
            assert page.status_code == 200 and "/ui/f/notes/" in page.text
        finally:
            proc.terminate()
            proc.wait(10)


def test_research_view_cites_a_wrapped_sentence_by_its_lines(store: deepfield.Store) -> None:
    field = store.create_field("prose")
    field.add("Valves", "The valve scheduler opens a valve when the soil is dry and\n"
              "closes it when the soil is wet. Grit blocked the valve seat\nonce in May.\n",
              name="valves")
    lines = (field.path / "valves.md").read_text().splitlines()
    first = next(n for n, line in enumerate(lines, 1) if line.startswith("The valve"))
    html = local(create_app(store)).get("/ui/f/prose/research",
                                        params={"q": "when did grit block the valve seat?"}).text
    assert f"valves.md:{first + 1}-{first + 2}</a>" in html  # the grit sentence
    assert "Grit blocked the valve seat once in May." in html
    assert "<b>last_line</b>" not in html  # a known key, not an extra
