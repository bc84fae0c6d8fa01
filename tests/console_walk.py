"""A walk through the memory console in headless Chromium (Debian's package, driven by
Selenium through Debian's chromedriver; no browser is ever downloaded).

Shared by tests/test_console_browser.py (fake embedder, screenshots to a temporary folder) and
scripts/console_screenshots.py (the default embedder, screenshots for docs/img/). Each step
drives one view as a person would, checks what it shows, and saves a screenshot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

import deepfield
from deepfield.config import EmbeddingConfig

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Without the background-networking flags Chromium keeps trying to reach Google's services,
# which on a machine without internet makes it slow and flaky.
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1000", "--hide-scrollbars"]
REPO = Path(__file__).resolve().parent.parent
FIELD = "aurora"
# `deepfield serve` in a subprocess, with the tests' fake embedder registered first.
FAKE_SERVE = ("import sys; from tests.fakes import register; register(); "
              "from deepfield.cli import main; main(sys.argv[1:])")

OFFICE = ("---\ntitle: Office location\nsummary: Where the team works.\n---\n"
          "# Office location\n\nThe office is in Nairobi, at the Westlands hub, "
          "next to the seed bank.\n")
OFFICE_MOVED = ("---\ntitle: Office location\nsummary: The office moved to Kisumu.\n---\n"
                "# Office location\n\nThe office moved from Nairobi to Kisumu, "
                "next to the seed bank, in May 2026.\n")
COLD = [("kickoff-2021", "Kickoff notes (2021)", "The first kickoff planned a drip kit."),
        ("supplier-list-2021", "Supplier list (2021)", "Seed trays came from a supplier in Pune."),
        ("trip-report-2022", "Trip report (2022)", "Visited three farms near Nakuru.")]


def build_store(root: Path, embedder: str) -> deepfield.Store:
    """A store with the bundled sample field, two pages that contradict each other (a review
    item), a page superseding another, and three pages nobody used for years."""
    store = deepfield.init(root, EmbeddingConfig(embedder))
    samples = resources.files("deepfield") / "samples" / FIELD
    intro = (samples / "index.md").read_text(encoding="utf-8")
    field = store.create_field(FIELD, intro=intro)
    for item in sorted(samples.iterdir(), key=lambda i: i.name):
        if item.name.endswith(".md") and item.name != "index.md":
            field.write(item.read_bytes(), name=item.name[:-3])
    for stem, title, text in COLD:
        field.add(title, text, name=stem, frontmatter={"updated": "2021-06-01T09:00:00Z"},
                  review=False)
        os.utime(field.path / f"{stem}.md", (1_622_538_000, 1_622_538_000))  # 2021 on disk too
    field.write(OFFICE, name="field-office")
    field.write(OFFICE_MOVED, name="field-office-2026")  # queued for review
    field.add("Pilot plan v2", "Plot 7 first, then plots 8 and 9.", name="pilot-plan-v2")
    field.add("Pilot plan v3", "Plots 7 to 12 at once.", name="pilot-plan-v3",
              frontmatter={"supersedes": "pilot-plan-v2"})
    field.index()
    return store


@contextmanager
def serve(root: Path, *, fake_embedder: bool) -> Iterator[str]:
    """``deepfield serve ROOT`` on a free loopback port; yields its URL."""
    command = [sys.executable, "-c", FAKE_SERVE] if fake_embedder else \
        [sys.executable, "-m", "deepfield"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPFIELD_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with subprocess.Popen([*command, "serve", str(root), "--port", "0", "--workers", "1",
                           "--json"], stdout=subprocess.PIPE, cwd=REPO, env=env) as proc:
        try:
            assert proc.stdout is not None
            url = str(json.loads(proc.stdout.readline())["url"])
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(url + "ui/", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "deepfield serve never answered"
                time.sleep(0.1)
            yield url.rstrip("/")
        finally:
            proc.terminate()
            proc.wait(15)


def start_browser(profile: Path) -> Any:
    """Headless Chromium under Selenium, with a fresh profile folder."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)),
                              options=options)
    driver.set_page_load_timeout(60)
    return driver


class Walk:
    """The steps, in the order a person would take them; each saves ``console-NAME.png``."""

    def __init__(self, driver: Any, url: str, shots: Path) -> None:
        self.driver = driver
        self.url = url
        self.shots = shots
        shots.mkdir(parents=True, exist_ok=True)
        self.saved: list[Path] = []

    # -- helpers
    def open(self, path: str) -> None:
        self.driver.get(self.url + path)

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def text(self, selector: str = "main") -> str:
        return str(self.css(selector).text)

    def shot(self, name: str) -> Path:
        """A screenshot of the whole page (the window grown to the page's height)."""
        path = self.shots / f"console-{name}.png"
        height = int(self.css("body").size["height"])
        self.driver.set_window_size(1280, max(700, min(2400, height + 120)))
        self.driver.save_screenshot(str(path))
        self.driver.set_window_size(1280, 1000)
        self.saved.append(path)
        return path

    def type_at_end(self, selector: str, text: str) -> None:
        from selenium.webdriver.common.keys import Keys

        box = self.css(selector)
        box.click()
        box.send_keys(Keys.CONTROL, Keys.END)
        box.send_keys(text)

    def submit(self, selector: str) -> None:
        """Click what ``selector`` finds and wait for the next page to replace this one."""
        self.click(self.css(selector))

    def click(self, element: Any) -> None:
        from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        old = self.css("html")
        element.click()

        def replaced(_driver: Any) -> bool:
            # expected_conditions.staleness_of, except that chromedriver, asked about a node
            # while its document is being replaced, may answer with an inspector error
            # ("Node with given id does not belong to the document") instead of "stale".
            try:
                old.is_enabled()
            except StaleElementReferenceException:
                return True
            except WebDriverException as exc:
                if "does not belong to the document" not in str(exc):
                    raise
                return True
            return False

        WebDriverWait(self.driver, 30).until(replaced)

    # -- steps
    def fields_and_pages(self) -> None:
        self.open("/ui/")
        assert FIELD in self.text("#fields")
        self.shot("fields")
        self.submit(f'#fields a[href="/ui/f/{FIELD}/"]')
        pages = self.text("#pages")
        assert "Decision: LiFePO4 battery instead of NMC" in pages and "review pending" in pages
        self.open(f"/ui/f/{FIELD}/?sort=activation")
        self.shot("pages")

    def page_views(self) -> None:
        self.open(f"/ui/f/{FIELD}/p/decision-battery-chemistry.md")
        assert "12.8 V, 6 Ah" in self.text("#rendered")
        assert self.all("#rendered h2")  # Markdown rendered, not shown as source
        self.shot("page")
        self.submit("#view-outline")
        assert "Consequences" in self.text("#outline")
        self.shot("outline")

    def search(self) -> None:
        self.open(f"/ui/f/{FIELD}/search")
        from selenium.webdriver.support.ui import Select

        for mode in ("bm25", "vector", "hybrid"):
            box = self.css("#q")
            box.clear()
            box.send_keys("which battery did we choose")
            Select(self.css("#mode")).select_by_value(mode)
            self.submit("#search-form button")
            summary = self.text("#search-summary")
            assert f"mode {mode}" in summary, summary
            first = self.all("#results li.hit")
            assert first, f"no {mode} results"
            assert self.all("#results .score") and self.all("#results .snippet a.line")
        assert "decision-battery-chemistry.md" in self.text("#results")
        self.shot("search")

    def research(self) -> None:
        self.open(f"/ui/f/{FIELD}/research")
        self.css("#q").send_keys("Why do valves get stuck and which firmware fixes it?")
        self.submit("#research-form button")
        assert self.all("#rounds details.round"), "no rounds"
        assert "tokens" in self.text("#tokens") and self.text("#context pre")
        assert self.all("#rounds table.queries tbody tr"), "no queries in the trace"
        self.shot("research")
        link = self.css("#evidence ol li a.line")
        line = link.get_attribute("href").rsplit("#L", 1)[1]
        quote = self.css("#evidence ol li .quote").text
        self.click(link)
        target = self.css(f"#L{line} td.tx").text
        assert quote.split(" … ")[0][:20] in target, (quote, target)
        assert self.driver.current_url.endswith(f"#L{line}")
        self.shot("evidence-line")

    def edit_and_stale_edit(self) -> None:
        page = f"/ui/f/{FIELD}/edit/open-questions.md"
        self.open(page)
        self.type_at_end("#text", "\n- Can the valve firmware update over the air?\n")
        self.shot("edit")
        self.submit("#save")
        assert "over the air" in self.text("#rendered")
        assert "saved open-questions.md" in self.text(".done")
        # Someone saves the page through the HTTP API while this edit is open.
        self.open(page)
        current = httpx.get(f"{self.url}/{FIELD}/open-questions.md", timeout=10).text
        changed = httpx.put(f"{self.url}/{FIELD}/open-questions.md", timeout=10,
                            content=current + "\n- Added by an agent meanwhile.\n")
        assert changed.status_code == 204, changed.text
        self.type_at_end("#text", "\n- My stale addition.\n")
        self.submit("#save")
        assert "both versions" in self.text("#edit-error")
        assert "Added by an agent meanwhile." in self.text("#current")
        assert "My stale addition." in self.css("#text").get_attribute("value")
        self.shot("stale-edit")
        stored = httpx.get(f"{self.url}/{FIELD}/open-questions.md", timeout=10).text
        assert "My stale addition." not in stored

    def review_accept(self) -> None:
        self.open(f"/ui/f/{FIELD}/review")
        items = self.all("section.item")
        assert items, "the review queue is empty"
        assert "field-office-2026.md" in items[0].text and "field-office.md" in items[0].text
        self.shot("review")
        self.submit("section.item button[value=accept]")
        assert "accept" in self.text(".done")
        self.open(f"/ui/f/{FIELD}/p/field-office.md")
        assert "superseded by field-office-2026.md" in self.text("main")
        graph = self.css("#graph")
        assert "field-office-2026.md" in graph.text
        self.open(f"/ui/f/{FIELD}/p/pilot-plan-v3.md")
        self.shot("supersession")

    def forget_archive_restore(self) -> None:
        self.open(f"/ui/f/{FIELD}/forget?older_than=365")
        listed = self.text("#forget-list")
        for stem, _, _ in COLD:
            assert f"{stem}.md" in listed, listed
        self.shot("forget")
        boxes = self.all('#forget-list input[type=checkbox]')
        assert len(boxes) == len(COLD)
        boxes[-1].click()  # untick the last one: it stays
        self.submit("#archive-button")
        result = self.text("#forget-result")
        assert "Archived 2 pages" in result
        self.open(f"/ui/f/{FIELD}/archive")
        archived = self.text("#archive")
        assert f"{COLD[0][0]}.md" in archived and f"{COLD[2][0]}.md" not in archived
        self.shot("archive")
        self.submit("#archive button")
        assert "restored" in self.text(".done")
        self.open(f"/ui/f/{FIELD}/")
        assert "Kickoff notes (2021)" in self.text("#pages")

    def status(self) -> None:
        self.open("/ui/status")
        report = self.text(f"#status-{FIELD}")
        assert "index health" in report and "ok" in report and "last sync" in report
        self.shot("status")
