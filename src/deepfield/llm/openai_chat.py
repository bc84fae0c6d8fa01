"""Chat completions from any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, llama.cpp
server, LM Studio, LiteLLM and the like (``POST {url}/chat/completions``).

What differs between servers is handled here: ``response_format`` (JSON mode) is sent when
asked, and dropped for good if the server rejects it; reasoning models may put their thoughts
in ``reasoning_content`` or in ``<think>`` blocks (the JSON parser strips those); usage may be
missing (then counted as zero). Retries, backoff and error messages are shared with the
embedding backend (httpjson.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, ClassVar

import httpx

from ..errors import OFFLINE_HINT, ConfigError, LLMServiceError
from ..httpjson import JSONEndpoint, RetryPolicy, float_option, snippet, usage_count
from .base import ChatModel, ChatReply, Message

DEFAULT_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


class OpenAIChat(ChatModel):
    """A chat model behind an OpenAI-compatible HTTP API (``url`` ends in ``/v1``)."""

    name: ClassVar[str] = "openai"

    def __init__(
        self,
        *,
        model: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout: float | str | None = None,
        max_retries: int | str | None = None,
        backoff: float | str | None = None,
        max_backoff: float | str | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not model or not str(model).strip():
            raise ConfigError(
                "the LLM backend needs a model name",
                "set `model` under [llm] in deepfield.toml or DEEPFIELD_LLM_MODEL, "
                "e.g. qwen2.5:7b for Ollama or gpt-4o-mini for OpenAI",
            )
        self.model = str(model).strip()
        base = str(url or DEFAULT_URL).strip().rstrip("/")
        if base.endswith("/chat/completions"):
            base = base[: -len("/chat/completions")]
        if not base.startswith(("http://", "https://")):
            raise ConfigError(
                f"LLM url {base!r} is not an http(s) URL",
                "give the API base, e.g. http://localhost:11434/v1 or https://api.openai.com/v1",
            )
        self.url = base
        self.endpoint = f"{base}/chat/completions"
        policy = RetryPolicy(
            timeout=float_option("LLM", "timeout", timeout, 60.0, minimum=0.001),
            max_retries=int(float_option("LLM", "max_retries", max_retries, 3, minimum=0)),
            backoff=float_option("LLM", "backoff", backoff, 0.5, minimum=0.0),
            max_backoff=float_option("LLM", "max_backoff", max_backoff, 30.0, minimum=0.0),
        )
        self.api_key_env = api_key_env or DEFAULT_API_KEY_ENV
        self.json_mode_supported = True
        self.retries = 0
        self._endpoint = JSONEndpoint(
            self.endpoint, policy,
            api_key=api_key if api_key is not None else os.environ.get(self.api_key_env),
            api_key_env=self.api_key_env, fail=self._fail,
            auth_hint=f"put a valid key in ${self.api_key_env}, {OFFLINE_HINT}",
            fallback_hint=OFFLINE_HINT, transport=transport, sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"OpenAIChat(url={self.url!r}, model={self.model!r})"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "url": self.url}

    def close(self) -> None:
        self._endpoint.close()

    def _fail(self, what: str, hint: str | None = None) -> LLMServiceError:
        return LLMServiceError(f"LLM endpoint {self.endpoint} (model {self.model!r}): {what}",
                               hint or f"check the url and model name, {OFFLINE_HINT}")

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.3,
        json_mode: bool = False,
    ) -> ChatReply:
        payload: dict[str, Any] = {
            "model": self.model, "messages": list(messages), "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_mode and self.json_mode_supported:
            payload["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        try:
            reply = self._post(payload)
        except LLMServiceError as exc:
            # Older llama.cpp / LM Studio builds answer 400 to response_format: drop it for good.
            if "response_format" in payload and "HTTP 400" in exc.message:
                self.json_mode_supported = False
                del payload["response_format"]
                reply = self._post(payload)
            else:
                raise
        return self._parse(reply, time.perf_counter() - started)

    def _post(self, payload: dict[str, Any]) -> Any:
        def count_retry() -> None:
            self.retries += 1

        return self._endpoint.post(payload, on_retry=count_retry)

    def _parse(self, reply: Any, seconds: float) -> ChatReply:
        if isinstance(reply, dict) and "error" in reply and "choices" not in reply:
            raise self._fail(f"the server reported an error: {snippet(str(reply['error']))}")
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._fail(
                f"the reply has no `choices`: {snippet(str(reply))!r}",
                f"is the URL an OpenAI-compatible chat API? {OFFLINE_HINT}",
            )
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            content = ""
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        finish = choices[0].get("finish_reason")
        return ChatReply(
            text=content,
            prompt_tokens=usage_count(usage.get("prompt_tokens")),
            completion_tokens=usage_count(usage.get("completion_tokens")),
            seconds=seconds,
            finish_reason=finish if isinstance(finish, str) else None,
        )


def create(**options: Any) -> OpenAIChat:
    return OpenAIChat(**options)
