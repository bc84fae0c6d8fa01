from lab import *
a = records(Cfg(dense=False)); b = records(Cfg(header="column", header_w=1.0, dense=False))
n=0
for ra, rb in zip(a, b):
    oa, ob = f_bm25(ra), f_bm25(rb)
    ta = recall(ranked_turns_from_chunks(oa, ra.chunks, 10), ra.q["gold_turns"])
    tb = recall(ranked_turns_from_chunks(ob, rb.chunks, 10), rb.q["gold_turns"])
    if tb > ta and n < 8:
        n += 1
        print(ra.q["question"], ra.q["gold_turns"], round(ta,2), round(tb,2))
        c = {ch.turns[0]: ch for ch in ra.chunks}
        g = ra.q["gold_turns"][0]
        i = [ch.cid for ch in ra.chunks if g in ch.turns][0]
        print("   gold:", ra.chunks[i].text[:150], "|", ra.chunks[i].header, "| rank a", list(oa).index(i) if i in oa else None, "rank b", list(ob).index(i) if i in ob else None)
        print("   a top1:", ra.chunks[oa[0]].text[:120])
