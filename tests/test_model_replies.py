"""What deepfield does with model replies that are not what was asked: citations of pages
that do not exist, memos with a chatty preamble."""

from __future__ import annotations

import json

import deepfield
from deepfield.llm import OpenAIChat
from deepfield.research import research

from .fake_openai import CHAT, FakeOpenAIServer, chat_completion


def _model(server: FakeOpenAIServer) -> OpenAIChat:
    return OpenAIChat(url=server.url, model="reader", sleep=lambda _s: None, max_retries=0)


def test_a_summary_citing_a_page_that_is_not_there_is_marked_and_warned(
        keyword_store: deepfield.Store, openai_server: FakeOpenAIServer) -> None:
    field = keyword_store.create_field("home")
    field.add("Boiler fix", "Ana fixed the boiler on 2 July 2023.", name="boiler-fix")
    field.add("Plumber", "Marco quoted 400 euros.", name="plumber")
    plan = {"info_needs": ["boiler"], "keyword": "boiler", "vector": [], "page_ids": []}
    summary = ("Ana fixed the boiler on 2 July 2023 [boiler-fix.md] and Marco quoted 400 "
               "euros [plumber.md]; it cost 400 euros [nonexistent.md, boiler-fix.md] "
               "(see [the log](boiler-fix.md)).")
    openai_server.enqueue(CHAT, json=chat_completion(json.dumps(plan)))
    openai_server.enqueue(CHAT, json=chat_completion(json.dumps(
        {"summary": summary, "sources": ["boiler-fix.md", "nonexistent.md"], "enough": True,
         "follow_up": []})))
    found = research([field], "When did Ana fix the boiler?", llm=_model(openai_server),
                     record=False)
    assert "[boiler-fix.md]" in found.summary and "[plumber.md]" in found.summary
    assert "[nonexistent.md?, boiler-fix.md]" in found.summary  # a page that exists: as is
    assert "[the log](boiler-fix.md)" in found.summary
    assert "nonexistent.md?" in found.context
    warned = [w for w in found.warnings if "nonexistent.md" in w]
    assert len(warned) == 1 and "marked [nonexistent.md?]" in warned[0]


def test_a_prose_memo_loses_its_chatty_preamble(keyword_store: deepfield.Store,
                                                openai_server: FakeOpenAIServer) -> None:
    from deepfield.memorize import remember

    field = keyword_store.create_field("home")
    openai_server.enqueue(CHAT, json=chat_completion(
        "Sure! Here is the memo: Ana reports the boiler leaks again because the valve failed; "
        "Ben suggests calling Marco."))
    done = remember(field, "s2.txt", llm=_model(openai_server),
                    text="Ana: The boiler leaks again, the valve I fitted last week failed.\n"
                         "Ben: Call Marco then.\n")
    assert done.memo_by == "llm:reader"
    assert done.memo == ("Ana reports the boiler leaks again because the valve failed; Ben "
                         "suggests calling Marco.")
    assert any("did not reply in JSON" in w for w in done.warnings)
