"""The memory console end to end in a real browser: headless Chromium from Debian's packages,
driven by Selenium, against `deepfield serve` on 127.0.0.1 over a temporary store (the fake
embedder). One server and one browser for the module; each test is one step of the walk in
console_walk.py and saves its screenshots in a temporary folder (printed on failure)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .console_walk import CHROMEDRIVER, CHROMIUM, Walk, build_store, serve, start_browser

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is absent: `apt-get install chromium chromium-driver` (.ci/run does)")


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    assert CHROMEDRIVER.exists(), f"{CHROMEDRIVER} is missing: apt-get install chromium-driver"
    root = tmp_path_factory.mktemp("console")
    build_store(root / "store", "fake").close()
    with serve(root / "store", fake_embedder=True) as url:
        driver = start_browser(root / "profile")
        try:
            yield Walk(driver, url, root / "screenshots")
        finally:
            driver.quit()


def test_fields_and_pages(walk: Walk) -> None:
    walk.fields_and_pages()


def test_page_rendered_and_as_outline(walk: Walk) -> None:
    walk.page_views()


def test_search_in_three_modes(walk: Walk) -> None:
    walk.search()


def test_research_with_rounds_evidence_and_context(walk: Walk) -> None:
    walk.research()


def test_edit_and_a_stale_edit(walk: Walk) -> None:
    walk.edit_and_stale_edit()


def test_review_accept_and_the_supersession_graph(walk: Walk) -> None:
    walk.review_accept()


def test_forget_archive_and_restore(walk: Walk) -> None:
    walk.forget_archive_restore()


def test_status(walk: Walk) -> None:
    walk.status()


def test_memory_text_runs_no_script(walk: Walk) -> None:
    """A page holding a script, written through the HTTP API, shows the script as text."""
    import httpx

    hostile = ("# Pasted from the web\n\n<script>document.title='pwned'</script>\n\n"
               "<img src=x onerror=\"document.title='pwned'\">\n")
    put = httpx.put(f"{walk.url}/aurora/pasted.md", content=hostile.encode(), timeout=10)
    assert put.status_code == 201, put.text
    walk.open("/ui/f/aurora/p/pasted.md")
    assert "<script>document.title='pwned'</script>" in walk.text("#rendered")
    assert walk.driver.title != "pwned" and "pwned" not in walk.driver.title
    assert not walk.all("#rendered script") and not walk.all("#rendered img")
    walk.shot("escaped")


def test_a_forged_cross_site_form_post_is_refused(walk: Walk) -> None:
    """A page on another site posts a form to the console, even with a token it somehow got:
    Chromium sends its Origin (and not the SameSite=Strict cookie), so the answer is 403."""
    import http.server
    import threading

    import httpx

    walk.open("/ui/f/aurora/p/team.md")
    token = walk.css("#archive-form input[name=csrf]").get_attribute("value")
    trap = (f'<!doctype html><form method="post" action="{walk.url}/ui/f/aurora/p/team.md/'
            f'archive"><input type="hidden" name="csrf" value="{token}">'
            '<button id="go">claim your prize</button></form>').encode()

    class Trap(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(trap)

        def log_message(self, *_: object) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trap)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        walk.driver.get(f"http://localhost:{site.server_address[1]}/")  # another site
        walk.submit("#go")
        assert walk.text("#error h1") == "403", walk.text()
        assert "another site" in walk.text("#error")
    finally:
        site.shutdown()
        site.server_close()
    assert httpx.get(f"{walk.url}/aurora/team.md", timeout=10).status_code == 200


def test_screenshots_were_saved(walk: Walk) -> None:
    names = {p.name for p in walk.saved}
    for view in ("fields", "pages", "page", "search", "research", "edit", "stale-edit",
                 "review", "supersession", "forget", "archive", "status"):
        assert f"console-{view}.png" in names, view
    for path in walk.saved:
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
