"""Searches memoised on disk, for the researcher's tuning scripts.

Scoring and packing changes do not change what the searches return, so a tuning run can reuse
every search of the last one (bench/.cache/research-quick/searches.pkl): a pass over all 760
LoCoMo questions then costs seconds instead of minutes. Not for timing anything.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepfield.research import loop

MEMO = Path(__file__).resolve().parent.parent / ".cache" / "research-quick" / "searches.pkl"


def memoise_searches() -> Callable[[], None]:
    """Route the researcher's searches through the memo; returns the function that saves it."""
    memo: dict[tuple[Any, ...], Any] = pickle.loads(MEMO.read_bytes()) if MEMO.exists() else {}
    original = loop.search_fields

    def remembered(fields, query, **kw):  # type: ignore[no-untyped-def]
        key = (tuple(f.name for f in fields), query, tuple(sorted(kw.items())))
        if key not in memo:
            memo[key] = original(fields, query, **kw)
        return memo[key]

    loop.search_fields = remembered  # type: ignore[assignment]

    def save() -> None:
        MEMO.parent.mkdir(parents=True, exist_ok=True)
        MEMO.write_bytes(pickle.dumps(memo))

    return save
