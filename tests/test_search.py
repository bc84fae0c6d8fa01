"""Search: modes, stubs, the spec's JSON shape, CJK, chunk hits, hostile queries."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import deepfield
from deepfield.markdown import says_something
from deepfield.search import make_snippet, search_fields

from .conftest import run_deepfield
from .fake_openai import FakeOpenAIServer


@pytest.fixture
def filled(field: deepfield.Field) -> deepfield.Field:
    field.add("Battery decision", "# Battery\n\n## Choice\n\nWe chose LiFePO4 cells for heat "
              "tolerance.\n\n## Cost\n\nNine dollars more per unit.\n",
              summary="LiFePO4 over NMC for heat.")
    field.add("Sensor calibration", "Hold the probe in dry air, then in wet soil.\n\n"
              "- press once\n- press twice\n")
    field.add("Meeting", "Alice (D1:1): the valve stuck open\nBob (D1:2): grit in the seat\n")
    field.write("---\ntitle: 深圳供应商\n---\n深圳的外壳供应商报价每个四美元，防护等级很高。\n")
    field.add("Filler", "Nothing relevant here at all, only words about weather.")
    return field


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_modes_find_the_right_page(filled: deepfield.Field, mode: str) -> None:
    results = filled.search("LiFePO4 heat", mode=mode).results
    assert results[0].filename == "battery-decision.md"


@pytest.mark.parametrize("unit", ["page", "chunk"])
def test_hybrid_legs_in_turn_or_in_parallel_agree(filled: deepfield.Field, unit: str) -> None:
    """``parallel=False`` (a server with a process per core) runs BM25 and the vectors one
    after the other: the same candidates, so the same ranking and scores."""
    from deepfield.search import search_fields

    for query in ("LiFePO4 heat tolerance", "valve stuck open", "probe in wet soil"):
        one = search_fields([filled], query, k=5, mode="hybrid", unit=unit, sync=False)
        other = search_fields([filled], query, k=5, mode="hybrid", unit=unit, sync=False,
                              parallel=False)
        assert one.results, query
        assert [(h.filename, h.line_start, h.score) for h in one.results] == [
            (h.filename, h.line_start, h.score) for h in other.results]


def test_stub_fields_and_spec_json(filled: deepfield.Field) -> None:
    response = filled.search("valve stuck", k=3)
    data = response.to_json()
    assert set(data) >= {"results", "count", "query", "mode", "took_ms"}
    top = data["results"][0]
    assert top["filename"] == "meeting.md"
    assert isinstance(top["frontmatter"], dict) and top["frontmatter"]["title"] == "Meeting"
    assert isinstance(top["score"], float)
    assert top["snippet"] == "Alice (D1:1): the valve stuck open"
    assert top["snippet_line"] == 7  # the exact line of the file
    assert (top["line_start"], top["line_end"]) == (7, 8)  # the chunk: the turn and its neighbour
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)


def test_heading_path_in_results(filled: deepfield.Field) -> None:
    hit = filled.search("nine dollars", mode="bm25").results[0]
    assert hit.heading == "Battery > Cost" and hit.snippet == "Nine dollars more per unit."


def test_summary_is_searchable(filled: deepfield.Field) -> None:
    hit = filled.search("NMC", mode="bm25").results[0]
    assert hit.filename == "battery-decision.md"
    # The memo's hit points at its own frontmatter line, where research cites it too.
    lines = (filled.path / hit.filename).read_text().splitlines()
    assert lines[hit.snippet_line - 1] == "summary: LiFePO4 over NMC for heat."
    assert hit.line_start == hit.line_end == hit.snippet_line


def test_chunk_unit_returns_lines(filled: deepfield.Field) -> None:
    hits = filled.search("press twice", unit="chunk", mode="bm25", k=5).results
    assert hits[0].text == "- press once\n- press twice"  # record lines come with a neighbour
    assert hits[0].snippet == "- press twice" and hits[0].snippet_line == hits[0].line_end


@pytest.mark.parametrize("query", ["深圳", "外壳供应商", "防护等级", "四美元"])
def test_chinese_is_findable(filled: deepfield.Field, query: str) -> None:
    results = filled.search(query, mode="bm25").results
    assert results and results[0].title == "深圳供应商"


@pytest.mark.parametrize(("query", "title"), [("東京", "会議メモ"), ("バルブ", "会議メモ"),
                                              ("서울", "회의록"), ("밸브 교체", "회의록")])
def test_japanese_and_korean_are_findable(filled: deepfield.Field, query: str, title: str
                                          ) -> None:
    filled.write("---\ntitle: 会議メモ\n---\n東京の工場でバルブの故障について話し合った。\n")
    filled.write("---\ntitle: 회의록\n---\n서울 사무소에서 밸브 교체 일정을 논의했다.\n")
    assert filled.search(query, mode="bm25").results[0].title == title
    # The hashing test embedder knows no Korean or Japanese; hybrid must still keep the match.
    assert title in [h.title for h in filled.search(query, mode="hybrid", k=3).results]


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "AND OR NOT", "NEAR(a b)", "col:value", "*", "-minus", "a' OR 1=1 --",
     "^start", "{x}", "", "   ", "😀"],
)
def test_hostile_queries_never_crash(filled: deepfield.Field, query: str) -> None:
    for mode in ("bm25", "hybrid"):
        filled.search(query, mode=mode)


def test_bad_arguments(filled: deepfield.Field) -> None:
    with pytest.raises(deepfield.DeepfieldError, match="mode"):
        filled.search("x", mode="magic")
    with pytest.raises(deepfield.DeepfieldError, match="k must"):
        filled.search("x", k=0)


def test_the_keyword_weight_moves_hybrid_between_its_two_legs(filled: deepfield.Field) -> None:
    query = "LiFePO4 heat valve"
    bm25 = [h.filename for h in filled.search(query, mode="bm25", k=5).results]
    only_words = search_fields([filled], query, k=5, mode="hybrid", keyword_weight=1.0)
    assert [h.filename for h in only_words.results][:len(bm25)] == bm25
    vector = [h.filename for h in filled.search(query, mode="vector", k=5).results]
    only_meaning = search_fields([filled], query, k=5, mode="hybrid", keyword_weight=0.0)
    assert [h.filename for h in only_meaning.results] == vector
    for bad in (1.5, -0.1, "0.3", True):
        with pytest.raises(deepfield.DeepfieldError, match="keyword weight must be a number"):
            search_fields([filled], query, mode="hybrid", keyword_weight=bad)  # type: ignore


def test_a_search_that_started_long_ago_embeds_nothing_more(field: deepfield.Field) -> None:
    """``started`` (the CLI's process start, a request's arrival) sets the time a search may
    spend embedding new chunks: past it, they stay pending and are found by keywords."""
    import time

    field.add("Kiwi", "kiwi fruit notes")
    field.index(embed=False)
    late = search_fields([field], "kiwi", mode="hybrid", started=time.monotonic() - 60)
    assert late.pending_vectors > 0 and late.results[0].filename == "kiwi.md"
    assert any("found by keywords only" in w for w in late.warnings), late.warnings
    # A vector search has no keywords to find them by, and says so.
    blind = search_fields([field], "kiwi", mode="vector", started=time.monotonic() - 60)
    assert blind.pending_vectors > 0
    assert any("a vector search cannot find them" in w and "--mode hybrid" in w
               for w in blind.warnings), blind.warnings
    assert search_fields([field], "kiwi", mode="hybrid").pending_vectors == 0


def test_store_search_across_fields(store: deepfield.Store) -> None:
    a = store.create_field("alpha")
    b = store.create_field("beta")
    a.add("Kiwi notes", "kiwi kiwi kiwi orchard")
    b.add("Kiwi birds", "the kiwi is a bird")
    results = store.search("kiwi", k=5).results
    assert {r.field for r in results} == {"alpha", "beta"}
    only_b = store.search("kiwi", fields=["beta"]).results
    assert [r.field for r in only_b] == ["beta"]
    with pytest.raises(deepfield.UnknownFieldError):
        store.search("kiwi", fields=["gamma"])


def test_edits_by_hand_are_noticed(field: deepfield.Field) -> None:
    field.add("Plain", "papaya")
    (field.path / "plain.md").write_text("---\ntitle: Plain\n---\nguava now\n")
    field.mark_changed()  # another process edited it; a new process or 1 s later would notice
    assert field.search("guava", mode="bm25").results[0].filename == "plain.md"
    assert field.search("papaya", mode="bm25").results == []


def test_snippet_window() -> None:
    text = ("word " * 100) + "needle here " + ("tail " * 100)
    snippet = make_snippet(text, ["needle"], width=80)
    assert "needle" in snippet and snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) <= 82


def test_dead_embedding_endpoint_degrades_to_keywords(
    tmp_path: Path, openai_server: FakeOpenAIServer
) -> None:
    config = deepfield.EmbeddingConfig(
        "openai", {"url": openai_server.url, "model": "m", "max_retries": 0})
    store = deepfield.init(tmp_path / "s", config)
    field = store.create_field("notes")
    field.add("Kiwi", "kiwi fruit notes")
    field.index()
    openai_server.stop()
    response = field.search("kiwi", mode="hybrid")
    assert response.mode == "bm25" and response.results[0].filename == "kiwi.md"
    assert any("keyword results only" in w for w in response.warnings)
    with pytest.raises(deepfield.EmbeddingServiceError):
        field.search("kiwi", mode="vector")
    field.add("Pear", "pear notes")  # new chunks cannot be embedded: still findable by keyword
    later = field.search("pear", mode="hybrid")
    assert later.results[0].filename == "pear.md"
    assert any("could not be embedded" in w for w in later.warnings)
    store.close()


def test_new_files_are_noticed_at_once(field: deepfield.Field) -> None:
    field.add("Plain", "papaya")
    assert field.search("papaya", mode="bm25").results
    (field.path / "fresh.md").write_text("# Fresh\n\nfeijoa\n")  # another program adds a page
    assert field.search("feijoa", mode="bm25").results[0].filename == "fresh.md"


def test_query_vectors_are_remembered_until_cleared() -> None:
    """A research round asks one question through several searches: it is encoded once;
    clear_query_cache() makes the next search pay again (as benchmarks time it)."""
    from .fakes import FakeEmbedder

    embedder = FakeEmbedder()
    first = embedder.embed_query("carbon fibre woks")
    assert embedder.embed_query("carbon fibre woks") is first
    assert embedder.calls == [("query", 1)]
    embedder.clear_query_cache()
    assert (embedder.embed_query("carbon fibre woks") == first).all()
    assert embedder.calls == [("query", 1), ("query", 1)]


WRAPPED = """# Supplier notes

Our enclosure supplier list was reviewed in March. The team agreed that every
vendor has to send samples before the order, and that the samples are tested
for dust and water ingress in the usual chamber. Supplier samples go to the lab.

The meeting ran long and covered travel plans, the budget for next year and
the usual questions about who books the rooms for the workshop in autumn.
Somebody asked about lunch. Nothing was decided about lunch at all.
The new zebra-striped gasket from the Mombasa plant passed the dust test first time.
Everyone was pleased.
"""


@pytest.mark.parametrize("unit", ["chunk", "page"])
def test_snippet_points_at_the_matching_line_of_a_wrapped_paragraph(
        cli: Any, unit: str) -> None:
    """A paragraph hard-wrapped over five lines is one chunk; its hit points at the line with
    the query's words, not at the paragraph's first line (issue 18 item 11)."""
    assert cli("new", "notes").exit_code == 0
    added = cli("add", "notes", "-", "--title", "Supplier notes", input=WRAPPED)
    assert added.exit_code == 0, added.output
    page = next((cli.store_path / "notes").glob("supplier*.md"))
    lines = page.read_text().splitlines()
    wanted = next(i for i, line in enumerate(lines, 1) if "zebra-striped" in line)
    found = cli.json("search", "zebra-striped gasket Mombasa", "-f", "notes", "--unit", unit,
                     "--mode", "bm25")["results"][0]
    assert found["line_start"] < wanted - 2  # the chunk starts well above the match
    assert found["snippet_line"] == wanted
    assert found["snippet"].startswith("The new zebra-striped gasket from the Mombasa plant")
    # Words on the paragraph's first line keep the hit there.
    other = cli.json("search", "travel plans budget", "-f", "notes", "--unit", "chunk",
                     "--mode", "bm25")["results"][0]
    assert other["snippet_line"] == other["line_start"] < wanted


def test_chunk_hits_point_at_distinct_lines(field: deepfield.Field) -> None:
    """Each line of the matching windows is ranked on its own: the lines that say the query's
    words come first, then their neighbours, and k hits show k different lines; ``matches``
    counts the candidate windows holding a hit's line."""
    turns = [f"Ana (D1:{i}): small talk number {i} about the weather" for i in range(1, 9)]
    turns[3] = "Ben (D1:4): the Mombasa gasket order ships on Friday"
    turns[6] = "Ana (D1:7): did the gasket from Mombasa pass the dust test?"
    field.write("---\ntitle: Call\n---\n" + "\n".join(turns) + "\n", name="call.md")
    hits = field.search("Mombasa gasket", unit="chunk", mode="bm25", k=4).results
    assert sorted(h.snippet for h in hits[:2]) == sorted([turns[3], turns[6]])
    assert len({h.snippet_line for h in hits}) == 4
    for hit in hits[2:]:  # a neighbour, shown in a window that matched
        assert "Mombasa" not in hit.snippet and "Mombasa" in hit.text
        assert hit.line_start <= hit.snippet_line <= hit.line_end
    assert [h.matches for h in hits[:2]] == [3, 3]  # the matching windows holding each line
    every = search_fields([field], "Mombasa gasket", unit="chunk", mode="bm25", k=4,
                          distinct_lines=False).results
    assert len(every) == 4 and len({h.snippet_line for h in every}) == 2  # every window


def test_a_line_said_by_the_person_the_query_names_ranks_first(field: deepfield.Field) -> None:
    turns = ["Ana (D1:1): we talked about the garden today",
             "Ben (D1:2): I painted the fence blue on Sunday",
             "Ana (D1:3): the weather was fine all week long",
             "Cleo (D1:4): the weather in town was cold and grey",
             "Ana (D1:5): I painted the shed blue on Sunday",
             "Cleo (D1:6): we talked about the garden as well"]
    field.write("---\ntitle: Chat\n---\n" + "\n".join(turns) + "\n", name="chat.md")
    for who, said in (("Ana", turns[4]), ("Ben", turns[1])):
        hits = field.search(f"What did {who} paint blue?", unit="chunk", mode="bm25", k=3)
        assert hits.results[0].snippet == said


def test_line_ranking_stops_early_without_changing_the_best_lines() -> None:
    """rank_lines stops reading windows once no later line can reach the k-th best; the k
    lines it returns are those of scoring every line."""
    import random

    from deepfield import line_rank

    words = ["gasket", "mombasa", "dust", "order", "friday", "weather", "coffee", "ship"]
    rng = random.Random(7)
    for _ in range(30):
        windows = []
        score = 1.0
        for w in range(40):
            score *= rng.uniform(0.85, 1.0)
            held = [((0, 1, w + i), f"{rng.choice(['Ana', 'Ben'])}: "
                     + " ".join(rng.choices(words, k=4))) for i in range(3)]
            windows.append(((0, w), score, held))
        query = "Did Ana ship the gasket on friday?"
        found = line_rank.rank_lines(windows, query, lambda _t: 1.0, 5)
        saved = line_rank.LINE_WORDS_WEIGHT, line_rank.LINE_SPEAKER_WEIGHT
        # Brute force: every line of every window, scored alike.
        every: dict[tuple[int, int, int], float] = {}
        words_of = line_rank.QueryWords(["ana", "ship", "gasket", "friday"], lambda _t: 1.0)
        for _key, window_score, held in windows:
            for key, text in held:
                every.setdefault(key, window_score + saved[0] * words_of.share(text)
                                 + (saved[1] if text.startswith("Ana") else 0.0))
        best = sorted(every.values(), reverse=True)[:5]
        assert [round(line.score, 9) for line in found] == [round(v, 9) for v in best]


def test_snippets_are_never_scaffolding(field: deepfield.Field) -> None:
    """A snippet shows a line that says something: not a table rule, a thematic break, a
    line of navigation links or a code fence, which match only through the words around them
    (a link's title, a chunk's heading)."""
    field.write("---\ntitle: Field log, September\n---\n# Field log, September\n\n"
                "[Back to index](index.md) · [Listing](listing.md)\n\n---\n\n"
                "Stakes were read on 16 September.\n\n"
                "| Stake | Melt (cm) |\n|---|---|\n| T1 | 206 |\n\n"
                "```bash\ndem-diff --reference lidar2020\n```\n", name="log.md")
    for query, unit in itertools.product(
            ("field log", "stake melt", "dem-diff reference", "september listing index"),
            ("chunk", "page")):
        for hit in field.search(query, unit=unit, mode="bm25", k=10).results:
            line = hit.snippet.lstrip("…").strip()
            assert line and not line.startswith(("|---", "---", "[Back", "```")), (query, hit)
            assert says_something(line), (query, hit.snippet)


def test_a_query_of_pasted_pages_is_refused(filled: deepfield.Field, cli: Any) -> None:
    """A query past MAX_QUERY_CHARS is pasted text, not a question: encoding it would take one
    encoder pass per 512 tokens and hold a server's searcher meanwhile."""
    from deepfield.research import research
    from deepfield.search import MAX_QUERY_CHARS

    long = "heat tolerance " * (MAX_QUERY_CHARS // 15 + 1)
    with pytest.raises(deepfield.QueryTooLongError, match="at most 2,000"):
        filled.search(long)
    with pytest.raises(deepfield.QueryTooLongError, match="question is"):
        research([filled], long, record=False)
    assert filled.search(long[:MAX_QUERY_CHARS], mode="bm25").results  # up to it: searched
    assert cli("new", "notes").exit_code == 0
    refused = run_deepfield("--store", str(cli.store_path), "--embedder", "none", "search",
                            long, "-f", "notes")
    stderr = refused.stderr.decode()
    assert refused.returncode == 1 and stderr.count("\n") == 1, stderr
    assert stderr.startswith("error: the query is 2,010 characters long")


def test_an_empty_query_finds_nothing_in_any_mode(filled: deepfield.Field) -> None:
    """A vector search of "" returned the pages nearest the empty text: arbitrary ones."""
    for mode in ("bm25", "vector", "hybrid"):
        for query in ("", "   "):
            found = search_fields([filled], query, mode=mode)
            assert found.results == [] and found.warnings == ["the query is empty"], mode
    assert search_fields([filled], "heat", mode="vector").results  # a query still searches
