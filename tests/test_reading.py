"""Research and context output for people: what counts as evidence, the order it is shown in,
and the same order through the library, the CLI, HTTP and MCP."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

import deepfield
from deepfield.context import FENCE_TOKENS, build_context
from deepfield.research import research
from deepfield.research.reading import Span, evidence_spans, is_evidence, reading_order
from deepfield.server import create_app
from deepfield.server.mcp_server import create_mcp_server
from deepfield.tokens import count_tokens

from .conftest import Cli

QUESTION = "when did we pick LiFePO4?"
_CITED = re.compile(r"^\[([^/\]]+)/([^\] ]+\.md)|^L(\d+)(?:-\d+)?: ", re.MULTILINE)


@pytest.mark.parametrize(("line", "evidence"), [
    ("---", False), ("***", False), ("...", False), ("|---|:---:|", False), ("", False),
    ("## Battery", False), ("<!-- fill in the decision -->", False),
    ("Part 3 of 3", False),
    ("Part 2 of 3 · previous: [Battery history (part 1 of 3)](battery-history.md) · next: "
     "[Battery history (part 3 of 3)](battery-history-part-3.md)", False),
    ("← [Back to the index](index.md)", False),
    ("[Previous](a.md) | [Next](b.md)", False),
    ("- [Decision: LiFePO4 battery](decision.md)", False),
    ("See also [[battery-history]]", False),
    ("On 14 March 2026 the team chose LiFePO4.", True),
    # The memorizer's context paragraph repeats the frontmatter: no evidence.
    ("When: 2026-05-12. Who: Priya. Related: [The team](team.md).", False),
    ("See [the decision](decision.md) for why we chose LiFePO4 over NMC.", True),
    ("| Battery | 11.00 | 20.00 |", True), ("2026-03-14", True),
    ("Part of the kit since the heat test.", True),
])
def test_what_counts_as_evidence(line: str, evidence: bool) -> None:
    assert is_evidence(line) is evidence


def test_an_html_comment_over_several_lines_is_no_evidence() -> None:
    lines = ["<!-- One section per open problem: why it matters, the benchmarks that",
             "     show it, and the methods that try. -->", "Melt rates doubled since 2000."]
    assert [s.text for s in evidence_spans(lines, 1)] == ["Melt rates doubled since 2000."]


def test_a_comment_in_fenced_code_is_evidence() -> None:
    # In code, "#" opens a comment that may say the very thing asked about; the same line
    # outside a fence is a heading.
    lines = ["# Valves", "", "```python", "# keep the valve shut above 35 degrees",
             "CLOSE_ABOVE = 35", "```"]
    assert [(s.line, s.text) for s in evidence_spans(lines, 1)] == [
        (4, "# keep the valve shut above 35 degrees"), (5, "CLOSE_ABOVE = 35")]
    assert is_evidence("# keep the valve shut", code=True)
    assert not is_evidence("```", code=True) and not is_evidence("# ", code=True)


class Line:
    def __init__(self, filename: str, line: int) -> None:
        self.field, self.filename, self.line = "f", filename, line

    def __repr__(self) -> str:
        return f"{self.filename}:{self.line}"


def test_reading_order_pages_by_best_line_passages_best_first() -> None:
    best_first = [Line("b.md", 40), Line("a.md", 7), Line("b.md", 3), Line("b.md", 41),
                  Line("a.md", 5), Line("b.md", 39), Line("a.md", 30)]
    shown = [[repr(x) for x in page] for page in reading_order(best_first)]
    # b.md holds the best line, so it comes first; its passage 39-41 (in page order) before
    # its weaker line 3; in a.md the passage 5-7 holds a's best line, then line 30.
    assert shown == [["b.md:39", "b.md:40", "b.md:41", "b.md:3"],
                     ["a.md:5", "a.md:7", "a.md:30"]]


WRAPPED = """# Design history

The valve scheduler opens a valve when the moisture falls below the lower threshold and
closes it at the upper one. Two lessons carried
forward: measure the soil, and never hold a coil energised. Grit blocking the valve seat
caused the one valve failure.

- A list item that the editor
  wrapped onto two lines.
- Another item.

| Part | Cost |
| Valve | 38.00 |

Priya: The packs are fine.
assistant: Noted, thanks
Wanjiru: The valve on plot 7 stuck again.

```
def f():
    return 1
```
"""


def test_wrapped_paragraphs_are_quoted_by_sentences_with_their_lines() -> None:
    spans = evidence_spans(WRAPPED.splitlines(), 1)
    assert spans == [
        Span(3, 4, "The valve scheduler opens a valve when the moisture falls below the lower "
                   "threshold and closes it at the upper one."),
        # "forward: measure …" looks like a "label:" line but continues the sentence above.
        Span(4, 5, "Two lessons carried forward: measure the soil, and never hold a coil "
                   "energised."),
        Span(5, 6, "Grit blocking the valve seat caused the one valve failure."),
        Span(8, 9, "- A list item that the editor wrapped onto two lines."),
        Span(10, 10, "- Another item."),
        # A table row carries its table's header row.
        Span(12, 12, "| Part | Cost |"),
        Span(13, 13, "| Valve | 38.00 |", (12, "| Part | Cost |")),
        # A transcript: every turn is its own line, lowercase speakers too.
        Span(15, 15, "Priya: The packs are fine."), Span(16, 16, "assistant: Noted, thanks"),
        Span(17, 17, "Wanjiru: The valve on plot 7 stuck again."),
        Span(20, 20, "def f():"), Span(21, 21, "return 1"),
    ]
    # Chinese wrapped over two lines joins with no space; English after it with one.
    chinese = ["原来的外壳厂商涨价百分之十五。Lena 在深圳找到供应商，报价 4.10 美元，",
               "防护等级 IP65，最小起订量五百个。Samples", "arrive in May."]
    assert evidence_spans(chinese, 1) == [
        Span(1, 1, "原来的外壳厂商涨价百分之十五。"),
        Span(1, 2, "Lena 在深圳找到供应商，报价 4.10 美元，防护等级 IP65，最小起订量五百个。"),
        Span(2, 3, "Samples arrive in May."),
    ]
    # Lines without sentence ends are not run together into one endless quote.
    unpunctuated = ["word " * 20] * 10
    assert [s.line for s in evidence_spans(unpunctuated, 1)] == list(range(1, 11))


def test_research_quotes_whole_sentences_of_wrapped_prose(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("wrapped")
    field.add("Design history", WRAPPED.split("\n", 2)[2], name="history")
    result = research([field], "what caused the valve failure?", budget=200, record=False)
    grit = next(e for e in result.evidence if "Grit" in e.text)
    assert grit.text == "Grit blocking the valve seat caused the one valve failure."
    assert (grit.last, grit.to_json()["last_line"]) == (grit.line + 1, grit.line + 1)
    assert f"L{grit.line}-{grit.line + 1}: {grit.text}" in result.context
    # No evidence is a fragment that a line break cut out of a sentence.
    for item in result.ranked:
        assert not item.text.startswith(("forward:", "caused", "closes")), item
    lines = (field.path / "history.md").read_text().splitlines()
    for item in result.evidence:  # every citation is checkable against the page
        quoted = " ".join(" ".join(lines[item.line - 1:max(item.line, item.last)]).split())
        pieces = [piece.strip() for piece in item.text.split("…") if piece.strip()]
        assert pieces and all(piece in quoted for piece in pieces), item


def _history() -> str:
    """A page of about 20 KB (split into three parts whose footers name LiFePO4) with a
    thematic break in it."""
    filler = ("The enclosure team measured the dust ingress of every gasket sample under the "
              "fan for an hour and wrote down the grit found on the seat afterwards. ")
    sections = []
    for number in range(1, 9):
        sections.append(f"## Revision {number}\n\n" + filler * 12 + "\n\n---\n")
    return "\n".join(sections)


def _corpus(field: deepfield.Field) -> None:
    field.add("LiFePO4 battery history", _history(), name="battery-history",
              summary="How the LiFePO4 battery pack and its enclosure evolved.")
    field.add("Weekly stand-up, 12 May", "Priya: The LiFePO4 packs are fine, 0 failures in 41 "
              "units.\n\nWanjiru: The valve on plot 7 stuck again.\n", name="a-standup",
              summary="Stand-up: packs fine, valve stuck on plot 7.")
    field.add("Why we picked LiFePO4", "On 14 March 2026 we picked LiFePO4 over NMC: we "
              "picked it because LiFePO4 tolerates 45 °C.\n\nIt costs 9 USD more per unit.\n",
              name="z-decision", summary="The LiFePO4 decision of 14 March 2026.")


@pytest.fixture
def corpus(keyword_store: deepfield.Store) -> deepfield.Field:
    field = keyword_store.create_field("research")
    _corpus(field)
    assert len(list(field.path.glob("battery-history*.md"))) == 3
    return field


def _cited(text: str) -> list[tuple[str, int]]:
    """(filename, line) of every evidence line of a rendered context, in order."""
    out: list[tuple[str, int]] = []
    page = ""
    for match in _CITED.finditer(text):
        if match.group(2):
            page = match.group(2)
        else:
            out.append((page, int(match.group(3))))
    return out


def _listed(data: dict[str, Any]) -> list[tuple[str, int]]:
    return [(e["filename"], e["line"]) for e in data["evidence"]]


def test_research_shows_evidence_best_first_and_no_scaffolding(
        corpus: deepfield.Field) -> None:
    result = research([corpus], QUESTION, budget=300, record=False)
    assert all(is_evidence(e.text) for e in result.ranked)  # never even a candidate
    assert not re.search(r"^L\d+: (---|Part \d+ of \d+)", result.context, re.MULTILINE)
    # The best line of all opens the context, and pages come in the order of their best line.
    best = max(result.evidence, key=lambda e: e.score)
    assert result.evidence[0].filename == best.filename
    assert result.context.splitlines()[0].startswith(f"[research/{best.filename}")
    page_best: dict[str, float] = {}
    for item in result.evidence:
        page_best[item.filename] = max(page_best.get(item.filename, 0.0), item.score)
    order = list(dict.fromkeys(e.filename for e in result.evidence))
    assert [page_best[p] for p in order] == sorted(page_best.values(), reverse=True)
    assert order[0] == "z-decision.md"  # the answer's page, last by name
    # The JSON lists the evidence in the order the text shows it.
    assert _cited(result.context) == _listed(result.to_json())
    # A page named in the question is read directly: its body lines, never its frontmatter.
    named = research([corpus], "what does battery-history-part-3 say about gaskets?",
                     budget=300, record=False)
    read = [e for e in named.ranked if e.queries == ["battery-history-part-3"]]
    assert read and all(is_evidence(e.text) and ":" not in e.text[:8] for e in read)
    # Over budget the lowest-value lines go: a tighter packing keeps the best lines.
    tighter = result.repack(120)
    kept = {e.key for e in tighter.evidence}
    assert best.key in kept
    assert min(e.score for e in tighter.evidence) >= max(
        (e.score for e in result.evidence if e.key not in kept and len(e.text) < 60),
        default=0.0)


def test_context_keeps_no_scaffolding_and_task_pages_first(corpus: deepfield.Field) -> None:
    for name, kind in (("battery-history", "history"), ("a-standup", "meeting"),
                       ("z-decision", "decision")):
        path = corpus.path / f"{name}.md"
        path.write_text(path.read_text("utf-8").replace("---\n", f"---\nkind: {kind}\n", 1),
                        "utf-8")
    corpus.add("Canteen menu", "Lunch is at noon.", name="canteen",
               frontmatter={"kind": "note", "date": "2030-01-01"})
    result = build_context(corpus, QUESTION, budget=250)
    assert result.tokens <= 250
    assert not re.search(r"^L\d+: (---|Part \d+ of \d+)", result.text, re.MULTILINE)
    stubs = [b["filename"] for b in result.blocks if b["layer"] == "atomic"]
    left_out = [o.filename for o in result.omitted if o.filename]
    # The newest stub (the canteen) came first before; with a task it is the first to go.
    assert "canteen.md" not in stubs and "canteen.md" in left_out
    assert stubs and stubs[0] == "z-decision.md"
    # Room the research leaves goes to what was left out: nothing left out would still fit.
    for budget in (200, 250, 300):
        built = build_context(corpus, QUESTION, budget=budget)
        for gap in built.omitted:
            assert gap.tokens + FENCE_TOKENS > budget - built.tokens, (budget, gap)


def test_every_interface_shows_the_same_order(tmp_path: Path, cli: Cli,
                                              keyword_store: deepfield.Store) -> None:
    cli("new", "research")
    _corpus(deepfield.open(cli.store_path).field("research"))
    # A research records what it cites, and the pages in use rank a little higher the next
    # time (activation): one research first, so every interface below sees the same use.
    assert cli("research", QUESTION, "-f", "research", "--budget", "300").exit_code == 0
    text = cli("research", QUESTION, "-f", "research", "--budget", "300")
    assert text.exit_code == 0, text.output
    data = cli.json("research", QUESTION, "-f", "research", "--budget", "300")
    order = _cited(text.stdout)
    assert order and order == _cited(data["context"]) == _listed(data)
    assert f"— confidence: {data['confidence']['level']} — " in text.stderr
    rounds = len(data["rounds"])
    assert f" {rounds} round{'' if rounds == 1 else 's'}, 0 model calls," in text.stderr
    store = deepfield.open(cli.store_path)
    with TestClient(create_app(store)) as http:
        served = http.get("/research/_/research", params={"q": QUESTION, "budget": 300})
    assert served.status_code == 200, served.text
    assert _listed(served.json()) == order == _cited(served.json()["context"])
    assert served.json()["confidence"] == data["confidence"]
    server = create_mcp_server(store)

    async def ask() -> Any:
        async with Client(server) as client:
            found = await client.call_tool("research", {"question": QUESTION,
                                                        "fields": ["research"],
                                                        "budget": 300})
            return found.structured_content or json.loads(found.content[0].text)

    try:
        told = anyio.run(ask)
        assert _listed(told) == order and told["confidence"] == data["confidence"]
    finally:
        server.service.close()
        store.close()


def test_a_hit_points_at_the_sentence_its_line_matches(keyword_store: deepfield.Store) -> None:
    from deepfield.research.evidence import PageLines, pointed_lines, pointed_span
    from deepfield.search import Hit

    field = keyword_store.create_field("pointed")
    field.add("Design history", WRAPPED.split("\n", 2)[2], name="history")
    lines = (field.path / "history.md").read_text().splitlines()
    shared = next(n for n, line in enumerate(lines, 1) if line.startswith("forward:"))
    hit = Hit("pointed", "history.md", None, "Design history", None, {}, 1.0, "", shared, "",
              shared - 2, shared + 1, "")
    pages = PageLines([field])
    # Line `shared` ends "Two lessons carried forward …" and starts "Grit blocking …".
    grit = pointed_span(hit, pages, {"grit", "seat"}, [])
    lessons = pointed_span(hit, pages, {"coil", "soil"}, [])
    assert grit is not None and grit.text.startswith("Grit blocking")
    assert lessons is not None and lessons.text.startswith("Two lessons")
    assert [q.text for q in pointed_lines(hit, pages, {"grit"}, [])] == [grit.text]


TABLE = """# Field trial results

After the first month the controllers used less water.

| Measure | Aurora plots | Control plots |
|---|---|---|
| Water used (litres per week) | 3,960 | 6,000 |
| Valve failures | 1 | 0 |
| Sensor drift events | 1 | n/a |
"""


def test_a_table_row_is_shown_under_its_header_row(keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("tables")
    field.add("Field trial results", TABLE.split("\n", 2)[2], name="trial")
    result = research([field], "how many valve failures and sensor drift events?", budget=300,
                      record=False)
    texts = [e.text for e in result.evidence]
    assert "| Valve failures | 1 | 0 |" in texts and "| Sensor drift events | 1 | n/a |" in texts
    # The header row is shown once, above the rows, and counted in the budget.
    assert texts.count("| Measure | Aurora plots | Control plots |") == 1
    assert texts.index("| Measure | Aurora plots | Control plots |") < texts.index(
        "| Valve failures | 1 | 0 |")
    assert result.tokens <= 300
    lines = (field.path / "trial.md").read_text().splitlines()
    for item in result.evidence:
        assert lines[item.line - 1].strip() == item.text
    # Tighter budgets drop rows, never the header row of a row they show.
    for budget in (30, 40, 50):
        tight = [e.text for e in result.repack(budget).evidence]
        assert tight and tight[0] == "| Measure | Aurora plots | Control plots |", tight
        assert tight.count(tight[0]) == 1 and len(tight) < len(texts)


def test_what_the_parts_of_a_split_page_repeat_is_shown_once(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("split")
    filler = ("The enclosure team measured the dust ingress of every gasket sample under the "
              "fan for an hour and wrote down the grit found on the seat afterwards. ")
    body = "".join(f"## Revision {n}\n\n{filler * 12}\n\n" for n in range(1, 7))
    field.add("Gasket history", body + "## Sources\n\n- Heat test report, February 2026.\n",
              name="gaskets", summary="How the gasket of the enclosure changed.")
    parts = sorted(field.path.glob("gaskets*.md"))
    assert len(parts) >= 2 and all("Heat test report" in p.read_text() for p in parts)
    result = research([field], "heat test report of the gasket", budget=600, record=False)
    texts = [" ".join(e.text.split()) for e in result.evidence]
    assert texts.count("- Heat test report, February 2026.") == 1, texts
    assert len(texts) == len(set(texts))  # nor the memo every part carries
    assert len({e.origin for e in result.evidence}) == 1 and result.evidence[0].origin


SOURCED = """# Enclosure

A white sun shield lowered the peak by 6 °C in the February heat test.

## Sources

- Heat test report, February 2026.

### Heat test

- Thermocouple log of the heat test, plot 3.

```
## Lessons (in a code block: not a heading)
```

- Logger firmware notes.

## Lessons

Heat decided more than any datasheet did.
"""


def test_lines_of_a_sources_section_are_marked() -> None:
    spans = {s.text: s.in_sources for s in evidence_spans(SOURCED.splitlines(), 1)}
    assert spans == {
        "A white sun shield lowered the peak by 6 °C in the February heat test.": False,
        "- Heat test report, February 2026.": True,
        # A subsection of the sources section is still sources (a heading in a code block
        # closes nothing); the next section of the same level is not.
        "- Thermocouple log of the heat test, plot 3.": True,
        "## Lessons (in a code block: not a heading)": True,  # quoted as code
        "- Logger firmware notes.": True,
        "Heat decided more than any datasheet did.": False,
    }
    # A heading named like a section of sources, at any level, opens one.
    marked = evidence_spans(["#### References", "", "Smith 2024."], 1)
    assert [(s.text, s.in_sources) for s in marked] == [("Smith 2024.", True)]
    # So does a setext heading, whose title line is no more evidence than an ATX one.
    setext = ["Soil sensing", "============", "", "Capacitive probes replaced resistive ones.",
              "", "Sources", "-------", "", "- Rev A design review."]
    assert [(s.line, s.text, s.in_sources) for s in evidence_spans(setext, 1)] == [
        (4, "Capacitive probes replaced resistive ones.", False),
        (9, "- Rev A design review.", True)]


def test_a_source_line_ranks_below_the_line_that_says_what_was_found(
        keyword_store: deepfield.Store) -> None:
    field = keyword_store.create_field("sourced")
    field.add("Enclosure notes", SOURCED.split("\n", 2)[2], name="enclosure")
    result = research([field], "what did the heat test show?", budget=300, record=False)
    texts = [e.text for e in result.ranked]
    found = "A white sun shield lowered the peak by 6 °C in the February heat test."
    # "- Heat test report, February 2026." shares the question's words; it only names where
    # the result is. It stays evidence, below the line that gives the result.
    assert texts[0] == found, texts
    assert "- Heat test report, February 2026." in texts
    assert result.context.index(found) < result.context.index("Heat test report")


PEOPLE = """# People

## Mireille Favre

Principal investigator. Runs the mass balance series since 2012.

## Jonas Berg

Drone pilot and photogrammetry. Holds the EU A2 certificate.
Flies the drone survey every October.

## Ana Quispe

PhD student working on InSAR velocity. Flies to Patagonia in March.
"""


def test_evidence_is_shown_under_its_section_heading(keyword_store: deepfield.Store) -> None:
    # "Drone pilot and photogrammetry." says what, its heading says who: without "Jonas
    # Berg" the context cannot answer "who is the drone pilot?".
    field = keyword_store.create_field("team")
    field.add("People", PEOPLE.split("\n", 1)[1], name="people")
    result = research([field], "who is the drone pilot and who flies?", budget=300,
                      record=False)
    lines = result.context.splitlines()
    pilot = next(i for i, line in enumerate(lines) if "Drone pilot" in line)
    assert lines[pilot - 1] == "§ Jonas Berg", lines
    # Each heading is shown once per page, its lines together under it, and the page title
    # ("People", the H1) is never repeated as a section.
    sections = [line for line in lines if line.startswith("§ ")]
    assert len(sections) == len(set(sections)) and "§ People" not in sections
    ana = next(i for i, line in enumerate(lines) if "Flies to Patagonia" in line)
    assert lines[ana - 1] == "§ Ana Quispe", lines
    # The headings are counted in the budget: every budget holds, exactly as rendered.
    for budget in (60, 80, 120, 300):
        packed = result.repack(budget)
        assert packed.tokens == count_tokens(packed.text) <= budget, budget


def test_a_taxonomy_entry_ranks_below_the_line_that_answers(
        keyword_store: deepfield.Store) -> None:
    # "- Glacial lake outburst floods (GLOF)" holds every word of the question and says
    # nothing of it: a domain's taxonomy names topics, the survey says what triggers them.
    field = keyword_store.create_field("glaciers")
    field.write("---\ntitle: Taxonomy\nrole: taxonomy\n---\n# Taxonomy\n\n## Hydrology\n\n"
                "- Runoff modelling\n- Glacial lake outburst floods (GLOF)\n", name="taxonomy.md")
    field.add("GLOF survey", "## Triggers\n\nMost outbursts were triggered by ice avalanches "
              "into the lake, then moraine dam failure.\n", name="survey")
    result = research([field], "what triggers glacial lake outburst floods?", budget=300,
                      record=False)
    assert result.ranked[0].filename == "survey.md", [e.filename for e in result.ranked]
    assert any(e.filename == "taxonomy.md" for e in result.ranked)  # still evidence


def test_a_note_under_a_paragraph_is_ranked_on_its_own(keyword_store: deepfield.Store) -> None:
    # One prose chunk holds the paragraph and the quoted note under it; the note answers the
    # second half of the question, and the line-ranked searches must see it as a line.
    field = keyword_store.create_field("dem")
    field.add("Processing notes", "## Void filling\n\nVoids are filled with the hypsometric "
              "mean of the 50 m elevation band.\n\n> Note: never fill voids larger than 20 % "
              "of the glacier area.\n", name="processing")
    for i in range(6):
        field.add(f"Meeting {i}", f"- Decision {i}: keep the stake network as it is.\n"
                  f"- The limit of the survey budget is {i} thousand.\n", name=f"meeting-{i}")
    result = research([field], "how are voids filled and what is the limit?", budget=300,
                      record=False)
    top = [(e.filename, e.text) for e in result.ranked[:2]]
    assert ("processing.md", "> Note: never fill voids larger than 20 % of the glacier area.") \
        in top, top
