"""taxonomy.md as a tree: heading trees, nested lists, aliases, errors with lines, counts, lint."""

from __future__ import annotations

import json

import pytest

import deepfield
from deepfield.domains.domain import create_domain, taxonomy_report
from deepfield.domains.taxonomy import count_pages, lint_pages, parse_taxonomy, render_tree
from deepfield.errors import DeepfieldError, PageNotFoundError, TaxonomyError

from .conftest import Cli, run_deepfield

HEADINGS = """---
title: Taxonomy
role: taxonomy
---
# Taxonomy

Intro prose is ignored.

## Memory storage

- Retrieval-Augmented Generation (RAG): memory as retrieval
  - GraphRAG
- Memory consolidation — merging what was learnt

## Evaluation

### Benchmarks
- LoCoMo

```
- not a concept
```
<!-- ## Not a category
- nor this -->
"""


class Doc:
    def __init__(self, filename: str, **frontmatter: object) -> None:
        self.filename = filename
        self.frontmatter = dict(frontmatter) if frontmatter else None


def names(nodes: list) -> list[str]:  # type: ignore[type-arg]
    return [n.name for n in nodes]


def test_heading_tree_with_lists_aliases_and_ignored_text() -> None:
    tax = parse_taxonomy(HEADINGS)
    assert names(tax.roots) == ["Memory storage", "Evaluation"]
    memory, evaluation = tax.roots
    rag = memory.children[0]
    assert (rag.name, rag.aliases, rag.line) == ("Retrieval-Augmented Generation", ("RAG",), 11)
    assert names(rag.children) == ["GraphRAG"]
    assert memory.children[1].name == "Memory consolidation"
    assert names(evaluation.children) == ["Benchmarks"]
    assert names(tax.categories()) == ["Memory storage", "Retrieval-Augmented Generation",
                                       "Evaluation", "Benchmarks"]
    assert names(tax.concepts()) == ["GraphRAG", "Memory consolidation", "LoCoMo"]
    assert not tax.warnings
    # Names match regardless of case, hyphens and spacing; aliases and paths work.
    assert tax.find("retrieval augmented generation", categories=True) == [rag]
    assert tax.find("rag", categories=False) == [rag]
    assert tax.find("Memory storage > GraphRAG", categories=False) == [rag.children[0]]
    assert tax.find("GraphRAG", categories=True) == []
    assert tax.find("Memory storage", categories=False) == []  # a root is not a concept


def test_nested_list_only_and_title_heading() -> None:
    text = "# Agent memory taxonomy\n\n* Storage\n    * Vector stores\n    * Key-value\n" \
        "* Retrieval\n\t* BM25\n1. Numbered root\n"
    tax = parse_taxonomy(text)
    assert names(tax.roots) == ["Storage", "Retrieval", "Numbered root"]
    assert names(tax.roots[0].children) == ["Vector stores", "Key-value"]
    assert names(tax.roots[1].children) == ["BM25"]
    assert render_tree(tax) == (
        "- Storage\n  - Vector stores\n  - Key-value\n- Retrieval\n  - BM25\n- Numbered root\n"
    )
    counted = render_tree(tax, count_pages(tax, []))
    assert counted.startswith("- Storage [0]\n")
    assert render_tree(parse_taxonomy(counted)) == render_tree(tax)  # our output reads back


def test_several_h1_are_categories_and_cjk_names() -> None:
    tax = parse_taxonomy("# 记忆\n- 检索增强生成（RAG）\n# Agents\n")
    assert names(tax.roots) == ["记忆", "Agents"]
    assert tax.roots[0].children[0].aliases == ("RAG",)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("# T\n\n- A\n    - B\n  - C\n", 5, "indented 2 spaces"),
        ("# T\n\n- A\n- \n", 4, "empty list item"),
        ("# T\n\n## \n", 3, "heading without text"),
        ("---\ntitle: [unclosed\n---\n# T\n", 1, "malformed YAML"),
    ],
)
def test_malformed_taxonomy_names_file_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(TaxonomyError) as caught:
        parse_taxonomy(text, "taxonomy.md")
    assert f"taxonomy.md line {line}:" in caught.value.message
    assert words in caught.value.message


def test_repeated_names_are_warnings() -> None:
    tax = parse_taxonomy("# T\n## Memory\n- RAG\n- rag\n## memory\n")
    assert len(tax.warnings) == 2
    assert "line 4" in tax.warnings[0] and "line 5" in tax.warnings[1]


def test_counts_and_lint() -> None:
    tax = parse_taxonomy(HEADINGS)
    docs = [
        Doc("a.md", kind="method", category="Memory storage", concepts=["GraphRAG"]),
        Doc("b.md", type="benchmark", categories=["Evaluation > Benchmarks"], concept="LoCoMo"),
        Doc("c.md", kind="blog", category="Agents", concepts=["Forgetting", "RAG"]),
        Doc("d.md", kind="paper", category="GraphRAG", date="March"),
        Doc("e.md", kind="survey"),
        Doc("plain.md", title="not atomic"),
        Doc("bare.md"),
    ]
    counts = count_pages(tax, docs)
    assert counts.atomic == 5 and counts.unplaced == ["d.md", "e.md"]
    memory, evaluation = tax.roots
    assert counts.total(memory) == {"a.md", "c.md"}
    assert counts.total(evaluation) == {"b.md"}
    assert "- Memory storage [2]" in render_tree(tax, counts)
    issues = [str(i) for i in lint_pages(tax, docs)]
    assert issues == [
        "c.md: category 'Agents' is not in taxonomy.md",
        "c.md: concept 'Forgetting' is not in taxonomy.md",
        "d.md: kind 'paper' is not one of method, benchmark, survey, blog",
        "d.md: date 'March' is not YYYY, YYYY-MM or YYYY-MM-DD",
        "d.md: category 'GraphRAG' is not in taxonomy.md (it is a concept there)",
        "e.md: has no category",
    ]


def test_taxonomy_report_on_a_domain(keyword_store: deepfield.Store) -> None:
    create_domain(keyword_store, "agents")
    field = keyword_store.field("agents")
    (field.path / "taxonomy.md").write_text(HEADINGS, encoding="utf-8")
    field.add("GraphRAG", "Graphs.", frontmatter={"kind": "method", "category": "Memory storage"})
    report = taxonomy_report(field)
    assert report.counts.atomic == 1 and not report.issues
    tree = report.to_json()["tree"]
    assert tree[0]["name"] == "Memory storage" and tree[0]["pages"] == 1
    assert tree[0]["children"][0]["kind"] == "category"
    plain = keyword_store.create_field("plain")
    with pytest.raises(PageNotFoundError, match="no taxonomy page"):
        taxonomy_report(plain)


def test_taxonomy_cli(cli: Cli) -> None:
    assert cli("domain", "new", "agents").exit_code == 0
    path = cli.store_path / "agents" / "taxonomy.md"
    path.write_text(HEADINGS, encoding="utf-8")
    cli("domain", "add", "agents", "--kind", "method", "--title", "GraphRAG",
        "--category", "Memory storage", "--concept", "GraphRAG")
    cli("domain", "add", "agents", "--kind", "blog", "--title", "Elsewhere",
        "--category", "Agents")
    shown = cli("taxonomy", "agents")
    assert shown.exit_code == 0
    assert "- Memory storage [1]" in shown.stdout and "    - GraphRAG [1]" in shown.stdout
    assert "1 lint warning " in shown.stderr  # was "1 lint warnings"
    linted = cli("taxonomy", "agents", "--lint")
    assert linted.stdout.rstrip().endswith("\n1 lint warning")
    assert "lint: elsewhere.md: category 'Agents' is not in taxonomy.md" in linted.stdout
    with pytest.raises(DeepfieldError, match="--strict"):
        cli("taxonomy", "agents", "--lint", "--strict")
    strict = cli("taxonomy", "agents", "--lint", "--strict", "--json")  # one JSON document
    assert strict.exit_code == 1 and "--strict" in strict.stderr
    document = json.loads(strict.stdout)
    assert document["issues"] and "--strict" in document["error"]["message"]
    data = cli.json("taxonomy", "agents")
    assert data["issues"] == [{"filename": "elsewhere.md",
                               "message": "category 'Agents' is not in taxonomy.md"}]
    assert data["unplaced"] == ["elsewhere.md"]
    path.write_text("# T\n\n- A\n    - B\n  - C\n", encoding="utf-8")
    bad = run_deepfield("--store", str(cli.store_path), "--embedder", "none", "taxonomy", "agents")
    assert bad.returncode == 1
    assert b"error: taxonomy.md line 5: this item is indented 2 spaces" in bad.stderr
