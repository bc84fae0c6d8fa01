"""Experiment harness: per-question score arrays (BM25 chunk, BM25 page, dense chunk) for a given
chunking / query / header configuration, and ranking functions that turn them into a chunk order.

A "record" is one question with numpy arrays over the conversation's chunks:
    bm   -bm25() of the chunk (higher = better), nan where the chunk does not match
    pg   -bm25() of the chunk's page in the page table (0 where the page does not match)
    dn   cosine(query, chunk)
    dpg  max cosine over the chunk's page (dense page score)
"""
import functools
import os

import numpy as np

from common import (load, make_chunks, build_fts, query_terms, fts_match, EmbCache,
                    ranked_turns_from_chunks, ranked_sessions_from_chunks, recall, summarize,
                    fts_search)
from embed_all import embed_text

CONVS = load()
CACHE = EmbCache()


class Cfg:
    """One retrieval configuration (everything except the fusion function)."""

    def __init__(self, mode="turn", size=1, attr="all", line="line", header="none",
                 header_w=0.0, stop="stop", emb_header=False, page_header_w=None, dense=True,
                 emb_unit="chunk", prf=None):
        self.mode, self.size, self.attr, self.line = mode, size, attr, line
        self.header, self.header_w, self.stop = header, header_w, stop
        self.emb_header = emb_header
        self.dense = dense  # False: skip embeddings (BM25-only exploration)
        # 'chunk': embed the chunk text; 'turn': (prev/window modes) embed only the centre turn
        self.emb_unit = emb_unit
        # pseudo-relevance feedback: (m top chunks, e expansion terms) -> rec.bx
        self.prf = prf
        # page table header weight (defaults to the chunk one)
        self.page_header_w = header_w if page_header_w is None else page_header_w

    def key(self):
        return tuple(sorted(self.__dict__.items()))


class Rec:
    __slots__ = ("q", "chunks", "bm", "pg", "dn", "dpg", "sess", "cat", "bx")


@functools.lru_cache(maxsize=64)
def _records(cfg_key):
    cfg = Cfg(**dict(cfg_key))
    recs = []
    for conv in CONVS:
        chunks = make_chunks(conv, cfg.mode, cfg.size, cfg.line, cfg.attr)
        # BM25 text of the chunk
        fts_chunks = chunks
        if cfg.header == "prepend":
            from common import Chunk
            fts_chunks = [Chunk(c.cid, c.session, c.turns, c.header + "\n" + c.text, c.header)
                          for c in chunks]
        db = build_fts(fts_chunks, conv.pages)
        # embeddings of the chunk (always from "Speaker: text" lines)
        if cfg.emb_unit == "turn":
            assert cfg.mode in ("turn", "prev", "window")
            echunks = make_chunks(conv, "turn", 1, "plain")
        else:
            echunks = make_chunks(conv, cfg.mode, cfg.size, "plain", cfg.attr)
        if cfg.dense:
            E = CACHE.get([embed_text(c, cfg.emb_header) for c in echunks], "passage")
        else:
            E = np.zeros((len(echunks), 384), np.float32)
        sess = np.array([c.session for c in chunks])
        sess_ids = sorted(set(sess.tolist()))
        sess_idx = np.searchsorted(sess_ids, sess)
        Q = CACHE.get([q["question"] for q in conv.questions], "query")
        for qi, q in enumerate(conv.questions):
            terms = query_terms(q["question"], cfg.stop)
            m = fts_match(terms)
            if cfg.header == "column" and cfg.header_w > 0:
                w, match = (1.0, cfg.header_w), m
            else:
                w, match = (1.0, 0.0), f"body : ({m})"
            s = fts_search(db, "chunk", match, w, limit=100000)
            bm = np.full(len(chunks), np.nan)
            for rowid, sc in s.items():
                bm[rowid - 1] = sc
            if cfg.page_header_w > 0:
                ps = fts_search(db, "page", m, (1.0, cfg.page_header_w), limit=1000)
            else:
                ps = fts_search(db, "page", f"body : ({m})", (1.0, 0.0), limit=1000)
            bx = None
            if cfg.prf:
                bx = prf_scores(db, chunks, bm, terms, cfg, w)
            pgs = np.array([ps.get(s_, 0.0) for s_ in sess_ids])
            dn = E @ Q[qi]
            dps = np.full(len(sess_ids), -1.0)
            np.maximum.at(dps, sess_idx, dn)
            r = Rec()
            r.q, r.chunks, r.bm, r.pg, r.dn, r.dpg = q, chunks, bm, pgs[sess_idx], dn, dps[sess_idx]
            r.sess, r.cat, r.bx = sess_idx, q["category"], bx
            recs.append(r)
    return recs


def prf_scores(db, chunks, bm, terms, cfg, w):
    """Pseudo-relevance feedback: the e most frequent new non-stopword terms in BM25's top-m
    chunks (weighted by the chunk's normalised score) form a second OR query; returns its
    -bm25() per chunk (0 where no match)."""
    import re
    from common import STOPWORDS
    m, e = cfg.prf
    top = order_by(bm)[:m]
    if not len(top):
        return np.zeros(len(chunks))
    hi = bm[top[0]]
    qs = set(terms)
    cnt = {}
    for ci in top:
        for t in set(re.findall(r"[a-z]{3,}", chunks[ci].text.lower())):
            if t in STOPWORDS or t in qs:
                continue
            cnt[t] = cnt.get(t, 0.0) + bm[ci] / hi
    exp = [t for t, _ in sorted(cnt.items(), key=lambda x: (-x[1], x[0]))[:e]]  # deterministic ties
    out = np.zeros(len(chunks))
    if exp:
        match = fts_match(exp)
        if not (cfg.header == "column" and cfg.header_w > 0):
            match = f"body : ({match})"
        for rowid, sc in fts_search(db, "chunk", match, w, limit=100000).items():
            out[rowid - 1] = sc
    return out


def records(cfg):
    return _records(cfg.key())


# --------------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------------


def evaluate(recs, rank_fn, convs=None):
    """rank_fn(rec) -> chunk order (array of chunk indices, best first)."""
    rows = []
    for r in recs:
        if convs is not None and r.q["qid"].split("#")[0] not in convs:
            continue
        order = rank_fn(r)
        t10 = ranked_turns_from_chunks(order, r.chunks, 10)
        s5 = ranked_sessions_from_chunks(order, r.chunks, 5)
        rows.append({"category": r.cat,
                     "tR5": recall(t10[:5], r.q["gold_turns"]),
                     "tR10": recall(t10, r.q["gold_turns"]),
                     "sR3": recall(s5[:3], r.q["gold_sessions"]),
                     "sR5": recall(s5, r.q["gold_sessions"])})
    return summarize(rows)


def order_by(score):
    """Descending order; nan/-inf last (excluded)."""
    s = np.where(np.isnan(score), -np.inf, score)
    o = np.argsort(-s, kind="stable")
    return o[np.isfinite(s[o])]


# --------------------------------------------------------------------------------------------
# normalisers and fusion functions
# --------------------------------------------------------------------------------------------


def mm(x):
    """min-max over the finite entries -> [0,1]; nan stays nan."""
    f = np.isfinite(x)
    if not f.any():
        return x
    lo, hi = x[f].min(), x[f].max()
    return (x - lo) / (hi - lo) if hi > lo else np.where(f, 1.0, np.nan)


def maxnorm(x):
    f = np.isfinite(x)
    if not f.any():
        return x
    hi = x[f].max()
    return x / hi if hi > 0 else x


def z(x):
    f = np.isfinite(x)
    if f.sum() < 2:
        return x
    return (x - x[f].mean()) / (x[f].std() + 1e-9)


def ranks(score):
    """1-based rank of each chunk by score (nan -> inf)."""
    o = order_by(score)
    r = np.full(len(score), np.inf)
    r[o] = np.arange(1, len(o) + 1)
    return r


def f_bm25(r):
    return order_by(r.bm)


def f_prf(alpha=0.3):
    def f(r):
        return order_by(r.bm + alpha * r.bx)
    return f


def f_dense(r):
    return order_by(r.dn)


def f_rrf(c=60, w=0.5, topn=None):
    def f(r):
        rb, rd = ranks(r.bm), ranks(r.dn)
        if topn:
            rb[rb > topn] = np.inf
            rd[rd > topn] = np.inf
        s = 2 * w / (c + rb) + 2 * (1 - w) / (c + rd)
        s[(rb == np.inf) & (rd == np.inf)] = np.nan
        return order_by(s)
    return f


def f_convex(w=0.5, norm="mm", lam=0.0, page="bm25", dense_lam=None):
    """score = w*N(bm25) + (1-w)*N(dense) [+ lam * N(page)]; missing bm25 -> 0 after norm."""
    N = {"mm": mm, "max": maxnorm, "z": z}[norm]

    def f(r):
        b = N(r.bm.copy())
        fill = 0.0 if norm != "z" or not np.isfinite(b).any() else np.nanmin(b)
        b = np.nan_to_num(b, nan=fill)  # non-matching chunks get the lowest BM25 value
        d = N(r.dn)
        s = w * b + (1 - w) * d
        if lam and page == "fused":
            # the same convex fusion at page level: w*N(page bm25) + (1-w)*N(page max cosine)
            s = s + lam * (w * page_score(r, "bm25", N) + (1 - w) * page_score(r, "dense", N))
        elif lam:
            s = s + lam * page_score(r, page, N)
        return order_by(s)
    return f


def page_score(r, page, N=mm):
    if page == "bm25":
        return N(r.pg)
    if page == "dense":
        return N(r.dpg)
    if page == "both":
        return 0.5 * (N(r.pg) + N(r.dpg))
    if page == "maxchunk":
        b = np.nan_to_num(r.bm, nan=0.0)
        ps = np.zeros(r.sess.max() + 1)
        np.maximum.at(ps, r.sess, b)
        return N(ps[r.sess])
    if page == "sumchunk":
        b = np.nan_to_num(r.bm, nan=0.0)
        ps = np.zeros(r.sess.max() + 1)
        np.add.at(ps, r.sess, b)
        return N(ps[r.sess])
    raise ValueError(page)


def f_bm25_page(lam=0.5, page="bm25", norm="mm"):
    """BM25 alone with hierarchical page score: N(chunk) + lam * N(page)."""
    N = {"mm": mm, "max": maxnorm, "z": z}[norm]

    def f(r):
        s = N(r.bm.copy()) + lam * page_score(r, page, N)
        return order_by(s)
    return f


def f_rerank(topn=50, w=0.5):
    """Dense only reorders BM25's top-N: score = w*mm(bm25) + (1-w)*mm(dense) within top-N."""
    def f(r):
        ob = order_by(r.bm)[:topn]
        s = np.full(len(r.bm), np.nan)
        b, d = mm(r.bm[ob]), mm(r.dn[ob])
        s[ob] = w * b + (1 - w) * d
        return order_by(s)
    return f


def f_union(kb=5, kd=5):
    """Interleave: BM25 top-kb first, then dense top-kd not already in, then the rest of BM25."""
    def f(r):
        ob, od = order_by(r.bm), order_by(r.dn)
        out, seen = [], set()
        for x in list(ob[:kb]) + list(od[:kd]) + list(ob[kb:]) + list(od[kd:]):
            if x not in seen:
                seen.add(x)
                out.append(x)
        return np.array(out, dtype=int)
    return f


# --------------------------------------------------------------------------------------------
# reporting helpers
# --------------------------------------------------------------------------------------------

COLS = [("all", "tR5"), ("all", "tR10"), ("all", "sR3"), ("all", "sR5"),
        (1, "tR10"), (2, "tR10"), (3, "tR10"), (4, "tR10"),
        (1, "sR5"), (2, "sR5"), (3, "sR5"), (4, "sR5")]


def header_row():
    h = ["variant"] + [f"{'all' if g == 'all' else 'c' + str(g)} {m}" for g, m in COLS]
    return "| " + " | ".join(h) + " |\n|" + "---|" * len(h)


def row(name, res):
    return "| " + name + " | " + " | ".join(f"{res[g][m]:.3f}" for g, m in COLS) + " |"


def beats(hyb, base):
    """Target A: hybrid >= BM25 in every category at session R@5 and turn R@10."""
    return all(hyb[c][m] >= base[c][m] - 1e-12 for c in (1, 2, 3, 4) for m in ("sR5", "tR10"))
