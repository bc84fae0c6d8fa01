"""Watching: the index follows hand edits; deepfield's own rewrites keep diffs small."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import deepfield
from deepfield.manage.watch import WatchEvent, is_page_path, watch

from .conftest import run_deepfield


def _wait_for(events: list[WatchEvent], test: object, seconds: float = 8.0) -> WatchEvent:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for event in list(events):
            if test(event):  # type: ignore[operator]
                return event
        time.sleep(0.05)
    raise AssertionError(f"no matching watch event in {seconds}s: {events}")


def test_watch_reindexes_hand_edits(field: deepfield.Field) -> None:
    field.add("Start", "first page", review=False)
    events: list[WatchEvent] = []
    stop = threading.Event()
    worker = threading.Thread(target=watch, args=([field], events.append),
                              kwargs={"stop": stop, "debounce_ms": 50}, daemon=True)
    worker.start()
    try:
        _wait_for(events, lambda e: e.changed == [])  # the initial sync
        (field.path / "by-hand.md").write_text("# By hand\n\nWritten in an editor.\n")
        added = _wait_for(events, lambda e: "by-hand.md" in e.changed and e.added == 1)
        assert added.chunks_embedded >= 1
        (field.path / "by-hand.md").write_text("# By hand\n\nEdited again, longer now.\n")
        _wait_for(events, lambda e: "by-hand.md" in e.changed and e.updated == 1)
        # An edit that keeps the size and the mtime (cp -p, rsync -t, touch -r): the watcher
        # names the file, so it is read again.
        path = field.path / "by-hand.md"
        before = path.stat()
        time.sleep(2.1)  # past the index's racy window: size and mtime alone say "unchanged"
        path.write_text(path.read_text().replace("longer", "bigger"))
        import os
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        _wait_for(events, lambda e: e.changed == ["by-hand.md"] and e.updated == 1
                  and e is not events[0] and events.index(e) > 2)
        assert [h.filename for h in field.search("bigger", mode="bm25").results] == ["by-hand.md"]
        path.unlink()
        _wait_for(events, lambda e: "by-hand.md" in e.changed and e.removed == 1)
        count = len(events)
        field.read("start")  # deepfield's own files (activation log, index) never wake it
        time.sleep(0.5)
        assert len(events) == count
    finally:
        stop.set()
        worker.join(10)
    assert not worker.is_alive()


def test_only_root_pages_count(tmp_path: Path) -> None:
    assert is_page_path(tmp_path, str(tmp_path / "a.md"))
    for name in ("index.md", "listing.md", ".hidden.md", "a.md~", "x.sqlite3",
                 "archive/a.md", "activation/host.jsonl", ".deepfield-1.tmp"):
        assert not is_page_path(tmp_path, str(tmp_path / name))


def test_cli_watch_stops_after_seconds(tmp_path: Path) -> None:
    folder = tmp_path / "field"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n\ntext\n")
    done = run_deepfield("--embedder", "none", "--store", str(tmp_path / "store"), "watch",
                         str(folder), "--seconds", "0.5", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout.splitlines()[0])
    assert first["changed"] == [] and first["added"] == 1


def test_rewrites_keep_key_order_and_touch_updated_only_on_change(
    field: deepfield.Field,
) -> None:
    text = ("---\nsummary: kept first\n# a comment\ntitle: Keys\ncustom: [b, a]\n"
            "uuid: 9b2c5d0e-1111-4222-8333-444455556666\n"
            'created: "2024-01-01T00:00:00Z"\nupdated: "2024-01-01T00:00:00Z"\n---\nBody.\n')
    field.write(text, name="keys")
    path = field.path / "keys.md"
    assert path.read_text() == text  # nothing filled in: it was complete
    assert field.write(text).pages[0].action == "unchanged"
    assert path.read_text() == text
    field.write(text.replace("Body.", "Body, edited."))
    after = path.read_text()
    changed = [(a, b) for a, b in zip(text.splitlines(), after.splitlines(), strict=True)
               if a != b]
    assert [a.split(":")[0] for a, _ in changed] == ["updated", "Body."]
