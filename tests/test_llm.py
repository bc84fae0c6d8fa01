"""Chat backends against the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepfield.errors import ConfigError, LLMReplyError, LLMServiceError
from deepfield.llm import (
    LLMConfig,
    OpenAIChat,
    ReplyNotJSONError,
    Usage,
    build_llm,
    complete_json,
    create_llm,
    load_llm_config,
    parse_json_reply,
)
from deepfield.llm.base import STRING, Message, ReplySchema

from .fake_openai import CHAT, FakeOpenAIServer, Reply, chat_completion


def model(server: FakeOpenAIServer, **options: object) -> OpenAIChat:
    sleeps: list[float] = []
    chat = OpenAIChat(url=server.url, model="m", api_key="k", sleep=sleeps.append,
                      **options)  # type: ignore[arg-type]
    chat.sleeps = sleeps  # type: ignore[attr-defined]
    return chat


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"a": 1}', {"a": 1}),
    ('<think>first {"no": 1} then</think>\n{"a": 2}', {"a": 2}),
    ('Sure! Here it is:\n```json\n{"a": 3}\n```\nHope that helps.', {"a": 3}),
    ('The answer is {"a": 4} as requested.', {"a": 4}),
    ('{"a": [1, 2,], "b": 5,}', {"a": [1, 2], "b": 5}),
    ('<think>unclosed reasoning {"x": 1}', None),
])
def test_parse_json_reply(reply: str, expected: object) -> None:
    if expected is None:
        with pytest.raises(ReplyNotJSONError):
            parse_json_reply(reply)
    else:
        assert parse_json_reply(reply) == expected


def test_truncated_and_missing_json_say_why() -> None:
    with pytest.raises(ReplyNotJSONError, match="cut off"):
        parse_json_reply('{"memo": "a long memo that never')
    with pytest.raises(ReplyNotJSONError, match="no valid JSON object"):
        parse_json_reply("I cannot help with that.")
    with pytest.raises(ReplyNotJSONError, match="empty"):
        parse_json_reply("<think>only thoughts</think>")
    assert parse_json_reply('noise ["a", "b"] noise', expect=list) == ["a", "b"]


def test_request_shape_usage_and_json_mode(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, json=chat_completion("hello", usage={
        "prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}))
    reply = model(openai_server).chat([{"role": "user", "content": "hi"}], max_tokens=50,
                                      temperature=0.1, json_mode=True)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("hello", 12, 3)
    assert reply.seconds > 0 and reply.finish_reason == "stop"
    request = openai_server.requests_to(CHAT)[-1]
    assert request.json["model"] == "m" and request.json["max_tokens"] == 50
    assert request.json["messages"] == [{"role": "user", "content": "hi"}]
    assert request.json["response_format"] == {"type": "json_object"}
    assert request.headers["authorization"] == "Bearer k"


SCHEMA = ReplySchema.object("answer", memo=STRING, project={"type": ["string", "null"]})
ASK: list[Message] = [{"role": "user", "content": "x"}]


def answering(server: FakeOpenAIServer) -> FakeOpenAIServer:
    """``server`` answering every chat request it accepts with a small JSON object."""
    server.set_handler(CHAT, lambda _request: Reply(json=chat_completion('{"memo": "ok"}')))
    return server


def test_schema_is_sent_as_json_schema(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, json=chat_completion('{"memo": "m", "project": null}'))
    value = complete_json(model(openai_server), ASK, Usage(), schema=SCHEMA)
    assert value == {"memo": "m", "project": None}
    sent = openai_server.requests_to(CHAT)[-1].json["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {
        "name": "answer", "strict": True, "schema": {
            "type": "object", "additionalProperties": False, "required": ["memo", "project"],
            "properties": {"memo": {"type": "string"}, "project": {"type": ["string", "null"]}},
        }}}


def test_refused_schema_falls_back_to_json_object_once(openai_server: FakeOpenAIServer) -> None:
    answering(openai_server).refuse_formats("json_schema")
    chat = model(openai_server)
    assert chat.chat(ASK, schema=SCHEMA).text == '{"memo": "ok"}'
    assert openai_server.response_formats() == ["json_schema", "json_object"]
    assert chat.refused_formats == ["json_schema"]
    # Remembered for the endpoint and model: another client of it starts one rung down …
    model(openai_server).chat(ASK, schema=SCHEMA)
    assert openai_server.response_formats()[2:] == ["json_object"]
    # … while another model of the same server may know schemas.
    OpenAIChat(url=openai_server.url, model="other", api_key="k").chat(ASK, schema=SCHEMA)
    assert openai_server.response_formats()[3:] == ["json_schema", "json_object"]


def test_both_json_formats_refused_falls_back_to_text(openai_server: FakeOpenAIServer) -> None:
    answering(openai_server).refuse_formats("json_schema", "json_object")
    chat = model(openai_server)
    assert complete_json(chat, ASK, Usage(), schema=SCHEMA) == {"memo": "ok"}
    assert openai_server.response_formats() == ["json_schema", "json_object", None]
    assert "response_format" not in openai_server.requests_to(CHAT)[-1].json
    chat.chat(ASK, json_mode=True, schema=SCHEMA)
    assert openai_server.response_formats()[3:] == [None]
    assert chat.describe()["refused_formats"] == ["json_schema", "json_object"]


def test_only_json_object_refused_keeps_schemas(openai_server: FakeOpenAIServer) -> None:
    # LM Studio's way: json_schema or nothing. A plain JSON-mode call learns that json_object
    # is refused; schema calls still send their schema.
    answering(openai_server).refuse_formats("json_object")
    chat = model(openai_server)
    chat.chat(ASK, json_mode=True)
    chat.chat(ASK, schema=SCHEMA)
    assert openai_server.response_formats() == ["json_object", None, "json_schema"]


def test_a_500_naming_response_format_is_a_refusal(openai_server: FakeOpenAIServer) -> None:
    # Older llama.cpp builds threw a server error (500) for a type they did not know.
    answering(openai_server).refuse_formats("json_schema", status=500)
    chat = model(openai_server, max_retries=1)
    chat.chat(ASK, schema=SCHEMA)
    assert openai_server.response_formats() == ["json_schema", "json_schema", "json_object"]
    assert chat.refused_formats == ["json_schema"]


def test_a_400_for_another_reason_fails_and_teaches_nothing(
        openai_server: FakeOpenAIServer) -> None:
    for _ in range(3):
        openai_server.enqueue(CHAT, status=400, json={"error": {
            "message": "this model's maximum context length is 8192 tokens"}})
    chat = model(openai_server)
    with pytest.raises(LLMServiceError, match="maximum context length"):
        chat.chat(ASK, schema=SCHEMA)
    assert openai_server.response_formats() == ["json_schema", "json_object", None]
    assert chat.refused_formats == []


def test_plain_requests_send_no_response_format(openai_server: FakeOpenAIServer) -> None:
    model(answering(openai_server)).chat(ASK)
    assert openai_server.response_formats() == [None]


def test_retries_on_429_and_5xx_with_retry_after(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, status=429, headers={"Retry-After": "2"})
    openai_server.enqueue(CHAT, status=503)
    openai_server.enqueue(CHAT, json=chat_completion("done"))
    chat = model(openai_server)
    assert chat.chat([{"role": "user", "content": "x"}]).text == "done"
    assert chat.retries == 2 and chat.sleeps[0] == 2.0  # type: ignore[attr-defined]


def test_gives_up_naming_url_model_and_offline_way_out(openai_server: FakeOpenAIServer) -> None:
    for _ in range(3):
        openai_server.enqueue(CHAT, status=500)
    with pytest.raises(LLMServiceError) as caught:
        model(openai_server, max_retries=2).chat([{"role": "user", "content": "x"}])
    text = str(caught.value)
    assert openai_server.url in text and "'m'" in text and "giving up after 3 attempts" in text
    assert "--offline" in text


def test_timeout_and_unreachable(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, json=chat_completion("late"), delay=1.0)
    with pytest.raises(LLMServiceError, match="no reply within"):
        model(openai_server, timeout=0.2).chat([{"role": "user", "content": "x"}])
    dead = OpenAIChat(url="http://127.0.0.1:9/v1", model="m", max_retries=1,
                      sleep=lambda _s: None)
    with pytest.raises(LLMServiceError, match="cannot connect"):
        dead.chat([{"role": "user", "content": "x"}])


def test_auth_error_is_not_retried(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, status=401)
    chat = OpenAIChat(url=openai_server.url, model="m", api_key_env="NO_SUCH_KEY_VAR",
                      sleep=lambda _s: None)
    with pytest.raises(LLMServiceError, match=r"\$NO_SUCH_KEY_VAR is not set"):
        chat.chat([{"role": "user", "content": "x"}])
    assert len(openai_server.requests_to(CHAT)) == 1


def test_garbage_reply_gets_one_repair(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, json=chat_completion("Sorry, here you go: memo is nice"))
    openai_server.enqueue(CHAT, json=chat_completion('<think>fix it</think>{"memo": "ok"}'))
    usage = Usage()
    value = complete_json(model(openai_server), [{"role": "user", "content": "x"}], usage)
    assert value == {"memo": "ok"} and usage.calls == 2 and usage.repairs == 1
    repair = openai_server.requests_to(CHAT)[-1].json["messages"]
    assert repair[-1]["role"] == "user" and "cannot be used" in repair[-1]["content"]
    assert repair[-2] == {"role": "assistant", "content": "Sorry, here you go: memo is nice"}


def test_garbage_twice_is_a_clear_error(openai_server: FakeOpenAIServer) -> None:
    truncated = chat_completion('{"memo": "cut')
    truncated["choices"][0]["finish_reason"] = "length"
    openai_server.enqueue(CHAT, json=truncated)
    openai_server.enqueue(CHAT, json=chat_completion("still not json"))
    with pytest.raises(LLMReplyError, match="did not return the JSON"):
        complete_json(model(openai_server), [{"role": "user", "content": "x"}], Usage(),
                      max_tokens=10)
    first_repair = openai_server.requests_to(CHAT)[1].json["messages"][-1]["content"]
    assert "10-token limit" in first_repair


def test_reply_without_choices(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, json={"object": "list"})
    with pytest.raises(LLMServiceError, match="no `choices`"):
        model(openai_server).chat([{"role": "user", "content": "x"}])


def test_config_roles_env_and_registry(tmp_path: Path) -> None:
    (tmp_path / "deepfield.toml").write_text(
        '[llm]\nurl = "http://127.0.0.1:1/v1"\nmodel = "big"\n'
        '[llm.memorizer]\nmodel = "small"\n', encoding="utf-8")
    config = load_llm_config(tmp_path)
    assert config.for_role("memorizer")["model"] == "small"
    assert config.for_role("researcher")["model"] == "big"
    env = config.with_env({"DEEPFIELD_LLM_RESEARCHER_MODEL": "huge",
                           "DEEPFIELD_LLM_URL": "http://127.0.0.1:2/v1"})
    researcher = build_llm(env, "researcher")
    assert isinstance(researcher, OpenAIChat)
    assert (researcher.model, researcher.url) == ("huge", "http://127.0.0.1:2/v1")
    assert build_llm(LLMConfig(), "researcher") is None
    with pytest.raises(ConfigError, match="no LLM backend named"):
        create_llm("nope", model="x")
    with pytest.raises(ConfigError, match="not an http"):
        OpenAIChat(url="localhost:11434", model="m")
    (tmp_path / "deepfield.toml").write_text("[llm]\nmemorizer = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[llm.memorizer\] must be a table"):
        load_llm_config(tmp_path)
    assert json.loads(json.dumps(Usage().to_json()))["calls"] == 0


def test_qa_metrics_and_answer(openai_server: FakeOpenAIServer) -> None:
    from deepfield.qa import answer, bleu1, normalize_answer, token_f1

    assert normalize_answer("The  Pride-Parade!") == "prideparade"
    assert token_f1("7 May 2023", "7 May 2023") == 1.0
    assert token_f1("on 7 May", "7 May 2023") == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert token_f1("Sweden", "Norway") == 0.0 and token_f1("", "") == 1.0
    assert bleu1("7 May", "7 May 2023") == pytest.approx(1.0 * 2.718281828 ** (1 - 3 / 2))
    assert bleu1("x y z w", "x y") == pytest.approx(0.5)
    openai_server.enqueue(CHAT, json=chat_completion('<think>date</think> "7 May 2023"'))
    usage = Usage()
    said = answer(model(openai_server), "When?", "[s.md] L3: went on 7 May 2023", usage)
    assert said == "7 May 2023" and usage.calls == 1
    sent = openai_server.requests_to(CHAT)[0].json
    assert sent["temperature"] == 0.0 and "L3: went on 7 May 2023" in sent["messages"][1]["content"]


# --------------------------------------------------------------- configuration walkthrough

@pytest.mark.parametrize(("toml", "expected"), [
    ('[llm]\nmodel = "m"\ntemperature = 0.2\n',
     r"unknown \[llm\] key 'temperature' \(known: url, model, "),
    ('[llm]\nmodel = "m"\n[llm.memorizer]\nmodle = "x"\n',
     r"unknown \[llm.memorizer\] key 'modle'"),
    ('[llm]\nmodel = "m"\n[llm.memoriser]\nmodel = "x"\n',
     r"unknown table \[llm.memoriser\] \(the roles are \[llm.memorizer\], \[llm.researcher\]\)"),
    ('[llm]\nmodel = "m"\ntransport = "x"\n', r"unknown \[llm\] key 'transport'"),
    ('[llm]\nmodel = "m"\nsleep = 1\n', r"unknown \[llm\] key 'sleep'"),
    ('[llm]\nmodel = 3\n', r"llm.model must be a string"),
])
def test_unknown_llm_keys_are_config_errors(tmp_path: Path, toml: str, expected: str) -> None:
    (tmp_path / "deepfield.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=expected):
        load_llm_config(tmp_path)


def test_every_documented_key_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "deepfield.toml").write_text(
        '[llm]\nbackend = "openai"\nurl = "http://127.0.0.1:1/v1"\nmodel = "m"\n'
        'api_key_env = "K"\ntimeout = 5\nmax_retries = 1\nbackoff = 0.1\nmax_backoff = 2\n'
        '[llm.researcher]\nmodel = "r"\ntimeout = 9\n', encoding="utf-8")
    chat = build_llm(load_llm_config(tmp_path), "researcher")
    assert isinstance(chat, OpenAIChat) and chat.model == "r"
    # Another backend's options are its own to check.
    (tmp_path / "deepfield.toml").write_text(
        '[llm]\nbackend = "mine"\nmodel = "m"\nflavour = "x"\n', encoding="utf-8")
    assert load_llm_config(tmp_path).options["flavour"] == "x"


def test_bad_llm_key_is_one_line_in_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import deepfield
    from deepfield.config import EmbeddingConfig

    from .conftest import MainCli

    deepfield.init(tmp_path / "s", EmbeddingConfig("none"))
    (tmp_path / "s" / "deepfield.toml").write_text(
        '[embedding]\nbackend = "none"\n[llm]\nmodel = "m"\ntemperature = 0.2\n',
        encoding="utf-8")
    cli = MainCli(tmp_path / "s", capsys, monkeypatch)
    assert cli("new", "notes").exit_code == 0
    ran = cli("context", "-f", "notes", "what?", "--level", "light")
    assert ran.exit_code != 0 and "Traceback" not in ran.stderr
    assert "unknown [llm] key 'temperature'" in ran.stderr and len(ran.stderr.splitlines()) == 1
    ran = cli("research", "what?", "--json")
    error = json.loads(ran.stdout)["error"]
    assert ran.exit_code != 0 and error["type"] == "ConfigError"


def test_offline_hint_names_what_forces_offline(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, status=404)
    with pytest.raises(LLMServiceError) as caught:
        model(openai_server).chat([{"role": "user", "content": "x"}])
    text = str(caught.value)
    assert "--offline" in text and "DEEPFIELD_LLM=none" in text
    assert "unset DEEPFIELD_LLM_URL" not in text


def test_a_url_without_a_model_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "deepfield.toml").write_text('[llm]\nurl = "http://me:pw@127.0.0.1:1/v1"\n',
                                             encoding="utf-8")
    with pytest.raises(ConfigError, match=r"url is set .* but no model") as caught:
        build_llm(load_llm_config(tmp_path), "memorizer")
    assert "pw" not in str(caught.value) and "DEEPFIELD_LLM=none" in str(caught.value)
    with pytest.raises(ConfigError, match="but no model"):
        build_llm(LLMConfig().with_env({"DEEPFIELD_LLM_URL": "http://127.0.0.1:1/v1"}),
                  "researcher")
    # One role with a model, the other deliberately without: that one runs offline.
    (tmp_path / "deepfield.toml").write_text(
        '[llm]\nurl = "http://127.0.0.1:1/v1"\n[llm.memorizer]\nmodel = "m"\n',
        encoding="utf-8")
    assert build_llm(load_llm_config(tmp_path), "researcher") is None


def test_environment_overrides_role_tables(tmp_path: Path) -> None:
    (tmp_path / "deepfield.toml").write_text(
        '[llm]\nmodel = "m"\n[llm.researcher]\nurl = "http://127.0.0.1:1/v1"\ntimeout = 50\n'
        'model = "r"\n', encoding="utf-8")
    config = load_llm_config(tmp_path).with_env({
        "DEEPFIELD_LLM_URL": "http://127.0.0.1:2/v1", "DEEPFIELD_LLM_TIMEOUT": "2"})
    options = config.for_role("researcher")
    assert (options["url"], options["timeout"], options["model"]) == (
        "http://127.0.0.1:2/v1", "2", "r")
    options = config.with_env({"DEEPFIELD_LLM_MODEL": "e"}).for_role("researcher")
    assert options["model"] == "e"
    options = config.with_env({"DEEPFIELD_LLM_MODEL": "e",
                               "DEEPFIELD_LLM_RESEARCHER_MODEL": "er"}).for_role("researcher")
    assert options["model"] == "er"


def test_timeout_is_for_the_whole_call_not_each_read() -> None:
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n")
            deadline = time.monotonic() + 8  # bounded whatever the client does
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    conn.sendall(b" ")
                except OSError:
                    return
                time.sleep(0.1)

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    port = listener.getsockname()[1]
    chat = OpenAIChat(url=f"http://127.0.0.1:{port}/v1", model="m", api_key="k", timeout=1,
                      max_retries=0)
    started = time.monotonic()
    try:
        with pytest.raises(LLMServiceError, match="no reply within 1 s"):
            chat.chat([{"role": "user", "content": "x"}])
        assert time.monotonic() - started < 2.5
    finally:
        stop.set()
        listener.close()
        chat.close()


def test_secrets_are_not_shown(openai_server: FakeOpenAIServer) -> None:
    openai_server.enqueue(CHAT, status=401, json={"error": {
        "message": "Incorrect API key provided: sk-SECRET-abc123"}})
    chat = OpenAIChat(url=openai_server.url, model="m", api_key="sk-SECRET-abc123")
    with pytest.raises(LLMServiceError) as caught:
        chat.chat([{"role": "user", "content": "x"}])
    assert "sk-SECRET" not in str(caught.value) and "[redacted]" in str(caught.value)
    openai_server.enqueue(CHAT, json={"error": "bad key sk-SECRET-abc123"})
    with pytest.raises(LLMServiceError) as caught:
        chat.chat([{"role": "user", "content": "x"}])
    assert "sk-SECRET" not in str(caught.value)
    with_userinfo = openai_server.url.replace("http://", "http://me:sk-URLSECRET@")
    openai_server.enqueue(CHAT, status=404)
    chat = OpenAIChat(url=with_userinfo, model="m")
    assert "URLSECRET" not in repr(chat) and "URLSECRET" not in json.dumps(chat.describe())
    with pytest.raises(LLMServiceError) as caught:
        chat.chat([{"role": "user", "content": "x"}])
    assert "URLSECRET" not in str(caught.value) and openai_server.url in str(caught.value)
    assert openai_server.requests_to(CHAT)[-1].headers["authorization"].startswith("Basic ")
