"""The researcher's latent-term tools: chunks and transcript lines by shared latent terms.

Offline, for questions that do not ask for a date, the question (and each follow-up vector
query) is also matched by latent terms (deepfield.index.latent): ``latent`` ranks chunks,
``latent_lines`` single record lines. They find evidence that names an instance where the
question names its kind ("sports" / "went surfing"). A date question names its event
exactly; there the extra lines only crowd the budget. What they buy on LoCoMo dev, and what
they cost date questions: ``python bench/locomo.py --ablations``, rows "no latent-term tools"
and "latent-term tools for date questions too" (docs/BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..embed.base import LatentTerms
from ..field import Field
from ..fusion import max_normalized
from ..index.keyword import query_terms
from ..line_rank import make_snippet
from ..search import Hit, collect_hits

CANDIDATES = 50
LINES = {"latent": False, "latent_lines": True}
"""The tools, and whether each ranks single record lines (else chunks)."""


def available(fields: Sequence[Field]) -> bool:
    """Every field's model has a sparse head and some latent terms are computed."""
    return bool(fields) and all(f.index_handle().has_latent_terms() for f in fields)


def search(fields: Sequence[Field], encoded: dict[str, LatentTerms], query: str, k: int, *,
           lines: bool) -> list[Hit]:
    """The ``k`` best chunks, or record lines (as one-line hits), for ``query``; its terms
    are encoded once into ``encoded`` (a research asks both tools the same query)."""
    terms = encoded.get(query)
    if terms is None:
        embedder = fields[0].index_handle().embedder
        if embedder is None:
            return []
        terms = encoded[query] = embedder.embed_latent([query])[0]
    indexes = [(fld, fld.index_handle()) for fld in fields]
    if not lines:
        pairs = [((position, key[0]), score) for position, (_, index) in enumerate(indexes)
                 for key, score in index.latent(terms, max(CANDIDATES, 5 * k))]
        pairs.sort(key=lambda pair: -pair[1])
        # Every window, as the researcher's other searches (loop.py): votes count each.
        return collect_hits(indexes, list(max_normalized(pairs).items()), k, "chunk", query,
                            distinct_lines=False)
    found = [(position, key, score) for position, (_, index) in enumerate(indexes)
             for key, score in index.latent(terms, k, lines=True)]
    found.sort(key=lambda item: -item[2])
    best = found[0][2] if found else 1.0
    words = query_terms(query)
    hits: list[Hit] = []
    for position, (doc_id, line), score in found[:k]:
        fld, index = indexes[position]
        row = index.conn.execute(
            "SELECT id FROM df_chunks WHERE doc_id = ? AND kind = 'record' AND line_start <= ? "
            "AND line_end >= ? ORDER BY ord LIMIT 1", (doc_id, line, line)).fetchone()
        chunk = index.chunks([row[0]]).get(row[0]) if row else None
        if chunk is None:  # changed since the terms were computed
            continue
        text = chunk.body.split("\n")[line - chunk.line_start]
        doc = chunk.doc
        hits.append(Hit(
            field=fld.name, filename=doc.filename, uuid=doc.uuid, title=doc.title,
            summary=doc.summary, frontmatter=doc.frontmatter, score=score / best,
            snippet=make_snippet(text, words), snippet_line=line, heading=chunk.heading,
            line_start=line, line_end=line, text=text, matches=1))
    return hits
