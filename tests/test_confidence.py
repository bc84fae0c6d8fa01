"""The confidence signal on search and research: levels and reasons, worked by hand."""

from __future__ import annotations

import json

import pytest

import deepfield
from deepfield.confidence import DEFAULT, Line, Thresholds, assess, classify, signals
from deepfield.research import research

from .conftest import Cli

RACE = [
    Line("Melanie (D2:3): The charity race was great, I realized self-care is important.", 3.0,
         "Caroline and Melanie, session 2"),
    Line("Caroline (D2:4): That is wonderful to hear!", 0.5, "Caroline and Melanie, session 2"),
]


def test_a_line_said_by_the_one_asked_about_is_high() -> None:
    found = assess("What did Melanie realize after the charity race?", RACE)
    assert found.level == "high"
    assert found.signals.subject == ("Melanie",) and found.signals.by_speaker
    assert found.signals.subject_share == pytest.approx(3 / 3.5)  # 3 of the 3.5 of score
    assert found.signals.support == 1.0
    assert found.reason == ("86% of the best results' weight is in lines said by Melanie, one "
                            "of which holds every question word")


def test_words_said_by_someone_else_are_none() -> None:
    # The adversarial question: every word matches, but the race was Melanie's.
    found = assess("What did Caroline realize after her charity race?", RACE)
    assert found.level == "none"
    assert found.signals.subject_share == pytest.approx(0.5 / 3.5)
    assert found.reason == ("only 14% of the best results' weight is in lines said by "
                            "Caroline; the others are Melanie's")


@pytest.mark.parametrize(("question", "level", "reason"), [
    ("What did Zorro do at the race?", "none", "no result mentions Zorro"),
    ("What did Melanie eat for breakfast?", "none", "said by Melanie holds any of: eat, breakfast"),
    ("What did Melanie sing?", "low", "lacks: sing"),  # one word may be said otherwise
    ("What did Melanie realize about the marathon?", "low", "lacks"),
])
def test_other_reasons(question: str, level: str, reason: str) -> None:
    found = assess(question, RACE)
    assert found.level == level and reason in found.reason, found.reason


def test_prose_pages_count_their_titles_and_nothing_found_is_none() -> None:
    lines = [Line("Use a 12.8 V, 6 Ah lithium iron phosphate pack.", 2.0,
                  "Decision: LiFePO4 battery instead of NMC"),
             Line("It costs 9 USD more per unit and the team picked it in March.", 1.0,
                  "Decision: LiFePO4 battery instead of NMC")]
    found = assess("When did the team pick LiFePO4?", lines)
    assert found.signals.subject_share == 1.0 and found.level == "high", found.reason
    assert assess("When did the team pick LiFePO4?", []).level == "none"


def test_verbs_that_frame_a_question_are_not_content_words() -> None:
    # The line that answers "what did the heat test show?" gives the result; it does not say
    # "show". Nor does "Melanie: … realized …" say "said".
    heat = [Line("A white sun shield lowered the peak by 6 °C in the February heat test.", 2.0,
                 "Design history")]
    found = assess("What did the heat test show?", heat)
    assert found.signals.words == ("heat", "test") and found.level == "high", found.reason
    said = assess("What did Melanie say she realized after the charity race?", RACE)
    assert "say" not in said.signals.words and said.level == "high", said.reason
    # A content verb still counts: nothing in the lines says "sing".
    assert assess("What did Melanie sing?", RACE).signals.words_missing == ("sing",)


def test_what_a_line_is_about_may_be_named_in_its_heading() -> None:
    people = [Line("Drone pilot and photogrammetry. Holds the EU A2 certificate.", 2.0, "People",
                   "People > Jonas Berg"),
              Line("PhD student working on InSAR velocity.", 0.5, "People", "People > Ana Quispe")]
    found = assess("What certificate does Jonas Berg hold?", people)
    assert found.signals.entities_missing == () and found.level == "high", found.reason
    # The heading's words are the line's too: "September" is only in its section's title.
    log = [Line("| T4 | 2,690 | 156 |", 1.0, "Field log", "Field log > 16 September 2025")]
    assert assess("stake melt in September", log).signals.words_missing == ("stake", "melt")


def test_a_glossary_item_is_no_speaker_and_operators_are_no_names() -> None:
    # "- InSAR: radar interferometry" defines a term; were InSAR a speaker, only lines it
    # "said" would be about it, and the line that answers would not count.
    lines = [Line("- Ana starts the InSAR pilot on Perito Moreno.", 2.0, "Meeting"),
             Line("- InSAR: radar interferometry", 1.0, "Taxonomy")]
    found = assess("Who starts the InSAR pilot?", lines)
    assert not found.signals.by_speaker and found.signals.subject_share == 1.0, found.reason
    assert found.level == "high", found.reason
    assert assess("pilot AND InSAR", lines).signals.entities == ("InSAR",)


def test_a_question_with_nothing_to_check_is_not_high() -> None:
    lines = [Line("<!-- What never to do -->", 1.0, "Preferences")]
    for question in ("???", "the of and", "What is it?"):  # stop words check nothing either
        found = assess(question, [*lines, Line("It is the end of it.", 0.5, "Notes")])
        assert (found.level, found.reason) == (
            "none", "the question has no word to check the results against"), question
    # Chinese has no spaces: its words are bigrams, and a line about something else lacks them.
    mars = assess("火星上的天气", [Line("原来的外壳厂商涨价百分之十五。", 1.0, "供应商")])
    assert mars.level == "low" and "天气" in mars.signals.words, mars.reason
    assert "no line holds any of" in mars.reason
    price = assess("外壳厂商涨价", [Line("原来的外壳厂商涨价百分之十五。", 1.0, "供应商")])
    assert price.level == "high", price.reason


def test_thresholds_move_the_levels() -> None:
    found = signals("What did Caroline realize after her charity race?", RACE)
    assert "weight" in classify(found)[1]
    # Under a lower share threshold, Caroline's own line is read: it holds no question word.
    assert "holds any of" in classify(found, Thresholds(none_share=0.1))[1]
    partial = signals("What did Melanie realize about the marathon?", RACE)
    assert classify(partial)[0] == "low"
    assert classify(partial, Thresholds(high_support=0.5))[0] == "high"
    assert DEFAULT.none_share < DEFAULT.high_share


def test_search_and_research_carry_it(keyword_store: deepfield.Store, cli: Cli) -> None:
    field = keyword_store.create_field("talk")
    field.add("Session 2", "Melanie (D2:3): The charity race was great, I realized self-care is "
              "important.\nCaroline (D2:4): That is wonderful to hear!\n")
    asked = "What did Caroline realize after her charity race?"
    response = field.search(asked)
    assert response.to_json()["confidence"]["level"] == response.confidence.level == "none"
    found = research([field], asked, record=False)
    data = found.to_json()
    assert data["confidence"]["level"] == "none" and "Melanie" in data["confidence"]["reason"]
    assert set(data["confidence"]["signals"]) >= {"subject_share", "support", "margin"}
    cli("new", "talk")
    (cli.store_path / "talk" / "s2.md").write_text(
        "# Session 2\n\nMelanie (D2:3): The charity race was great, I realized self-care is "
        "important.\n", encoding="utf-8")
    shown = cli("search", "What did Melanie realize after the charity race?")
    assert shown.stdout.splitlines()[0].startswith("confidence: high — ")
    told = cli("research", asked, "-f", "talk")
    assert "— confidence: none — " in told.stderr
    assert json.loads(cli("search", asked, "--json").stdout)["confidence"]["level"] == "none"


def test_a_bigram_across_two_chinese_words_is_not_missing() -> None:
    # 电池安全 gives 电池, 池安, 安全; the line says 电池 … 安全, never 池安.
    line = Line("我们在三月选择了磷酸铁锂电池，因为它比三元锂电池更安全。", 1.0, "锂电池选择")
    found = assess("电池安全", [line])
    assert found.level == "high" and "池安" not in found.reason, found.reason
    assert assess("池安", [line]).signals.support == 0  # asked alone, it is a word


def test_a_page_title_counts_but_not_its_date() -> None:
    cast_iron = Line("Gusseisenpfannen müssen eingebrannt werden.", 1.0, "Küche: Gusseisen")
    assert assess("Küche", [cast_iron]).level == "high"
    # A transcript's title is when it was said: "May" there supports no question about May.
    session = Line("Melanie (D1:2): I ran a charity race.", 1.0,
                   "Session 3 — 1:56 pm on 8 May, 2023")
    assert "may" in assess("What did Melanie do in May 2023?", [session]).signals.words_missing


def test_naming_nobody_a_line_without_the_words_is_low_not_none() -> None:
    # A vector hit in other words: the agent should look further, not say it does not know.
    espresso = Line("The espresso machine needs descaling every month.", 0.85, "Espresso")
    found = assess("coffee maker maintenance", [espresso])
    assert found.level == "low" and "by meaning" in found.reason, found.reason
