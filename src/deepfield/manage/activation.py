"""Activation: which pages are used, as scores that search can add to relevance.

Use becomes a score with ACT-R's base-level activation, B = ln(sum_j (now - t_j) ** -d) with
d = 0.5 (t in seconds): frequent and recent use both raise it. Search may add a small boost,
``ACTIVATION_WEIGHT * sigmoid(B - ACTIVATION_MIDPOINT)``, to the fused relevance score so
relevance still dominates (measured in bench/manage.py, docs/BENCHMARKS.md). The events come
from the field's append-only log (deepfield.manage.activation_log).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..index.backend import IndexBackend, superseded
from .activation_log import (
    ACTIVATION_DIR,
    DECAY,
    EVENTS,
    MIN_AGE_SECONDS,
    ActivationLog,
    activation_cached,
    base_level,
    instance_id,
    iso_time,
    load_activation,
    read_log,
    record_activation,
)
from .supersede import refs

if TYPE_CHECKING:
    from ..field import Field
    from ..index import FieldIndex

__all__ = [
    "ACTIVATION_DIR", "ACTIVATION_MIDPOINT", "ACTIVATION_WEIGHT", "DECAY", "EVENTS",
    "MIN_AGE_SECONDS", "ActivationLog", "PageActivation", "activation_cached", "base_level",
    "boost", "instance_id", "iso_time", "load_activation", "read_log", "record_activation",
    "rerank", "top_pages",
]

ACTIVATION_WEIGHT = 0.15
"""Largest boost added to a fused score (scores lie in [0, 1]); see bench/manage.py."""
ACTIVATION_MIDPOINT = -6.0
"""B at which the boost is half of ACTIVATION_WEIGHT (one use about two days ago)."""


def boost(b: float | None, weight: float | None = None) -> float:
    """Score added for activation ``b`` (0 for a page never used)."""
    weight = ACTIVATION_WEIGHT if weight is None else weight
    if b is None or weight <= 0:
        return 0.0
    return weight / (1.0 + math.exp(-(b - ACTIVATION_MIDPOINT)))


@dataclass(frozen=True)
class PageActivation:
    filename: str
    uuid: str | None
    activation: float | None
    uses: int
    last_used: str | None
    events: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename, "uuid": self.uuid,
            "activation": None if self.activation is None else round(self.activation, 4),
            "uses": self.uses, "last_used": self.last_used, "events": self.events,
        }


def top_pages(field: Field, k: int = 20, now: float | None = None) -> list[PageActivation]:
    """The ``k`` most active pages of the field (pages never used are left out)."""
    moment = time.time() if now is None else now
    log_ = load_activation(field.path)
    out = []
    for doc in field.pages():
        key = log_.key_for(doc.filename, doc.uuid)
        if key is None:
            continue
        b = log_.base_level(key, moment)
        last = log_.last_used(key)
        out.append(PageActivation(
            doc.filename, doc.uuid, b, len(log_.times[key]),
            iso_time(last) if last is not None else None, dict(log_.counts.get(key, {})),
        ))
    out.sort(key=lambda p: -(p.activation or -math.inf))
    return out[:k]


def rerank(
    indexes: Sequence[tuple[Field, FieldIndex | IndexBackend]],
    fused: list[tuple[tuple[int, int], float]],
    *,
    activation: bool = True,
    include_superseded: bool = False,
    weight: float | None = None,
    scale: float = 1.0,
    hidden: dict[tuple[int, str], float] | None = None,
) -> list[tuple[tuple[int, int], float]]:
    """Fused chunk scores with superseded pages dropped and activation boosts added.

    ``hidden`` (when given) collects the superseded pages dropped: (field position,
    filename) -> best fused score, so search can say that history matched too.

    Boosts are sized for scores spread over [0, 1] (BM25 and hybrid normalise theirs);
    ``scale`` shrinks them for scores in a narrower band (see search.activation_scale).
    Works on the candidates only (a few hundred chunks): one chunk->page lookup per field.
    """
    if not fused or (include_superseded and not activation):
        return fused
    now = time.time()
    # Read now, not at import: benchmarks vary ACTIVATION_WEIGHT.
    weight = (ACTIVATION_WEIGHT if weight is None else weight) * scale
    adjusted: dict[tuple[int, int], float] = {}
    memo: dict[str, float] = {}
    scores = dict(fused) if hidden is not None else {}
    for position, (fld, index) in enumerate(indexes):
        ids = [cid for (pos, cid), _ in fused if pos == position]
        if not ids:
            continue
        log_ = load_activation(fld.path) if activation else None
        # Candidates of a backend over the SQLite index carry its chunk ids; another backend
        # (LanceDB) knows the pages of its own chunks.
        catalogue = index.catalogue if isinstance(index, IndexBackend) else index
        if catalogue is None:
            assert isinstance(index, IndexBackend)
            hide = not include_superseded and index.any_superseded()
            facts = index.page_facts
        else:
            hide = not include_superseded and _has_superseded(catalogue)
            facts = functools.partial(_doc_info, catalogue)
        if not hide and (log_ is None or not log_.times):
            continue  # nothing to hide, nothing to boost: the common case costs no query
        info = facts(ids)
        if hide:
            info = _show_orphans(catalogue if catalogue is not None
                                 else index.context.catalogue(), info)  # type: ignore[union-attr]
        for cid in ids:
            filename, uuid, superseded = info.get(cid, ("", None, False))
            if superseded and not include_superseded:
                adjusted[(position, cid)] = -math.inf
                if hidden is not None:
                    score = scores[(position, cid)]
                    hidden[(position, filename)] = max(
                        score, hidden.get((position, filename), -math.inf))
            elif log_ is not None and log_.times:
                key = log_.key_for(filename, uuid)
                if key is not None:
                    if key not in memo:  # one page has many chunks among the candidates
                        memo[key] = boost(log_.base_level(key, now), weight)
                    adjusted[(position, cid)] = memo[key]
    if not adjusted:
        return fused
    out = [(key, score + adjusted.get(key, 0.0)) for key, score in fused]
    out = [(key, score) for key, score in out if score != -math.inf]
    out.sort(key=lambda pair: -pair[1])
    return out


# supersede.is_superseded in SQL: superseded_by names something (not null, "" or []). A row
# that is not JSON (an older index stored NaN bare) counts as not superseded: json_extract
# would raise "malformed JSON" and fail every search that reaches the field.
_SUPERSEDED_SQL = ("COALESCE(CASE WHEN json_valid({doc}.frontmatter) THEN "
                   "json_extract({doc}.frontmatter, '$.superseded_by') END, '') "
                   "NOT IN ('', '[]')")
_SUPERSEDED: dict[tuple[str, str | None, int], bool] = {}


def _has_superseded(index: FieldIndex) -> bool:
    """Whether any page of the index is superseded (cached per index file and generation).

    Keyed by the index file, its ``instance`` (a rebuilt file starts its generations again)
    and generation; not by ``id(index)``: ids are reused once an index is closed, and another
    field's index at the same generation would then answer for this one."""
    meta = dict(index.conn.execute(
        "SELECT key, value FROM df_meta WHERE key IN ('instance', 'generation')").fetchall())
    key = (os.fspath(index.path), meta.get("instance"), int(meta.get("generation") or 0))
    if key not in _SUPERSEDED:
        if len(_SUPERSEDED) > 256:
            _SUPERSEDED.clear()
        row = index.conn.execute(
            f"SELECT 1 FROM df_docs WHERE {_SUPERSEDED_SQL.format(doc='df_docs')} "
            "LIMIT 1").fetchone()
        _SUPERSEDED[key] = row is not None
    return _SUPERSEDED[key]


def _show_orphans(catalogue: FieldIndex, info: dict[int, tuple[str, str | None, bool]]
                  ) -> dict[int, tuple[str, str | None, bool]]:
    """``info`` with the pages whose successors are all gone no longer marked superseded."""
    flagged = {filename for filename, _uuid, hidden in info.values() if hidden}
    gone = orphaned(catalogue, flagged) if flagged else set()
    if not gone:
        return info
    return {cid: (name, uuid, hidden and name not in gone)
            for cid, (name, uuid, hidden) in info.items()}


def hidden_as_superseded(catalogue: FieldIndex, frontmatters: dict[str, Any]) -> set[str]:
    """Of these pages (filename → frontmatter), those search hides as superseded: the ones
    with a live successor (see :func:`orphaned`)."""
    flagged = {name for name, front in frontmatters.items() if superseded(front)}
    return flagged - orphaned(catalogue, flagged) if flagged else set()


def orphaned(catalogue: FieldIndex, names: Iterable[str]) -> set[str]:
    """Of these superseded pages, those whose ``superseded_by`` names no indexed page: a
    successor deleted by hand or by a git checkout (only ``rm``/``forget`` release its
    predecessors) would otherwise hide the old page from search for good, silently. Two
    small queries, made only when a superseded page is among the candidates."""
    wanted = sorted(names)
    successors: dict[str, list[str]] = {}
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        rows = catalogue.conn.execute(
            "SELECT filename, json_extract(frontmatter, '$.superseded_by') FROM df_docs "
            f"WHERE filename IN ({','.join('?' * len(part))})", part)
        for filename, value in rows:
            with contextlib.suppress(ValueError):
                value = json.loads(value) if str(value).startswith("[") else value
            successors[filename] = refs(value)
    wanted_refs = sorted({r for found in successors.values() for r in found})
    live: set[str] = set()
    for start in range(0, len(wanted_refs), 300):
        part = wanted_refs[start : start + 300]
        marks = ",".join("?" * len(part))
        for filename, uuid in catalogue.conn.execute(
                f"SELECT filename, uuid FROM df_docs WHERE filename IN ({marks}) "
                f"OR filename IN ({marks}) OR uuid IN ({marks})",
                [*part, *(f"{r}.md" for r in part), *part]):
            live |= {filename, filename[:-3]} | ({uuid} if uuid else set())
    return {name for name, found in successors.items() if found and not set(found) & live}


def _doc_info(index: FieldIndex, ids: list[int]) -> dict[int, tuple[str, str | None, bool]]:
    """chunk id -> (filename, uuid, superseded?) from the index (no file is read)."""
    found: dict[int, tuple[str, str | None, bool]] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = index.conn.execute(
            f"SELECT c.id, d.filename, d.uuid, {_SUPERSEDED_SQL.format(doc='d')} "
            f"FROM df_chunks c JOIN df_docs d ON d.id = c.doc_id WHERE c.id IN ({marks})",
            part,
        )
        for cid, filename, uuid, replaced in rows:
            found[cid] = (filename, uuid, bool(replaced))
    return found
