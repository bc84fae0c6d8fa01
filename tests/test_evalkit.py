"""The LoCoMo evaluation library (bench/evalkit): bad input, crediting, packing, leave-one-out.

Synthetic conversations in LoCoMo's layout, imported into a real store on the fake embedder.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import deepfield
from deepfield.importers.locomo import import_locomo
from deepfield.search import Hit
from deepfield.tokens import count_tokens

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from evalkit import report  # noqa: E402
from evalkit.data import EvalDataError, Question, load  # noqa: E402
from evalkit.fts import PlainFTS, match_query  # noqa: E402
from evalkit.metrics import (  # noqa: E402
    answer_coverage,
    evidence_recall,
    leave_one_out,
    means,
    turn_scores,
)
from evalkit.store import PageTurns  # noqa: E402
from evalkit.systems import (  # noqa: E402
    DeepfieldSearch,
    Fields,
    PlainFTS5,
    PlainFTS5Lines,
    Ranking,
    SingleSearchLines,
    credit_hits,
    evidence_lines,
)

TURNS_1 = [
    ("Ana", "Good morning! How was the weekend?"),
    ("Ben", "Busy. I adopted a zebra finch and named it Stripes."),
    ("Ana", "Lovely, what colour is it?"),
    ("Ben", "Grey with an orange beak, and it sings all day."),
]
TURNS_2 = [
    ("Ana", "I finally visited Mombasa for the gasket conference."),
    ("Ben", "Did the talk go well?"),
    ("Ana", "Yes, they want a second talk in Nairobi next spring."),
]


def conversation(name: str = "conv-1", qa: list[Any] | None = None) -> dict[str, Any]:
    def turns(session: int, rows: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"speaker": who, "dia_id": f"D{session}:{i}", "text": text}
                for i, (who, text) in enumerate(rows, 1)]

    return {
        "sample_id": name,
        "conversation": {
            "speaker_a": "Ana", "speaker_b": "Ben",
            "session_1": turns(1, TURNS_1), "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": turns(2, TURNS_2), "session_2_date_time": "3:00 pm on 9 June, 2023",
            "session_3_date_time": "4:00 pm on 1 July, 2023",  # a date with no turns
        },
        "qa": qa if qa is not None else [
            {"question": "What did Ben name his zebra finch?", "answer": "Stripes",
             "evidence": ["D1:2"], "category": 4},
            {"question": "What colour is Ben's finch?", "answer": "grey",
             "evidence": ["D1:4"], "category": 4},
            {"question": "Where did Ana give talks?", "answer": "Mombasa, Nairobi",
             "evidence": ["D2:1", "D2:3"], "category": 1},
            {"question": "When did Ana visit Mombasa?", "answer": "June 2023",
             "evidence": ["D2:1"], "category": 2},
        ],
    }


def write(tmp_path: Path, data: object, name: str = "locomo.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


# ---------------------------------------------------------------------- bad input


def test_missing_malformed_and_wrong_layout_are_one_line_errors(tmp_path: Path) -> None:
    cases = {
        tmp_path / "absent.json": "not found",
        write(tmp_path, "x", "scalar.json"): "not a list",
        write(tmp_path, [{"qa": []}], "layout.json"): "sample_id",
        write(tmp_path, [conversation("a"), conversation("a")], "twice.json"): "twice",
    }
    (tmp_path / "broken.json").write_text("[{")
    cases[tmp_path / "broken.json"] = "not JSON"
    for path, words in cases.items():
        with pytest.raises(EvalDataError) as info:
            load(path)
        assert words in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(EvalDataError, match="no conversation conv-9"):
        load(write(tmp_path, [conversation()]), only=["conv-9"])


def test_every_question_is_scored_or_counted(tmp_path: Path) -> None:
    qa = [
        {"question": "Fine?", "answer": "x", "evidence": ["D1:2"], "category": 4},
        {"question": "Split?", "answer": "x", "evidence": ["D1:2; D2:3"], "category": 1},
        {"question": "Odd ids?", "answer": "x", "evidence": ["D:1:4", "D2:01", "D", "D1:4"],
         "category": 2},
        {"question": "Unknown category?", "answer": "x", "evidence": ["D1:1"], "category": 9},
        {"question": "Boolean category?", "answer": "x", "evidence": ["D1:1"], "category": True},
        {"question": "No evidence?", "answer": "x", "evidence": [], "category": 3},
        {"question": "Only bad ids?", "answer": "x", "evidence": ["D7:1", "E1"], "category": 4},
        {"question": "Adversarial?", "adversarial_answer": "none", "evidence": ["D1:1"],
         "category": 5},
        {"answer": "no question", "evidence": ["D1:1"], "category": 4},
        "not an object",
    ]
    data = load(write(tmp_path, [conversation(qa=qa)]))
    assert [q.question for q in data.questions] == ["Fine?", "Split?", "Odd ids?"]
    assert data.questions[1].evidence == ("D1:2", "D2:3")
    assert data.questions[2].evidence == ("D1:4", "D2:1")  # 'D:1:4' and 'D1:4' are one turn
    assert data.skipped == {"of an unknown category": 2, "without evidence": 1,
                            "without a valid evidence id": 1, "adversarial (category 5)": 1,
                            "without a question text": 2}
    assert sum(data.skipped.values()) + len(data.questions) == len(qa)
    assert data.repairs["malformed ids dropped"] == 2  # 'D' and 'E1'
    assert data.repairs["ids of no turn dropped"] == 1
    assert data.repairs["duplicate ids dropped"] == 1
    assert data.adversarial[0].answer == "none"
    assert "3 questions scored" in data.describe() and "2 of an unknown category" in (
        data.describe())


# ---------------------------------------------------------------------- crediting


@pytest.fixture
def imported(store: deepfield.Store, tmp_path: Path) -> tuple[Fields, Any]:
    path = write(tmp_path, [conversation()])
    import_locomo(store, path)
    store.field("conv-1").index()
    dataset = load(path)
    return Fields(store, dataset), dataset


def hit(filename: str, pointed: int, start: int, end: int) -> Hit:
    return Hit("conv-1", filename, None, "t", None, {"session": 1}, 1.0, "", pointed, "",
               start, end, "")


def test_a_hit_is_credited_only_for_the_line_it_points_at(imported: tuple[Fields, Any]) -> None:
    fields, _dataset = imported
    turns = fields.turns["conv-1"]
    where = turns.line_of("D1:2")
    assert where is not None and where.filename == "session-01.md"
    assert "(D1:2): Busy." in where.text
    line = where.line
    header = line - 3  # the context paragraph above the turns shows no turn
    assert turns.turn_at("session-01.md", header) is None
    pointed, neighbours = credit_hits(
        [hit("session-01.md", line, line - 1, line + 1),
         hit("session-01.md", line + 1, line, line + 2),
         hit("session-01.md", header, header, header)], turns)
    assert pointed == ["D1:2", "D1:3", None]
    assert neighbours == ["D1:2", "D1:1", "D1:3", "D1:4"]
    question = Question("conv-1", 0, "q", "a", 1, ("D1:1", "D1:3"))
    scores = turn_scores(question, Ranking(pointed, [1], neighbours))
    assert scores["turn R@10"] == 0.5 and scores["turn all@10"] == 0.0
    assert scores["turn R@10 (neighbours credited)"] == 1.0
    assert scores["session R@3"] == 1.0


def test_search_systems_on_the_imported_pages(imported: tuple[Fields, Any]) -> None:
    fields, dataset = imported
    finch = dataset.questions[0]
    plain = PlainFTS5(dataset).rank(finch, 10, 5)
    assert plain.pointed[0] == "D1:2" and plain.sessions[0] == 1
    for mode in ("bm25", "hybrid"):
        ranking = DeepfieldSearch(fields, mode).rank(finch, 10, 5)
        assert ranking.pointed[0] == "D1:2", mode
        assert ranking.sessions[0] == 1
        # No hit points at a line that is not the turn it is credited with.
        turns = fields.turns["conv-1"]
        for turn in ranking.pointed:
            assert turn is None or turns.line_of(turn) is not None


def test_plain_fts5_is_one_document_per_turn() -> None:
    assert match_query("What did Ben name his zebra finch?") == '"ben" OR "name" OR "zebra" ' \
        'OR "finch"'
    index = PlainFTS({"D1:1": {"speaker": "Ana", "text": "the zebra"},
                      "D1:2": {"speaker": "Ben", "text": "a cat", "blip_caption": "a zebra"},
                      "D2:1": {"speaker": "Ana", "text": "no match"}})
    assert sorted(index.turns("zebra", 10)) == ["D1:1", "D1:2"]
    assert index.sessions("zebra", 5) == [1]
    assert index.turns("the", 10) == ["D1:1"]  # only stop words: they are searched


# ---------------------------------------------------------------------- budgets


def test_baselines_pack_distinct_pointed_lines_within_budget(
        imported: tuple[Fields, Any]) -> None:
    fields, dataset = imported
    fld = fields.fields["conv-1"]
    turns = fields.turns["conv-1"]
    line = turns.line_of("D1:2")
    assert line is not None
    from deepfield.research.evidence import PageLines, TermWeights

    hits = [hit("session-01.md", line.line, line.line - 1, line.line + 1),
            hit("session-01.md", line.line, line.line, line.line + 1)]  # same line twice
    pointed = evidence_lines(hits, PageLines([fld]), "zebra finch", TermWeights(fld), False)
    assert [e.line for e in pointed.ranked] == [line.line]
    window = evidence_lines(hits, PageLines([fld]), "zebra finch", TermWeights(fld), True)
    assert [e.line for e in window.ranked] == [line.line, line.line - 1, line.line + 1]
    text = window.pack(60)
    assert count_tokens(text) <= 60 and "(D1:2)" in text
    for system in (SingleSearchLines(fields, "bm25"),
                   PlainFTS5Lines(fields, PlainFTS5(dataset))):
        packer, _seconds = system.run(dataset.questions[3])
        packed = packer.pack(80)
        assert count_tokens(packed) <= 80
        assert evidence_recall(packed, ("D2:1",)) == 1.0


def test_found_recall_counts_what_a_budget_left_out(imported: tuple[Fields, Any]) -> None:
    from evalkit.run import run_budgets

    fields, dataset = imported
    question = dataset.questions[2]  # two gold turns, a budget that holds one line at most
    (run,) = run_budgets([SingleSearchLines(fields, "bm25")], [question], (40,))
    packed = run.records[40][0][1]["recall"]
    found = run.found[0][1]["recall"]
    assert packed is not None and found is not None
    assert packed < found == 1.0
    table = report.found_table([run], 40)
    assert f"| {packed:.3f} / 1.000 |" in table and "multi-hop (n=1)" in table
    summary = report.budget_summary([run])[run.name]["found recall"]
    assert summary["multi-hop"] == {"n": 1, "value": 1.0}


def test_recall_and_answer_words() -> None:
    assert evidence_recall("Ana (D1:31): x", ("D1:3",)) == 0.0
    assert evidence_recall("Ana (D1:3): x", ("D1:3", "D2:1")) == 0.5
    assert answer_coverage("they met in Mombasa", "Mombasa, Nairobi") == 0.5
    assert answer_coverage("anything", "?") is None


def test_means_per_category_leave_out_undefined_values() -> None:
    one = Question("c", 0, "q", "a", 1, ("D1:1",))
    two = Question("c", 1, "q", "a", 2, ("D1:1",))
    table = means([(one, {"m": 1.0}), (two, {"m": None}), (two, {"m": 0.0})], "m")
    assert (table["overall"].n, table["overall"].value) == (2, 0.5)
    assert (table["multi-hop"].n, table["temporal"].value) == (1, 0.0)
    assert table["single-hop"].value is None


def test_leave_one_conversation_out_scores_the_held_out_pick() -> None:
    # Value "a" is best on conversations x and y, "b" on z: the fold holding out z picks
    # "a" (best on x and y) and scores it on z.
    questions = [Question(c, i, "q", "a", 1, ("D1:1",)) for i, c in enumerate("xyz")]
    scores = {"a": [1.0, 1.0, 0.0], "b": [0.5, 0.5, 1.0]}
    result = leave_one_out(["a", "b"], "b", questions, lambda v, i: scores[str(v)][i])
    assert result.picks == {"x": "b", "y": "b", "z": "a"}
    assert result.held_out == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert result.in_sample == pytest.approx(2.0 / 3) and result.best == "a"


def test_entry_point_reports_bad_data_in_one_line(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import locomo

    assert locomo.main(["--data", str(tmp_path / "nope.json"), "--no-write"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: LoCoMo data file not found") and "\n" not in err


def test_page_turns_ignore_ids_quoted_inside_a_line(tmp_path: Path) -> None:
    (tmp_path / "p.md").write_text("---\ntitle: x\n---\nAna (D1:1): see (D1:9) above\n"
                                   + "Ben: " + "word " * 20 + "(D1:2)\n")
    turns = PageTurns(tmp_path)
    assert turns.turn_at("p.md", 4) == "D1:1" and turns.turn_at("p.md", 5) is None
    assert turns.line_of("D1:9") is None and turns.titles["p.md"] == "x"


def test_research_sweeps_reuse_searches_and_restore_constants(
        imported: tuple[Fields, Any]) -> None:
    from evalkit.tuning import MemoisedSearches, Tunable, research_recall

    from deepfield.research import latent, loop

    fields, dataset = imported
    original = loop.search_fields, latent.search
    memo = MemoisedSearches()
    prior = Tunable("deepfield.research.evidence.LENGTH_PRIOR", (), "research")
    shipped = prior.get()
    with memo:
        first = research_recall(fields, dataset.questions)
        made = len(memo.cache)
        prior.set(0.0)
        again = research_recall(fields, dataset.questions)
        prior.set(shipped)
        assert research_recall(fields, dataset.questions) == first
    assert made > 0 and len(memo.cache) == made  # the later passes searched nothing new
    assert len(again) == len(first) == len(dataset.questions)
    assert (loop.search_fields, latent.search) == original


def test_confidence_bench_asks_what_the_evaluation_keeps(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import confidence

    qa = [*conversation()["qa"],
          {"question": "What did Ana name her finch?", "adversarial_answer": "Stripes",
           "evidence": ["D1:2"], "category": 5},
          {"question": "Unknown?", "answer": "x", "evidence": ["D1:1"], "category": 7}]
    dataset = load(write(tmp_path, [conversation(qa=qa)]))
    asked = confidence.questions(dataset)
    assert [q["category"] for q in asked] == [4, 4, 1, 2, 5]
    assert asked[-1]["gold"] == ["D1:2"] and dataset.skipped["of an unknown category"] == 1
    monkeypatch.setattr(sys, "argv", ["confidence.py", "--data", str(tmp_path / "nope.json")])
    assert confidence.main() == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: LoCoMo data file not found") and "\n" not in err


def test_qa_bench_scores_the_researcher_beside_one_search(
        imported: tuple[Fields, Any], openai_server: Any) -> None:
    """bench/qa.py: both contexts answered by the same model, F1 per category."""
    import qa

    from deepfield.llm import build_llm
    from deepfield.llm.config import LLMConfig

    from .fake_openai import CHAT, Reply, chat_completion

    def reply(request: Any) -> Reply:
        asked = request.json["messages"][-1]["content"]
        return Reply(json=chat_completion("Stripes" if "Stripes" in asked else "no idea"))

    openai_server.set_handler(CHAT, reply)
    fields, dataset = imported
    model = build_llm(LLMConfig(options={"url": openai_server.url, "model": "m"}), "researcher")
    assert model is not None
    scored = qa.evaluate(fields, dataset.questions, model, budget=300)
    assert [s.name for s in scored] == ["deepfield research (offline)",
                                        "one hybrid search, window lines"]
    for system in scored:
        by_question = dict((q.question, f1) for q, f1 in system.f1)
        assert by_question["What did Ben name his zebra finch?"] == 1.0
        assert len(system.f1) == len(dataset.questions) and all(system.tokens)
    rows = qa.table(scored)
    assert any(r.startswith("| multi-hop | 1 | one hybrid search") for r in rows)
    assert qa.main(["--url", openai_server.url, "--answer-model", "m",
                    "--data", "/nonexistent/locomo.json", "--no-write"]) == 2


def test_marked_blocks_replace_their_section_or_are_refused(tmp_path: Path) -> None:
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n\n<!-- perf:start -->\nold\n<!-- perf:end -->\n\nkept\n")
    report.write_marked(doc, "<!-- perf:start -->\n## Performance\nnew\n<!-- perf:end -->\n")
    report.write_marked(doc, "<!-- scale:start -->\n\nadded\n\n<!-- scale:end -->\n")
    text = doc.read_text()
    assert "old" not in text and "## Performance\nnew\n<!-- perf:end -->" in text
    assert text.index("kept") < text.index("<!-- scale:start -->\n\nadded\n<!-- scale:end -->")
    with pytest.raises(ValueError, match="marked block"):
        report.write_marked(doc, "<!-- perf:start -->\nno end marker\n")
    assert doc.read_text() == text
