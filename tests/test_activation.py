"""Activation: the append-only use log, ACT-R base-level scores and the search boost."""

from __future__ import annotations

import json
import logging
import math
import time

import pytest

import deepfield
from deepfield.manage.activation import (
    ACTIVATION_DIR,
    ACTIVATION_WEIGHT,
    base_level,
    boost,
    load_activation,
    read_log,
    record_activation,
    top_pages,
)

from .conftest import Cli


def _events(field: deepfield.Field) -> list[dict[str, object]]:
    lines = []
    for path in sorted((field.path / ACTIVATION_DIR).glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines()]
    return lines


def test_read_records_an_event_with_the_uuid(field: deepfield.Field) -> None:
    written = field.add("Woks", "Carbon fibre woks heat unevenly.").pages[0]
    field.read("woks")
    field.read("woks", outline_only=True)
    field.read("woks", record=False)
    events = _events(field)
    assert [e["event"] for e in events] == ["read", "read"]
    assert events[0]["page"] == "woks.md" and events[0]["uuid"] == written.uuid
    assert not field.warnings()  # the activation/ folder is never taken for a page folder
    assert [d.filename for d in field.pages()] == ["woks.md"]


def test_base_level_rises_with_frequency_and_recency() -> None:
    now = 1_000_000.0
    once_recent = base_level([now - 3600], now)
    once_old = base_level([now - 30 * 86400], now)
    often_old = base_level([now - 30 * 86400 + i for i in range(20)], now)
    assert once_recent > once_old
    assert often_old > once_old
    assert math.isclose(once_recent, -0.5 * math.log(3600))
    assert boost(None) == 0.0 and 0 < boost(once_old) < boost(once_recent) < ACTIVATION_WEIGHT


def test_logs_of_several_hosts_merge_and_corrupt_lines_are_skipped(
    field: deepfield.Field, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    field.add("Alpha", "alpha text")
    field.add("Beta", "beta text")
    monkeypatch.setenv("DEEPFIELD_INSTANCE", "laptop")
    record_activation(field, ["alpha.md"], "cite")
    monkeypatch.setenv("DEEPFIELD_INSTANCE", "Server 2")
    record_activation(field, ["alpha.md", "beta.md"], "open")
    folder = field.path / ACTIVATION_DIR
    assert sorted(p.name for p in folder.iterdir()) == ["laptop.jsonl", "server-2.jsonl"]
    with (folder / "laptop.jsonl").open("a") as handle:
        handle.write('{"t": "not a time", "page": "alpha.md"}\n{broken\n\n')
    with caplog.at_level(logging.WARNING, logger="deepfield"):
        log = read_log(folder)
    assert log.events == 3
    assert log.warnings == ["activation/laptop.jsonl: skipped 2 corrupt line(s)"]
    assert "corrupt" in caplog.text
    top = top_pages(field)
    assert [p.filename for p in top] == ["alpha.md", "beta.md"]
    assert top[0].uses == 2 and top[0].events == {"cite": 1, "open": 1}


def test_activation_follows_a_renamed_page_by_uuid(field: deepfield.Field) -> None:
    field.add("Gamma", "gamma text")
    record_activation(field, ["gamma.md"])
    (field.path / "gamma.md").rename(field.path / "gamma-renamed.md")
    assert [p.filename for p in top_pages(field)] == ["gamma-renamed.md"]


def test_recording_never_fails_a_read(field: deepfield.Field) -> None:
    field.add("Delta", "delta text")
    (field.path / ACTIVATION_DIR).write_text("a file where the folder should be")
    assert field.read("delta").text  # OSError is logged, not raised
    assert record_activation(field, ["delta.md"]) == 0
    with pytest.raises(ValueError, match="unknown activation event"):
        record_activation(field, ["delta.md"], "liked")


def test_cited_pages_rise_in_search_and_the_boost_can_be_disabled(
    keyword_store: deepfield.Store,
) -> None:
    fld = keyword_store.create_field("facts")
    for name in ("one", "two", "three"):
        fld.add(f"Server note {name}", f"The backup server rotates logs nightly ({name}).")
    plain = [h.filename for h in fld.search("backup server logs", mode="bm25").results]
    last = plain[-1]
    record_activation(fld, [last] * 5, "cite")
    boosted = [h.filename for h in fld.search("backup server logs", mode="bm25").results]
    assert boosted[0] == last
    off = fld.search("backup server logs", mode="bm25", activation=False).results
    assert [h.filename for h in off] == plain
    # unrelated pages are not pulled in by activation alone
    fld.add("Cooking", "Carbon fibre woks heat unevenly.")
    record_activation(fld, ["cooking.md"] * 20, "cite")
    assert "cooking.md" not in [h.filename for h in fld.search("backup", mode="bm25").results]


def test_the_aggregate_is_cached_until_a_log_changes(field: deepfield.Field) -> None:
    field.add("Eps", "eps text")
    record_activation(field, ["eps.md"], when=time.time() - 60)
    first = load_activation(field.path)
    assert load_activation(field.path) is first
    record_activation(field, ["eps.md"])
    second = load_activation(field.path)
    assert second is not first and len(second.times[next(iter(second.times))]) == 2


def test_a_grown_log_is_read_from_where_the_last_read_stopped(
    field: deepfield.Field, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every cite appends to the log, so re-reading all of it before each search would make
    search slower the longer a field is used: only the appended bytes are parsed, and a log
    handed out before stays as it was."""
    from deepfield.manage import activation_log

    field.add("Eps", "eps text")
    field.add("Zed", "zed text")
    record_activation(field, ["eps.md"] * 300, when=time.time() - 600)
    first = load_activation(field.path)
    size = sum(p.stat().st_size for p in (field.path / ACTIVATION_DIR).glob("*.jsonl"))
    offsets: list[int] = []
    real_read = activation_log._read_from
    monkeypatch.setattr(activation_log, "_read_from",
                        lambda path, offset: offsets.append(offset) or real_read(path, offset))
    record_activation(field, ["eps.md", "zed.md"], "open")
    grown = load_activation(field.path)
    assert offsets and min(offsets) >= size - 64  # the tail it checks, then the new lines
    assert grown.events == 302 and first.events == 300
    key = next(k for k, v in grown.filenames.items() if v == "eps.md")
    assert len(grown.times[key]) == 301 and len(first.times[key]) == 300
    assert grown.counts[key] == {"cite": 300, "open": 1} and first.counts[key] == {"cite": 300}
    assert [p.filename for p in top_pages(field)] == ["eps.md", "zed.md"]

    log_file = next((field.path / ACTIVATION_DIR).glob("*.jsonl"))
    with log_file.open("a") as handle:  # an append caught half-way: its line waits
        handle.write('{"t": "2026-01-01T00:00:00Z", "page": "zed.md", "event": "ci')
    assert load_activation(field.path).events == 302
    with log_file.open("a") as handle:
        handle.write('te"}\n{broken\n')
    with caplog.at_level(logging.WARNING, logger="deepfield"):
        finished = load_activation(field.path)
    assert finished.events == 303
    assert finished.warnings == [f"{ACTIVATION_DIR}/{log_file.name}: skipped 1 corrupt line(s)"]
    assert "corrupt" in caplog.text


def test_a_rewritten_or_removed_log_is_read_again_from_the_start(
    field: deepfield.Field, monkeypatch: pytest.MonkeyPatch
) -> None:
    field.add("Eps", "eps text")
    monkeypatch.setenv("DEEPFIELD_INSTANCE", "laptop")
    record_activation(field, ["eps.md"] * 3)
    monkeypatch.setenv("DEEPFIELD_INSTANCE", "server")
    record_activation(field, ["eps.md"] * 2)
    assert load_activation(field.path).events == 5
    laptop = field.path / ACTIVATION_DIR / "laptop.jsonl"
    # Rewritten in place (same inode), longer than before: not an append.
    with laptop.open("r+") as handle:
        handle.write("".join(json.dumps({"t": "2026-01-01T00:00:00Z", "page": "other.md"})
                             + "\n" for _ in range(10)))
    log = load_activation(field.path)
    assert log.events == 12 and log.counts["file:other.md"] == {"read": 10}
    with laptop.open("w") as handle:  # truncated
        handle.write("")
    assert load_activation(field.path).events == 2
    (field.path / ACTIVATION_DIR / "server.jsonl").unlink()  # e.g. a git checkout
    assert load_activation(field.path).events == 0


def test_cli_read_counts_and_activation_lists(cli: Cli) -> None:
    cli("new", "notes")
    cli("add", "notes", "Carbon fibre woks heat unevenly.", "--title", "Woks")
    cli("read", "notes", "woks")
    out = cli.json("activation", "notes")
    assert [p["filename"] for p in out["pages"]] == ["woks.md"]
    assert out["pages"][0]["events"] == {"read": 1}


def test_logs_stay_out_of_a_zip(field: deepfield.Field) -> None:
    # The usage log is this machine's reading history, and grows with every read: packed,
    # the same pages would get a new sha256 after each search (portable/archive.py).
    from deepfield.portable.archive import pack_members

    field.add("Zeta", "zeta text")
    record_activation(field, ["zeta.md"])
    members, warnings = pack_members(field.path)
    assert not any(name.startswith(f"{ACTIVATION_DIR}/") for name, _ in members)
    assert "zeta.md" in {name for name, _ in members}
    assert not warnings


def test_uses_from_before_a_page_had_a_uuid_still_count(field: deepfield.Field) -> None:
    (field.path / "by-hand.md").write_text("# By hand\n\nno uuid yet\n")
    field.ensure_synced(embed=False)
    record_activation(field, ["by-hand.md"], "open", uuids=[None])
    written = field.write(field.load("by-hand")[1].render(), name="by-hand").pages[0]
    assert written.uuid  # a rewrite gave it one
    record_activation(field, ["by-hand.md"], "cite", uuids=[written.uuid])
    (top,) = top_pages(field)
    assert top.uses == 2 and top.events == {"open": 1, "cite": 1}


def test_times_without_a_zone_are_utc(field: deepfield.Field,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = field.path / ACTIVATION_DIR
    folder.mkdir()
    (folder / "hand.jsonl").write_text(
        '{"t": "2026-01-01T00:00:00", "page": "a.md"}\n'
        '{"t": "2026-01-01T00:00:00Z", "page": "b.md"}\n')
    monkeypatch.setenv("TZ", "America/New_York")  # a reader away from UTC
    time.tzset()
    try:
        log = read_log(folder)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert log.times["file:a.md"] == log.times["file:b.md"]


def test_the_boost_shrinks_to_the_band_of_raw_cosines(field: deepfield.Field) -> None:
    """Vector search keeps raw cosines, crowded in a narrow band: a page cited minutes ago
    may break near-ties there but must not jump over a clearly better match, as the full
    boost (sized for BM25 and hybrid scores in [0, 1]) would make it."""
    from deepfield.manage.activation import rerank
    from deepfield.search import activation_scale

    field.add("Alpha", "Notes about the alpha valve.")
    field.add("Beta", "Notes about the beta valve.")
    record_activation(field, ["beta.md"] * 3, "cite")
    index = field.index_handle()
    chunk = {filename: cid for cid, filename in index.conn.execute(
        "SELECT c.id, d.filename FROM df_chunks c JOIN df_docs d ON d.id = c.doc_id")}
    cosines = [((0, chunk["alpha.md"]), 0.84), ((0, chunk["beta.md"]), 0.80)]
    indexes = [(field, index)]

    def order(fused: list[tuple[tuple[int, int], float]], scale: float) -> list[int]:
        return [cid for (_, cid), _ in rerank(indexes, fused, scale=scale)]

    assert order(cosines, 1.0) == [chunk["beta.md"], chunk["alpha.md"]]  # unscaled: it wins
    assert activation_scale("vector", cosines) == pytest.approx(0.04)
    scaled = activation_scale("vector", cosines)
    assert order(cosines, scaled) == [chunk["alpha.md"], chunk["beta.md"]]
    near_tie = [((0, chunk["alpha.md"]), 0.801), ((0, chunk["beta.md"]), 0.800),
                ((0, chunk["alpha.md"] + 999), 0.70)]
    assert order(near_tie, activation_scale("vector", near_tie))[0] == chunk["beta.md"]
    assert activation_scale("hybrid", cosines) == activation_scale("bm25", cosines) == 1.0
