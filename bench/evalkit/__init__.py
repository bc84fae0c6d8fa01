"""One evaluation protocol for every LoCoMo figure deepfield reports (bench/locomo.py runs it).

* data.py     — questions validated: scored, skipped (counted, with the reason), repaired
* store.py    — the cached store as ``deepfield import locomo`` writes it; page line → turn id
* fts.py      — the reference baseline: plain SQLite FTS5 BM25 per turn, stdlib only
* systems.py  — what is evaluated: searches (ranked turns, sessions) and budget systems
                (researcher; one search packed as lines with the researcher's own packer)
* run.py      — per-question scores and timings
* metrics.py  — recall, all@k, answer-word coverage, means per category, leave-one-out
* tuning.py   — tuned constants and their leave-one-conversation-out figure
* report.py   — Markdown tables, JSON, docs/BENCHMARKS.md sections, the budget plot

Crediting: a hit is credited only for the turn it points to — a deepfield chunk hit for the
dialogue id on the page line its ``snippet_line`` shows, a plain FTS5 hit for its turn, a
session page for its session. Turns merely inside a hit's chunk are a labelled secondary
figure. Every budget is counted by deepfield.tokens.count_tokens, for every system.
"""
