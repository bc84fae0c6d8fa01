"""Managing memory over time: activation (use) and forgetting, supersession, the review queue
of near-duplicates and contradictions, and watching a field for edits.

Everything here keeps its state in plain files inside the field (``activation/*.jsonl``,
``review/queue.jsonl``, frontmatter keys) so it is portable, mergeable and survives a reindex.
"""
