"""Second walk through domains, progressive reading and listing.md: defects found, pinned."""

from __future__ import annotations

import pytest

import deepfield
from deepfield.context import build_context
from deepfield.domains import Filters, atomic_frontmatter, atomic_meta, parse_taxonomy
from deepfield.domains.domain import add_atomic, create_domain, domain_summary, taxonomy_report
from deepfield.domains.levels import level_blocks
from deepfield.errors import (
    DeepfieldError,
    InvalidMetadataError,
    InvalidPageError,
    SectionNotFoundError,
)
from deepfield.manage.supersede import supersede
from deepfield.markdown import SENTENCE_CHARS, first_sentences, parse_sections

from .conftest import Cli, run_deepfield


def test_a_write_lists_pages_saved_by_hand_since_the_last_sync(
    store: deepfield.Store,
) -> None:
    """A write syncs only the pages it wrote: listing.md must still list a page saved by hand
    (or drop one deleted by hand) since the index last looked, not just what the index knew."""
    store.create_field("notes")
    writer = store.field("notes")
    writer.add("First", "one")
    (writer.path / "hand.md").write_text("---\ntitle: Hand\n---\nhand text\n")
    fresh = store.field("notes")  # another process: it has not looked at the folder yet
    fresh.add("Second", "two")
    listing = (fresh.path / "listing.md").read_text()
    assert "- [Hand](hand.md)" in listing and "3 pages." in listing
    (fresh.path / "hand.md").unlink()
    store.field("notes").add("Third", "three")
    listing = (fresh.path / "listing.md").read_text()
    assert "hand.md" not in listing and "3 pages." in listing


NESTED_FENCES = """# Nested

## Example page

Write the page like this:

````markdown
# My page

```python
# a comment
x = 1
```

## Not a heading
````

## After

After text.
"""


def test_a_longer_fence_keeps_inner_fences_and_hash_lines_as_code(field: deepfield.Field) -> None:
    """A ```` block quoting Markdown holds ``` lines: they do not close it (CommonMark), so the
    "# a comment" after ```python is no heading and the section runs to ````."""
    field.write(NESTED_FENCES, name="nested")
    view = field.read("nested", outline_only=True, depth=3)
    assert [e.title for e in view.outline or []] == ["Nested", "Example page", "After"]
    section = field.read("nested", section="Example page")
    assert section.text.rstrip().endswith("````") and "## Not a heading" in section.text
    assert section.line_end is not None and section.line_start is not None


def test_taxonomy_skips_a_longer_fence_with_inner_fences() -> None:
    text = ("# Taxonomy\n\n## Memory\n- RAG\n\n````markdown\n```\n## Example\n- Fake\n```\n"
            "## Also example\n````\n\n## Evaluation\n- LoCoMo\n")
    taxonomy = parse_taxonomy(text)
    assert [node.name for node in taxonomy.categories()] == ["Memory", "Evaluation"]
    assert [node.name for node in taxonomy.concepts()] == ["RAG", "LoCoMo"]


def _split_page(field: deepfield.Field) -> list[str]:
    """A page over 8 KB whose first part ends on an empty section: written split in two."""
    sections = []
    for i in range(1, 8):
        sentences = " ".join(f"Sentence {i}.{j} fills the page about topic {i}." for j in range(30))
        sections.append(f"## Section {i}\n\n{sentences}\n\n### Detail {i}\n\nDetail text {i}.\n")
    body = "# Big page\n\n" + "\n".join(sections) + "\n## Notes\n\nLast notes. End.\n"
    result = field.write(body, name="big-page")
    return [page.filename for page in result.pages]


def test_a_section_of_a_split_page_stops_before_the_parts_footer(field: deepfield.Field) -> None:
    """The "---" rule and "Part 1 of 2 · next: […](…)" line under each part are navigation:
    the last section of a part does not carry them."""
    names = _split_page(field)
    assert len(names) == 2
    last_of_part_one = [e for e in field.read(names[0], outline_only=True, depth=3).outline or []
                        if e.filename == names[0]][-1]
    view = field.read(names[0], section=f"{last_of_part_one.title}@{last_of_part_one.line}")
    assert "Part 1 of 2" not in view.text and not view.text.rstrip().endswith("---")
    assert "Part 2 of 2" not in field.read(names[0], section="Notes").text
    assert field.read(names[0], section="Notes").text == "## Notes\n\nLast notes. End.\n"


def test_an_outline_never_quotes_the_parts_footer_as_a_sentence() -> None:
    body = "## Empty\n\n---\nPart 1 of 2 · next: [Big page (part 2 of 2)](big-page-part-2.md)\n"
    sections = [s for s in parse_sections(body) if s.level]
    assert first_sentences(sections[0], 2) == []


def test_headings_of_later_parts_keep_the_path_of_the_page_they_were_written_in(
    field: deepfield.Field,
) -> None:
    """Part 2 starts under part 1's "# Big page": its sections are "Big page > Section 5" in
    the outline of the whole page, and that path (copied from the page as written, or from
    the outline) reads the section from either part."""
    names = _split_page(field)
    entries = field.read(names[0], outline_only=True).outline or []
    second = [e for e in entries if e.filename == names[1]]
    assert second and all(e.path[0] == "Big page" for e in second)
    for name in names:
        view = field.read(name, section="Big page > Notes")
        assert view.filename == names[1] and view.section == ["Big page", "Notes"]
    assert field.read(names[1], section="Notes").section == ["Big page", "Notes"]


def test_taxonomy_reads_setext_headings_as_categories() -> None:
    """"Memory" over "------" is a heading to read --outline: the taxonomy read it as prose,
    lost the category and made its concepts categories."""
    text = ("Taxonomy\n========\n\nMemory\n------\n- RAG\n- GraphRAG\n\n"
            "Evaluation\n----------\n- LoCoMo\n\n- item\n---\n")
    taxonomy = parse_taxonomy(text)
    assert [n.name for n in taxonomy.roots] == ["Memory", "Evaluation"]
    assert [n.name for n in taxonomy.concepts()] == ["RAG", "GraphRAG", "LoCoMo", "item"]


def test_filters_take_one_name_as_a_string(field: deepfield.Field) -> None:
    """Filters(category="Memory") iterated the string: it filtered on "M", "e", … and found
    nothing, and Filters(kind="method") failed on kind 'm'."""
    add_atomic(field, "GraphRAG", "method", category="Memory", concepts=["RAG"])
    where = Filters(kind="method", category="Memory", concept="RAG")  # type: ignore[arg-type]
    assert where == Filters(("method",), ("Memory",), ("RAG",))
    assert [h.filename for h in field.search("GraphRAG", where=where).results] == ["graphrag.md"]


def test_a_filter_name_without_letters_or_digits_is_refused(cli: Cli) -> None:
    """--concept '***' can match no page (writes refuse such names): said, not "no results"."""
    with pytest.raises(InvalidMetadataError, match="no letters or digits"):
        Filters(concept=("***",))
    assert cli("new", "notes").exit_code == 0
    result = run_deepfield("--store", str(cli.store_path), "--embedder", "none", "search", "x",
                           "--category", "--")
    assert result.returncode == 1 and b"no letters or digits" in result.stderr


def _big_survey(field: deepfield.Field) -> list[str]:
    body = "# Big survey\n\n" + "\n".join(
        f"## Section {i}\n\n" + " ".join(f"Finding {i}.{j} on memory." for j in range(60)) + "\n"
        for i in range(1, 7))
    result = add_atomic(field, "Big survey", "survey", category="Memory", text=body)
    return [page.filename for page in result.pages]


def test_a_split_survey_counts_once_and_is_one_outline_in_order(store: deepfield.Store) -> None:
    """Each part of a split page carries its frontmatter: the taxonomy counted a split survey
    once per part, `domain ls` saw two surveys, and the medium level gave one outline per part,
    part 2 first (filename order)."""
    create_domain(store, "research")
    domain = store.field("research")
    (domain.path / "taxonomy.md").write_text("# Taxonomy\n\n## Memory\n- RAG\n")
    names = _big_survey(domain)
    assert len(names) == 2
    report = taxonomy_report(domain)
    assert report.counts.atomic == 1 and report.to_json()["tree"][0]["pages"] == 1
    assert domain_summary(domain)["atomic"]["survey"] == 1
    blocks = [b for b in level_blocks(domain, "medium") if b.filename in names]
    assert [b.filename for b in blocks] == [names[0]]
    text = blocks[0].text
    assert text.index("## Section 1") < text.index("## Section 6")
    assert blocks[0].label == "Survey outline: Big survey"


def test_an_unfilled_survey_is_a_stub_not_bare_headings(store: deepfield.Store) -> None:
    """The skeleton `domain add --kind survey` writes has headings and no text: the medium
    level loaded those bare headings as the survey's outline."""
    create_domain(store, "research")
    domain = store.field("research")
    add_atomic(domain, "Survey of memory", "survey", category="Memory", summary="A survey.")
    blocks = [b for b in level_blocks(domain, "medium") if b.filename == "survey-of-memory.md"]
    assert len(blocks) == 1 and blocks[0].layer == "atomic"
    assert blocks[0].text.startswith("- [Survey of memory](survey-of-memory.md) — survey")


def test_domain_add_refuses_text_that_brings_its_own_frontmatter(field: deepfield.Field) -> None:
    """A page piped in whole (a ResearcherZero page with type, source…) was stored as body
    text under the new frontmatter: a second "---" block nothing reads."""
    page = "---\ntitle: GraphRAG\ntype: method\nsource: https://arxiv.org/abs/2404.16130\n---\nBody.\n"
    with pytest.raises(InvalidPageError, match="frontmatter block"):
        add_atomic(field, "GraphRAG", "method", category="Memory", text=page)
    assert not (field.path / "graphrag.md").exists()
    body = add_atomic(field, "Rule", "method", category="Memory", text="---\n\nAfter a rule.\n")
    assert body.pages[0].action == "created"


def test_a_full_width_colon_ends_a_taxonomy_name_without_a_space(store: deepfield.Store) -> None:
    """CJK puts no space after "：": the whole line was the concept's name, so neither the
    count nor a search filter found pages tagged with the name itself."""
    create_domain(store, "zh")
    domain = store.field("zh")
    (domain.path / "taxonomy.md").write_text(
        "# 分类网络\n\n## 记忆机制\n- 检索增强生成（RAG）：把记忆当作检索\n- Category：\n")
    add_atomic(domain, "图RAG方法", "method", category="记忆机制", concepts=["检索增强生成"],
               text="正文。")
    report = taxonomy_report(domain)
    assert [n.name for n in report.taxonomy.concepts()] == ["检索增强生成", "Category"]
    assert not report.issues and report.to_json()["tree"][0]["children"][0]["pages"] == 1
    hits = domain.search("正文", where=Filters.of(concept="RAG")).results
    assert [h.title for h in hits] == ["图RAG方法"]


def test_a_heading_with_a_slash_or_angle_bracket_is_read_by_its_text(
    field: deepfield.Field,
) -> None:
    """"/" and ">" separate a heading path, so "## Input/Output" could not be read at all:
    the error listed the very heading that was asked for."""
    field.write("# Notes\n\n## Input/Output\nIO text.\n\n## A > B comparison\nCmp.\n\n"
                "## TCP/IP\nNet.\n", name="notes")
    assert field.read("notes", section="Input/Output").text == "## Input/Output\nIO text.\n"
    assert field.read("notes", section="a > b comparison").section == ["Notes",
                                                                      "A > B comparison"]
    assert field.read("notes", section="Notes > TCP/IP").section == ["Notes", "TCP/IP"]
    assert field.read("notes", section="Notes").section == ["Notes"]


def test_headings_inside_an_html_comment_are_not_headings(store: deepfield.Store) -> None:
    """The taxonomy template's guidance comment holds an example "## Memory": the outline
    listed it as a section of every new domain, `read --section Memory` returned half the
    comment, and the comment was quoted as a section's first sentence."""
    create_domain(store, "research")
    domain = store.field("research")
    view = domain.read("taxonomy", outline_only=True, depth=3)
    assert [e.title for e in view.outline or []] == ["Taxonomy: research"]
    assert all(not s.startswith("<!--") for e in view.outline or [] for s in e.sentences)
    with pytest.raises(SectionNotFoundError):
        domain.read("taxonomy", section="Memory")
    body = "## Notes\n<!-- guidance --> Real text. More.\n<!-- two\nlines -->\n## Next\nx\n"
    sections = [s for s in parse_sections(body) if s.level]
    assert [s.title for s in sections] == ["Notes", "Next"]
    assert first_sentences(sections[0], 2) == ["Real text.", "More."]
    fenced = [s for s in parse_sections("## A\n<!-- e.g.\n```\nx\n-->\nReal. Two.\n") if s.level]
    assert first_sentences(fenced[0], 2) == ["Real.", "Two."]  # a fence inside the comment


def test_listing_lists_the_parts_of_a_split_page_in_order(field: deepfield.Field) -> None:
    names = _split_page(field)
    listing = (field.path / "listing.md").read_text()
    assert listing.index(f"]({names[0]})") < listing.index(f"]({names[1]})")


def test_a_bare_arxiv_id_is_a_source() -> None:
    """--source 2404.16130 was refused as "not a URL, DOI or arXiv id": it is an arXiv id."""
    for source in ("2404.16130", "2404.16130v2", "hep-th/9901001", "math.GT/0309136"):
        assert atomic_frontmatter("method", source=source)["source"] == source
    with pytest.raises(InvalidMetadataError):
        atomic_frontmatter("method", source="2404")


def test_an_outline_skips_a_tables_rule_row() -> None:
    sections = [s for s in parse_sections("## T\n| a | b |\n|:---|---:|\n| 1 | 2 |\n") if s.level]
    assert first_sentences(sections[0], 3) == ["| a | b |", "| 1 | 2 |"]


def test_domain_add_says_when_no_taxonomy_checked_the_names(field: deepfield.Field) -> None:
    """In a field without a taxonomy page the names went unchecked without a word, while
    the help promises unknown categories are reported."""
    result = add_atomic(field, "GraphRAG", "method", category="Memroy")
    assert any("no taxonomy page" in w for w in result.warnings)
    assert not add_atomic(field, "Plain", "blog").warnings


def test_domain_ls_leaves_superseded_pages_out_as_the_taxonomy_does(store: deepfield.Store) -> None:
    create_domain(store, "research")
    domain = store.field("research")
    add_atomic(domain, "GraphRAG", "method", category="Memory", text="Old.")
    add_atomic(domain, "GraphRAG v2", "method", category="Memory", text="New.")
    supersede(domain, "graphrag", "graphrag-v2")
    assert domain_summary(domain)["atomic"]["method"] == 1
    assert taxonomy_report(domain).counts.atomic == 1


def test_search_json_says_which_filters_it_applied(cli: Cli) -> None:
    """`search --json` echoed query, mode, unit and k but not --kind/--category/--concept: a
    filtered "no results" could not be told from an unfiltered one."""
    assert cli("new", "notes").exit_code == 0
    data = cli.json("search", "anything", "--kind", "method", "--concept", "RAG")
    assert data["filters"] == {"kind": ["method"], "category": [], "concept": ["RAG"]}
    assert cli.json("search", "anything")["filters"] is None


def test_a_heading_with_a_link_is_read_by_the_text_it_shows(field: deepfield.Field) -> None:
    field.write("# Notes\n\n## [Linked](x.md) part\nC.\n\n## **Bold** heading\nB.\n", name="fmt")
    assert field.read("fmt", section="Linked part").section == ["Notes", "[Linked](x.md) part"]
    assert field.read("fmt", section="Bold heading").text.startswith("## **Bold** heading")


def test_an_outline_shows_no_empty_line_for_a_comment_before_the_first_heading(
    field: deepfield.Field,
) -> None:
    field.write("<!-- generated: do not edit -->\n# Catalogue\n\nTwo pages.\n", name="cat")
    text = field.read("cat", outline_only=True).text
    assert text == "# Catalogue\nTwo pages.\n"


def test_adopt_adds_a_page_whose_usual_filename_holds_another_role(store: deepfield.Store) -> None:
    """taxonomy.md holding the network page (role: network) was reported "kept" twice; the
    domain stayed without a taxonomy, and the hint said to run the same --adopt again."""
    store.create_field("weird")
    (store.field("weird").path / "taxonomy.md").write_text(
        "---\ntitle: Net\nrole: network\n---\n# Net\nA → B\n")
    created = create_domain(store, "weird", exist_ok=True)
    assert created.kept == ["taxonomy.md"] and "taxonomy.md" not in created.created
    summary = domain_summary(store.field("weird"))
    assert summary["missing"] == [] and summary["pages"]["network"] == "taxonomy.md"
    assert taxonomy_report(store.field("weird")).taxonomy.filename == summary["pages"]["taxonomy"]


def test_a_filter_naming_a_concept_as_a_category_says_so(store: deepfield.Store) -> None:
    """--category LoCoMo (a concept in the taxonomy) found nothing without a word."""
    create_domain(store, "research")
    domain = store.field("research")
    (domain.path / "taxonomy.md").write_text("# Taxonomy\n\n## Evaluation\n- LoCoMo\n")
    add_atomic(domain, "LoCoMo bench", "benchmark", category="Evaluation", concepts=["LoCoMo"],
               text="A benchmark.")
    wrong = domain.search("benchmark", where=Filters.of(category="LoCoMo"))
    assert not wrong.results
    assert any("'LoCoMo' is a concept there" in w for w in wrong.warnings)
    swapped = domain.search("benchmark", where=Filters.of(concept="Evaluation"))
    assert any("--category 'Evaluation'" in w for w in swapped.warnings)
    right = domain.search("benchmark", where=Filters.of(concept="LoCoMo"))
    assert right.results and not right.warnings


def test_context_never_quotes_a_page_it_also_shows_whole(keyword_store: deepfield.Store) -> None:
    """At a tight budget the taxonomy tree is left out, research quotes taxonomy lines, then
    the tree is put back into the room research did not use: the context held it twice."""
    create_domain(keyword_store, "research", description="Memory for LLM agents.")
    domain = keyword_store.field("research")
    (domain.path / "taxonomy.md").write_text(
        "---\ntitle: Taxonomy\nrole: taxonomy\n---\n# Taxonomy\n\n## Memory\n"
        "- Retrieval-Augmented Generation (RAG): memory as retrieval\n  - GraphRAG\n"
        "- Memory consolidation\n\n## Evaluation\n- Long-context QA\n- LoCoMo\n")
    add_atomic(domain, "GraphRAG", "method", category="Memory", concepts=["RAG"],
               text="other text")
    domain.index()
    for budget in range(200, 460, 20):
        result = build_context(domain, "graphrag method", budget=budget, level="deep")
        whole = {b["filename"] for b in result.blocks
                 if b["filename"] in ("taxonomy.md", "basic-info.md", "index.md")}
        quoted = {e.filename for e in (result.research.evidence if result.research else [])}
        assert not (whole & quoted) or quoted <= whole, (budget, whole & quoted)
        assert result.tokens <= budget


def test_a_split_method_page_is_one_stub_named_by_its_title(store: deepfield.Store) -> None:
    create_domain(store, "research")
    domain = store.field("research")
    body = "# Big method\n\n" + "\n".join(
        f"## Step {i}\n\n" + " ".join(f"Detail {i}.{j} of the method." for j in range(60)) + "\n"
        for i in range(1, 7))
    names = add_atomic(domain, "Big method", "method", category="Memory", text=body).filenames
    stubs = [b for b in level_blocks(domain, "medium") if b.layer == "atomic"]
    assert len(names) == 2 and [b.filename for b in stubs] == [names[0]]
    assert stubs[0].text.startswith(f"- [Big method]({names[0]}) — method")


def test_an_outline_joins_chinese_sentences_without_a_space(field: deepfield.Field) -> None:
    field.write("# 中文页面\n\n## 背景\n第一句话。第二句话！第三句话？\n", name="zh")
    text = field.read("zh", outline_only=True, sentences=2).text
    assert "第一句话。第二句话！" in text


def test_domain_add_writes_a_name_given_twice_in_two_spellings_once() -> None:
    keys = atomic_frontmatter("method", category=["Memory", "memory"],
                              concepts=["RAG", "rag", "Graph-RAG", "GraphRAG"])
    assert keys["category"] == "Memory" and keys["concepts"] == ["RAG", "Graph-RAG"]


def test_read_refuses_arguments_it_would_fail_on_or_ignore(field: deepfield.Field) -> None:
    """section=5 was an AttributeError, depth="2" a TypeError, and outline_only with a section
    returned the section (the CLI and HTTP refuse both at once)."""
    field.write("# Notes\n\n## A\nText.\n", name="notes")
    for kwargs in ({"section": 5}, {"outline_only": True, "depth": "2"},
                   {"outline_only": True, "sentences": -1},
                   {"outline_only": True, "section": "A"}):
        with pytest.raises(DeepfieldError):
            field.read("notes", **kwargs)  # type: ignore[arg-type]
    assert field.read("notes", outline_only=True, depth=0).view == "outline"


def test_one_concept_given_as_a_string_is_that_concept(field: deepfield.Field) -> None:
    """concepts="RAG" wrote the concepts R, A and G."""
    assert atomic_frontmatter("method", concepts="RAG")["concepts"] == ["RAG"]
    add_atomic(field, "GraphRAG", "method", concepts="RAG", text="Body.")
    assert "- RAG" in (field.path / "graphrag.md").read_text()


def test_domain_api_refuses_values_of_the_wrong_type(field: deepfield.Field,
                                                      store: deepfield.Store) -> None:
    """Numbers, None or bytes where text goes failed deep inside (AttributeError, TypeError);
    they are DeepfieldErrors naming the argument. A year as a number is that year."""
    calls = [
        lambda: create_domain(store, "other", description=5),
        lambda: add_atomic(field, "T", None),  # type: ignore[arg-type]
        lambda: add_atomic(field, "T", "method", category=5),  # type: ignore[arg-type]
        lambda: add_atomic(field, "T", "method", concepts=["a", 5]),  # type: ignore[list-item]
        lambda: add_atomic(field, "T", "method", source=5),  # type: ignore[arg-type]
        lambda: add_atomic(field, "T", "method", text=b"x"),  # type: ignore[arg-type]
        lambda: Filters(kind=5),  # type: ignore[arg-type]
        lambda: Filters(category=(5,)),  # type: ignore[arg-type]
        lambda: Filters.of(concept=5),  # type: ignore[arg-type]
        lambda: parse_taxonomy(None),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(DeepfieldError):
            call()
    assert atomic_frontmatter("method", date=2024)["date"] == "2024"  # type: ignore[arg-type]


def test_a_taxonomy_over_8_kb_is_read_whole(store: deepfield.Store) -> None:
    """A long taxonomy.md is split into parts that all carry `role: taxonomy`: the domain
    took "taxonomy-part-2.md" (it sorts first) and read only its categories, so pages filed
    under the others were lint warnings and filters missed them."""
    create_domain(store, "research")
    domain = store.field("research")
    lines = ["---", "title: Taxonomy", "role: taxonomy", "---", "# Taxonomy", ""]
    for c in range(40):
        lines += [f"## Category {c}"] + [
            f"- Concept {c}.{k}: a description of this concept that takes some room"
            for k in range(6)] + [""]
    assert len(domain.write("\n".join(lines), name="taxonomy").pages) > 1
    add_atomic(domain, "X", "method", category="Category 39", concepts=["Concept 0.1"],
               text="graph x")
    report = taxonomy_report(domain)
    assert report.taxonomy.filename == "taxonomy.md" and not report.issues
    assert len(report.taxonomy.categories()) == 40 and len(report.taxonomy.concepts()) == 240
    light = [b for b in level_blocks(domain, "light") if b.label == "Taxonomy"]
    assert "Category 0 [" in light[0].text and "Category 39 [1]" in light[0].text
    assert "Part 1 of" not in light[0].text
    hits = domain.search("graph", where=Filters.of(category="Category 39")).results
    assert [h.filename for h in hits] == ["x.md"]


def test_domain_ls_text_names_pages_of_another_kind(cli: Cli) -> None:
    """--json counted them (atomic_other_kind); the text said only "no atomic pages"."""
    assert cli("domain", "new", "research").exit_code == 0
    (cli.store_path / "research" / "paper.md").write_text(
        "---\ntitle: Paper\nkind: paper\n---\nText.\n")
    out = cli("domain", "ls").output
    assert "research: 1 of another kind (see `deepfield taxonomy research --lint`)" in out


def test_an_outline_sentence_is_cut_when_a_paragraph_has_no_stops(field: deepfield.Field) -> None:
    """A paragraph without stops (a pasted log) was one sentence as long as the page, so the
    outline cost as much as reading the page."""
    words = " ".join(f"word{i}" for i in range(900))
    field.write(f"# Log\n\n## Run\n{words}\n\n## Next\nShort.\n", name="log")
    view = field.read("log", outline_only=True)
    assert view.bytes < 500 and "## Next" in view.text
    sentence = (view.outline or [])[1].sentences[0]
    assert sentence.endswith(" …") and len(sentence) <= SENTENCE_CHARS + 2


def test_a_second_page_with_the_taxonomy_role_does_not_replace_taxonomy_md(
    store: deepfield.Store,
) -> None:
    """alt-tax.md with `role: taxonomy` sorted before taxonomy.md and silently became the
    domain's taxonomy: every page was unplaced and filters used the other tree."""
    create_domain(store, "research")
    domain = store.field("research")
    (domain.path / "taxonomy.md").write_text(
        "---\ntitle: Taxonomy\nrole: taxonomy\n---\n# Taxonomy\n\n## Memory\n- RAG\n")
    (domain.path / "alt-tax.md").write_text(
        "---\ntitle: Alt\nrole: taxonomy\n---\n# Alt\n\n## Other\n- Thing\n")
    add_atomic(domain, "GraphRAG", "method", category="Memory", concepts=["RAG"], text="graph")
    report = taxonomy_report(domain)
    assert report.taxonomy.filename == "taxonomy.md" and report.counts.atomic == 1
    assert [i.filename for i in report.issues] == ["alt-tax.md"]
    assert domain_summary(domain)["pages"]["taxonomy"] == "taxonomy.md"
    hits = domain.search("graph", where=Filters.of(category="Memory")).results
    assert [h.filename for h in hits] == ["graphrag.md"] and not hits[0].score < 0


def test_remembered_sessions_in_a_domain_are_not_atomic_pages(store: deepfield.Store) -> None:
    """`remember` files a conversation with `kind: session`: in a domain field it was linted
    as a bad kind, counted as "another kind" and stubbed as an atomic page."""
    create_domain(store, "research")
    domain = store.field("research")
    (domain.path / "taxonomy.md").write_text("# Taxonomy\n\n## Memory\n- RAG\n")
    domain.write("---\ntitle: Ana and Ben\nkind: session\n---\nAna: try GraphRAG.\n",
                 name="ana-and-ben")
    assert not atomic_meta({"kind": "session"}).is_atomic
    assert not taxonomy_report(domain).issues
    assert domain_summary(domain)["atomic_other_kind"] == 0
    assert all(b.filename != "ana-and-ben.md" for b in level_blocks(domain, "medium"))


def test_a_foreign_type_key_does_not_make_a_page_atomic() -> None:
    """basic-memory notes carry `type: note`: read as an atomic kind, every imported note was
    a lint warning and a stub. `type: method` (ResearcherZero) still counts."""
    assert not atomic_meta({"type": "note"}).is_atomic
    assert not atomic_meta({"type": "note"}).problems
    assert atomic_meta({"type": "Method"}).kind == "method"
    assert atomic_meta({"kind": "paper"}).problems  # our own key: a bad value is said


def test_lint_says_when_a_concept_is_a_category_of_the_taxonomy() -> None:
    from deepfield.domains.taxonomy import lint_pages
    from deepfield.page import Page

    class Doc:
        filename = "x.md"
        frontmatter = Page.parse("---\nkind: method\ncategory: Memory\nconcepts: [Memory]\n"
                                 "---\n").frontmatter

    issues = lint_pages(parse_taxonomy("## Memory\n- RAG\n"), [Doc()])
    assert [i.message for i in issues] == [
        "concept 'Memory' is not in taxonomy.md (it is a category there)"]


def test_taxonomy_names_holding_a_slash_or_angle_bracket_are_found(store: deepfield.Store) -> None:
    """"/" and ">" always split a value into a path, so a category "Input/Output" or a
    concept "TCP/IP" could never be matched: every page using them was a lint warning and
    counted nowhere."""
    taxonomy = parse_taxonomy("## Input/Output\n- TCP/IP\n- A > B testing\n## Memory\n"
                              "- RAG\n  - GraphRAG\n")
    assert [n.name for n in taxonomy.find("Input/Output", categories=True)] == ["Input/Output"]
    assert [n.name for n in taxonomy.find("TCP/IP", categories=False)] == ["TCP/IP"]
    assert [n.name for n in taxonomy.find("A > B testing", categories=False)] == ["A > B testing"]
    assert [n.name for n in taxonomy.find("Input/Output > TCP/IP", categories=False)] == [
        "TCP/IP"]
    assert [n.name for n in taxonomy.find("Memory/RAG", categories=True)] == ["RAG"]
    create_domain(store, "net")
    domain = store.field("net")
    (domain.path / "taxonomy.md").write_text("# Taxonomy\n\n## Input/Output\n- TCP/IP\n")
    add_atomic(domain, "Sockets", "method", category="Input/Output", concepts=["TCP/IP"],
               text="Sockets text.")
    report = taxonomy_report(domain)
    assert not report.issues and report.to_json()["tree"][0]["pages"] == 1


def test_a_split_human_preference_page_is_loaded_once_in_order(store: deepfield.Store) -> None:
    """Each part carries `role: human-preference`: context loaded part 2 first (its name sorts
    first), then part 1, each with its "Part 1 of 2 · next" footer."""
    create_domain(store, "research")
    domain = store.field("research")
    body = "# Human preferences\n\n" + "\n".join(
        f"## Rule {i}\n\n" + " ".join(f"Preference {i}.{j} holds." for j in range(60)) + "\n"
        for i in range(1, 7))
    page = "---\ntitle: Human preferences\nrole: human-preference\nalways_load: true\n---\n"
    assert len(domain.write(page + body, name="human-preference").pages) > 1
    result = build_context(domain, "", budget=20000, level="light")
    assert [b["filename"] for b in result.blocks].count("human-preference.md") == 1
    assert all("part-2" not in (b["filename"] or "") for b in result.blocks)
    assert result.text.index("## Rule 1") < result.text.index("## Rule 6")
    assert "Part 1 of" not in result.text


def test_an_alias_with_a_slash_between_letters_is_one_alias() -> None:
    """"Input/Output (I/O)" got the aliases I and O: a page tagged "I" or "O" matched it."""
    from deepfield.domains.atomic import entry_name

    assert entry_name("Input/Output (I/O)") == ("Input/Output", ("I/O",))
    assert entry_name("Retrieval (RAG/GraphRAG)") == ("Retrieval", ("RAG", "GraphRAG"))


def test_an_outline_quotes_a_multi_line_summary_on_one_line(field: deepfield.Field) -> None:
    field.write("---\ntitle: S\nsummary: |\n  First line.\n  Second line.\n---\n# S\n\nText.\n",
                name="s")
    assert field.read("s", outline_only=True).text.startswith("> First line. Second line.\n")
