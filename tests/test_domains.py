"""Research domains: spec pages, atomic pages, search filters, level material and packing."""

from __future__ import annotations

from pathlib import Path

import pytest

import deepfield
from deepfield.domains import Filters, atomic_frontmatter, atomic_meta
from deepfield.domains.domain import add_atomic, create_domain, role_pages, taxonomy_report
from deepfield.domains.levels import LevelBlock, level_blocks, pack_blocks
from deepfield.errors import (
    DeepfieldError,
    FieldExistsError,
    InvalidMetadataError,
    InvalidNameError,
)
from deepfield.manage.supersede import supersede
from deepfield.page import Page
from deepfield.tokens import count_tokens

from .conftest import Cli

SPEC = ["basic-info.md", "taxonomy.md", "main-challenge.md", "network.md",
        "human-preference.md"]


def frontmatter(path: Path) -> dict:  # type: ignore[type-arg]
    fm = Page.parse(path.read_text(encoding="utf-8")).frontmatter
    assert fm is not None
    return fm


def test_domain_new_writes_the_spec_pages(keyword_store: deepfield.Store) -> None:
    made = create_domain(keyword_store, "agent-memory", description="Memory for LLM agents.")
    folder = Path(made.path)
    assert made.created == SPEC and made.kept == []
    layers = {name: frontmatter(folder / name)["layer"] for name in SPEC}
    assert layers == {"basic-info.md": "basic-context", "taxonomy.md": "basic-context",
                      "main-challenge.md": "cognition", "network.md": "cognition",
                      "human-preference.md": "alignment"}
    preference = frontmatter(folder / "human-preference.md")
    assert preference["role"] == "human-preference" and preference["always_load"] is True
    assert preference["uuid"] and preference["summary"]
    assert "Memory for LLM agents." in (folder / "index.md").read_text()
    assert "Memory for LLM agents." in (folder / "basic-info.md").read_text()
    with pytest.raises(FieldExistsError):
        create_domain(keyword_store, "agent-memory")
    with pytest.raises(InvalidNameError, match="domain name 'Agent Memory'"):
        create_domain(keyword_store, "Agent Memory")
    # Adopting keeps what is there (a page with the role key counts) and adds what is missing.
    (folder / "network.md").unlink()
    (folder / "basic-info.md").write_text("# Mine\n\nHand-written.\n")
    field = keyword_store.field("agent-memory")
    field.add("Open problems", "Forgetting.", name="open-problems",
              frontmatter={"role": "main-challenge"})
    (folder / "main-challenge.md").unlink()
    adopted = create_domain(keyword_store, "agent-memory", exist_ok=True)
    assert adopted.created == ["network.md"]
    assert "open-problems.md" in adopted.kept
    assert (folder / "basic-info.md").read_text() == "# Mine\n\nHand-written.\n"
    assert role_pages(field)["main-challenge"] == "open-problems.md"


def test_atomic_frontmatter_is_checked() -> None:
    fm = atomic_frontmatter("Method", category="Memory", concepts=["RAG", "RAG", "GraphRAG"],
                            source="https://arxiv.org/abs/2404.16130", date="2024-04")
    assert fm == {"kind": "method", "category": "Memory", "concepts": ["RAG", "GraphRAG"],
                  "source": "https://arxiv.org/abs/2404.16130", "date": "2024-04"}
    assert atomic_frontmatter("blog", category=["A", "B"])["category"] == ["A", "B"]
    assert atomic_frontmatter("survey", source="10.1145/3295500")["source"] == "10.1145/3295500"
    assert atomic_frontmatter("survey", source="arXiv:2501.00001", date="2025-01-31T10:00Z")
    for bad in [dict(kind="paper"), dict(kind="method", date="2024-13"),
                dict(kind="method", date="March 2024"), dict(kind="method", source="notes"),
                dict(kind="method", concepts=[" "])]:
        with pytest.raises(InvalidMetadataError):
            atomic_frontmatter(**bad)  # type: ignore[arg-type]
    # ResearcherZero's spellings are read as aliases.
    meta = atomic_meta({"type": "Benchmark", "categories": ["Eval"], "concept": "LoCoMo"})
    assert (meta.kind, meta.categories, meta.concepts) == ("benchmark", ("Eval",), ("LoCoMo",))
    assert not atomic_meta({"title": "x"}).is_atomic and not atomic_meta(None).is_atomic


def test_add_atomic_page(keyword_store: deepfield.Store) -> None:
    create_domain(keyword_store, "agents")
    field = keyword_store.field("agents")
    (field.path / "taxonomy.md").write_text("# Taxonomy\n## Memory\n- RAG\n")
    result = add_atomic(field, "GraphRAG paper", "method", category="Memory", concepts=["RAG"],
                        source="https://arxiv.org/abs/2404.16130", date="2024-04-24")
    assert result.filenames == ["graphrag-paper.md"] and result.warnings == []
    text = (field.path / "graphrag-paper.md").read_text()
    assert "date: '2024-04-24'" in text and "## Method" in text  # the kind's skeleton
    other = add_atomic(field, "Forgetting blog", "blog", category="Agents",
                       concepts=["Forgetting"], text="Unused memories fade.")
    assert other.warnings == ["forgetting-blog.md: category 'Agents' is not in taxonomy.md",
                              "forgetting-blog.md: concept 'Forgetting' is not in taxonomy.md"]
    (field.path / "taxonomy.md").write_text("# T\n- A\n    - B\n  - C\n")
    broken = add_atomic(field, "Third", "survey", category="A")
    assert broken.warnings[0].startswith("categories not checked: taxonomy.md line 4")


def _atomic(field: deepfield.Field, name: str, body: str, **keys: object) -> None:
    page = Page(body=body, frontmatter={"title": name, **keys})
    (field.path / f"{name}.md").write_text(page.render(), encoding="utf-8")


def test_search_filters(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("agents")
    _atomic(field, "graphrag", "Graph retrieval memory.", kind="method",
            category="Memory > Retrieval", concepts=["GraphRAG", "RAG"])
    _atomic(field, "locomo", "Long memory benchmark.", type="benchmark",
            categories=["Evaluation"], concepts=["Long conversations"])
    _atomic(field, "memgpt", "Paged memory for agents.", kind="method", category="Memory",
            concepts=["Paging"])
    _atomic(field, "notes", "Memory notes without keys.")

    def found(**options: object) -> list[str]:
        where = Filters.of(**options)  # type: ignore[arg-type]
        response = field.search("memory", mode="bm25", where=where)
        return sorted(hit.filename for hit in response.results)

    assert found() == ["graphrag.md", "locomo.md", "memgpt.md", "notes.md"]
    assert found(kind="method") == ["graphrag.md", "memgpt.md"]
    assert found(kind=["method", "benchmark"]) == ["graphrag.md", "locomo.md", "memgpt.md"]
    assert found(category="memory") == ["graphrag.md", "memgpt.md"]  # a path's segments match
    assert found(category="memory > retrieval") == ["graphrag.md"]
    assert found(concept="long-conversations") == ["locomo.md"]
    assert found(kind="benchmark", concept="RAG") == []
    assert found(category=["Evaluation", "Retrieval"], kind="benchmark") == ["locomo.md"]
    assert Filters.of() is None and Filters.of(kind=[" "]) is None
    with pytest.raises(InvalidMetadataError):
        Filters(kind=("paper",))
    assert keyword_store.search("memory", mode="bm25",
                                where=Filters(kind=("benchmark",))).results[0].field == "agents"
    # With a taxonomy, categories and concepts also find what is filed below them.
    (field.path / "taxonomy.md").write_text(
        "# Taxonomy\n## Memory\n- Retrieval\n  - GraphRAG\n## Evaluation\n- Paging\n")
    _atomic(field, "graph-only", "Memory graph.", kind="method", category="Retrieval",
            concepts=["GraphRAG"])
    assert found(category="Evaluation") == ["locomo.md", "memgpt.md"]  # memgpt: Paging
    assert found(concept="Retrieval") == ["graph-only.md", "graphrag.md"]  # GraphRAG is below
    assert found(category="memory") == ["graph-only.md", "graphrag.md", "memgpt.md"]
    # A concept's aliases name it too, and the name as the tree prints it ("Paging (PG)").
    (field.path / "taxonomy.md").write_text(
        "# Taxonomy\n## Memory\n- Retrieval\n  - GraphRAG\n## Evaluation\n"
        "- Paging (PG, virtual context)\n")
    _atomic(field, "pg", "Memory in pages.", kind="method", category="Evaluation",
            concepts=["PG"])
    for spelling in ("Paging", "PG", "Paging (PG, virtual context)", "virtual context"):
        assert found(concept=spelling) == ["memgpt.md", "pg.md"], spelling


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_filters_apply_before_candidates_are_cut(store: deepfield.Store, mode: str) -> None:
    """220 unfiltered pages outrank the 3 wanted ones (more than the 200 candidates kept)."""
    field = store.create_field("crowd")
    for i in range(220):
        _atomic(field, f"noise-{i}", "wok wok wok heat", kind="blog")
    for i in range(3):
        _atomic(field, f"method-{i}", f"A long text on many other subjects {i} and a wok.",
                kind="method")
    response = field.search("wok heat", k=3, mode=mode, where=Filters(kind=("method",)))
    assert sorted(h.filename for h in response.results) == [f"method-{i}.md" for i in range(3)]
    chunks = field.search("wok", k=2, mode=mode, unit="chunk", where=Filters(kind=("method",)))
    assert len(chunks.results) == 2


def _domain(store: deepfield.Store) -> deepfield.Field:
    create_domain(store, "agents", description="Memory for LLM agents.")
    field = store.field("agents")
    (field.path / "taxonomy.md").write_text(
        "---\nrole: taxonomy\n---\n# Taxonomy\n## Memory\n- RAG\n## Evaluation\n")
    (field.path / "human-preference.md").write_text(
        "---\nrole: human-preference\n---\n# Preferences\n\nCite primary sources. "
        "Prefer benchmarks with code.\n\n## Never\n\nNever cite blogs as evidence.\n")
    (field.path / "network.md").write_text("# Network\n\nRAG → GraphRAG: adds entity graphs.\n")
    _atomic(field, "survey-a", "# Survey A\n\nFirst sentence. Second one. Third one.\n\n"
            "## Philosophy\n\nMemory is retrieval. It is also update.\n\n### Deep\n\nHidden.\n",
            kind="survey", category="Memory", date="2025-02")
    _atomic(field, "old-method", "Old idea. More.", kind="method", category="Memory",
            date="2023", summary="An old method.")
    _atomic(field, "new-method", "# New\n\nNew idea first. More.", kind="method",
            category="Memory", concepts=["RAG"], date="2025-06")
    return field


def test_level_blocks(keyword_store: deepfield.Store) -> None:
    field = _domain(keyword_store)
    light = level_blocks(field, "light")
    assert [(b.label, b.filename, b.layer, b.required) for b in light] == [
        ("Human preferences", "human-preference.md", "alignment", True),
        ("Basic info", "basic-info.md", "basic-context", False),
        ("Taxonomy", "taxonomy.md", "basic-context", False),
    ]
    assert "<!--" not in light[1].text and "## Scope" not in light[1].text  # unfilled parts
    assert "- Memory [3]\n  - RAG [1]\n- Evaluation [0]\n" in light[2].text
    medium = level_blocks(field, "medium")
    assert [b.filename for b in medium] == [
        "human-preference.md", "basic-info.md", "taxonomy.md", "network.md", "survey-a.md",
        "new-method.md", "old-method.md",  # main-challenge.md is an unfilled template
    ]
    survey = medium[4].text
    assert "First sentence. Second one." in survey and "Third" not in survey
    assert "## Philosophy" in survey and "Hidden" not in survey
    assert medium[5].text == ("- [new-method](new-method.md) — method · Memory · RAG · "
                              "2025-06: New idea first.\n")
    assert medium[6].text.endswith("2023: An old method.\n")
    assert level_blocks(field, "deep") == medium
    with pytest.raises(DeepfieldError, match="unknown context level"):
        level_blocks(field, "huge")
    (field.path / "taxonomy.md").write_text("# T\n## Memory\n- A\n    - B\n  - C\n")
    fallback = level_blocks(field, "light")[2]
    assert fallback.text.startswith("(taxonomy headings only: taxonomy.md line 5:")
    assert "- T\n  - Memory" in fallback.text
    assert level_blocks(keyword_store.create_field("plain"), "medium") == []


def block(label: str, text: str, required: bool = False) -> LevelBlock:
    return LevelBlock(label, f"{label}.md", text, "cognition", required)


def test_pack_blocks() -> None:
    pref = "Line one is here.\nSecond line. It has two sentences and a lot more words after.\n"
    blocks = [block("pref", pref, True),
              block("big", "word " * 100), block("small", "tiny")]
    kept, omitted = pack_blocks(blocks, None, count_tokens)
    assert kept == blocks and omitted == []
    kept, omitted = pack_blocks(blocks, 40, count_tokens)
    assert [b.label for b in kept] == ["pref", "small"]  # big is skipped, small still fits
    assert [(o.filename, o.tokens) for o in omitted] == [("big.md", 130)]
    assert omitted[0].reason.startswith("over the budget: needs 130 tokens")
    # A required block is cut at a line, then at a sentence, and marked.
    kept, omitted = pack_blocks(blocks, 19, count_tokens)
    assert kept[0].text == "Line one is here.\nSecond line.\n[… cut here to fit the token budget]\n"
    assert sum(count_tokens(b.text) for b in kept) <= 19
    assert omitted[0].filename == "pref.md" and omitted[0].reason.startswith("cut to fit")
    kept, omitted = pack_blocks(blocks, 0, count_tokens)
    assert kept == [] and len(omitted) == 3
    kept, _ = pack_blocks(blocks, 70, count_tokens, per_block=25)
    assert [b.label for b in kept] == ["pref"]


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("Carbon fibre woks heat unevenly.") == 7
    assert count_tokens("碳纤维炒锅") == 5
    assert count_tokens("see https://example.com/a/very/long/path/to/something") >= 13
    text = "Budgets matter. " * 50
    assert count_tokens(text) <= count_tokens(text[:400]) + count_tokens(text[400:])


def test_domain_cli(cli: Cli) -> None:
    made = cli.json("domain", "new", "agents", "--description", "Agent memory.")
    assert made["created"] == SPEC
    added = cli.json("domain", "add", "agents", "--kind", "method", "--title", "GraphRAG",
                     "--category", "Memory", "--concept", "RAG", "--concept", "Graphs",
                     "--source", "https://arxiv.org/abs/2404.16130", "--date", "2024-04",
                     "Entity graphs for retrieval.")
    assert added["pages"][0]["filename"] == "graphrag.md"
    cli("domain", "add", "agents", "--kind", "benchmark", "--title", "LoCoMo", "-",
        input="Long conversations for retrieval tests.\n")
    listed = cli.json("domain", "ls")["domains"]
    assert listed[0]["field"] == "agents" and listed[0]["atomic"]["method"] == 1
    assert listed[0]["missing"] == []
    hits = cli.json("search", "retrieval", "--mode", "bm25", "--kind", "benchmark")
    assert [r["filename"] for r in hits["results"]] == ["locomo.md"]
    hits = cli.json("search", "retrieval", "--mode", "bm25", "--concept", "graphs")
    assert [r["filename"] for r in hits["results"]] == ["graphrag.md"]
    text = cli("domain", "ls")
    assert "agents: 1 method, 1 benchmark" in text.stdout
    with pytest.raises(InvalidMetadataError, match="not a URL"):
        cli("domain", "add", "agents", "--kind", "blog", "--title", "X", "--source", "notes")
    bad = cli("domain", "add", "agents", "--kind", "paper", "--title", "X")
    assert bad.exit_code == 2 and "'paper' is not one of" in bad.output


def test_superseded_pages_stay_out_of_level_material(keyword_store: deepfield.Store) -> None:
    field = _domain(keyword_store)
    supersede(field, "old-method.md", "new-method.md")
    medium = level_blocks(field, "medium")
    assert "old-method.md" not in [b.filename for b in medium]
    assert "- Memory [2]\n" in medium[2].text  # the taxonomy counts current pages only
    report = taxonomy_report(field)
    assert report.counts.atomic == 2 and report.to_json()["tree"][0]["pages"] == 2
    # a revised spec page (sorting after the old one) takes its role once it supersedes it
    (field.path / "zz-basic-info.md").write_text(
        "---\nrole: basic-info\n---\n# Basic info, revised\n\nAgents that remember.\n")
    field.ensure_synced(embed=False)
    assert role_pages(field)["basic-info"] == "basic-info.md"
    supersede(field, "basic-info.md", "zz-basic-info.md")
    assert role_pages(field)["basic-info"] == "zz-basic-info.md"
    assert "Agents that remember" in level_blocks(field, "light")[1].text


def test_domain_name_too_long(keyword_store: deepfield.Store) -> None:
    with pytest.raises(InvalidNameError, match="characters long"):
        create_domain(keyword_store, "a" * 300)


@pytest.mark.parametrize(("date", "ok"), [
    ("2025", True), ("2025-03", True), ("2020-02-29", True), ("2025-03-14T10:00:00Z", True),
    ("2020-02-30", False), ("2025-13", False), ("March 2025", False),
])
def test_publication_dates_must_be_real(date: str, ok: bool) -> None:
    from deepfield.domains.atomic import check_date
    from deepfield.errors import InvalidMetadataError

    if ok:
        assert check_date(date) == date
    else:
        with pytest.raises(InvalidMetadataError, match="is not a date"):
            check_date(date)


def test_domain_add_never_replaces_a_page_by_name(store: deepfield.Store) -> None:
    from deepfield.domains.domain import add_atomic, create_domain
    from deepfield.errors import PageConflictError

    create_domain(store, "rl", description="Reinforcement learning.")
    field = store.field("rl")
    before = (field.path / "taxonomy.md").read_bytes()
    with pytest.raises(PageConflictError, match="well-known page"):
        add_atomic(field, "n2", "method", name="taxonomy")
    add_atomic(field, "PPO", "method", name="ppo")
    with pytest.raises(PageConflictError, match="already a page"):
        add_atomic(field, "PPO again", "method", name="ppo")
    assert (field.path / "taxonomy.md").read_bytes() == before


@pytest.mark.parametrize(("option", "message"), [
    ({"title": ""}, "the title is empty"), ({"title": "  "}, "the title is empty"),
    ({"summary": " "}, "the summary is empty"), ({"name": ""}, "the filename is empty"),
])
def test_domain_add_refuses_empty_text_options(
    keyword_store: deepfield.Store, option: dict[str, str], message: str
) -> None:
    # An empty title made problem.md with the heading "# "; an empty summary or name was
    # dropped without a word.
    create_domain(keyword_store, "agents")
    field = keyword_store.field("agents")
    keys = {"title": "GraphRAG", **option}
    with pytest.raises(InvalidMetadataError, match=message):
        add_atomic(field, keys.pop("title"), "method", **keys)
    made = [p.name for p in field.path.glob("*.md")]
    assert sorted(made) == sorted([*SPEC, "index.md", "listing.md"])
    with pytest.raises(InvalidMetadataError, match="the description is empty"):
        create_domain(keyword_store, "other", description=" ")


def test_domain_add_empty_title_cli(cli: Cli) -> None:
    cli("domain", "new", "agents")
    with pytest.raises(InvalidMetadataError, match="the title is empty"):
        cli("domain", "add", "agents", "--kind", "method", "--title", "")


def test_concept_values_read_alike_in_search_and_taxonomy(keyword_store: deepfield.Store) -> None:
    # "GraphRAG: the graph one" was GraphRAG to the taxonomy (counted, no lint) but no
    # concept at all to the search filter.
    field = keyword_store.create_field("agents")
    _atomic(field, "colon", "Colontest memory.", kind="method", category="Memory storage",
            concepts=["GraphRAG: the graph one", "Paging (PG)"])

    def found(concept: str) -> list[str]:
        response = field.search("colontest", mode="bm25", where=Filters.of(concept=concept))
        return [hit.filename for hit in response.results]

    for concept in ("GraphRAG", "Paging", "PG"):
        assert found(concept) == ["colon.md"], concept  # no taxonomy yet
    (field.path / "taxonomy.md").write_text(
        "# Taxonomy\n## Memory storage\n- RAG\n  - GraphRAG\n- Paging\n")
    assert found("GraphRAG") == found("RAG") == ["colon.md"]
    report = taxonomy_report(field)
    assert report.issues == [] and report.counts.unplaced == []
    # A value without letters or digits matches nothing: refused when written, linted when
    # written by hand.
    with pytest.raises(InvalidMetadataError, match="no letters or digits"):
        atomic_frontmatter("method", concepts=["*"])
    _atomic(field, "star", "Star memory.", kind="method", category="Memory storage",
            concepts=["*"])
    assert [str(i) for i in taxonomy_report(field).issues] == [
        "star.md: concept '*' has no letters or digits: no search or taxonomy entry can "
        "match it"]


def test_domain_add_same_title_and_unchanged_page(keyword_store: deepfield.Store) -> None:
    create_domain(keyword_store, "agents")
    field = keyword_store.field("agents")
    (field.path / "taxonomy.md").write_text("# Taxonomy\n## Memory\n- RAG\n")
    first = add_atomic(field, "GraphRAG", "method", category="Memory", concepts=["RAG"],
                       text="Entity graphs for retrieval.")
    assert first.warnings == []
    # The same page again without --category is kept as stored: no "has no category".
    again = add_atomic(field, "GraphRAG", "method", concepts=["RAG"],
                       text="Entity graphs for retrieval.")
    assert again.pages[0].action == "unchanged" and again.warnings == []
    assert frontmatter(field.path / "graphrag.md")["category"] == "Memory"
    # A second page of that title is made, but not silently.
    other = add_atomic(field, "graphrag", "method", category="Memory")
    assert other.filenames == ["graphrag-2.md"]
    assert other.warnings == ["graphrag-2.md: a page titled 'graphrag' is already in agents: "
                              "graphrag.md (edit that page, or give --name to keep both on "
                              "purpose)"]
    named = add_atomic(field, "GraphRAG", "method", category="Memory", name="graphrag-v2",
                       text="A second version, on purpose.")
    assert named.warnings == []


def test_a_broken_taxonomy_is_said(keyword_store: deepfield.Store) -> None:
    create_domain(keyword_store, "agents")
    field = keyword_store.field("agents")
    _atomic(field, "graphrag", "Graph memory.", kind="method", category="Memory",
            concepts=["RAG"])
    (field.path / "taxonomy.md").write_text("# Taxonomy\n## Memory\n- RAG\n##\n")
    # No results, and why: the tree that files RAG under Memory could not be read.
    response = field.search("graph", mode="bm25", where=Filters.of(category="RAG"))
    assert response.results == []
    assert response.warnings == [
        "agents/taxonomy.md line 4: a heading without text; the taxonomy could not be read, "
        "so categories and concepts match the pages' own values only"]
    (block,) = [b for b in level_blocks(field, "light") if b.filename == "taxonomy.md"]
    assert block.text.splitlines() == [
        "(taxonomy headings only: taxonomy.md line 4: a heading without text)",
        "- Taxonomy", "  - Memory"]


def test_deep_context_research_skips_pages_it_already_shows(
    keyword_store: deepfield.Store,
) -> None:
    from deepfield.context import build_context

    field = _domain(keyword_store)
    (field.path / "basic-info.md").write_text(
        "---\nrole: basic-info\n---\n# Basic info\n\nEntity graphs hold agent memory.\n")
    _atomic(field, "graph-paper", "# Graph paper\n\nEntity graphs hold agent memory, updated "
            "per turn.", kind="method", category="Memory", concepts=["RAG"])
    found = build_context(field, "entity graphs agent memory", budget=3000, level="deep")
    assert "basic-info.md" in [b["filename"] for b in found.blocks]
    assert found.research is not None
    sources = [s["filename"] for s in found.research.sources]
    # basic-info.md is in the block whole: quoting it again in the research spent the
    # budget twice; the atomic page (only a stub above) is still quoted.
    assert "graph-paper.md" in sources and "basic-info.md" not in sources
    assert found.text.count("Entity graphs hold agent memory.") == 1
