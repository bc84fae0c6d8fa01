"""Chat completions from any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, llama.cpp
server, LM Studio, LiteLLM and the like (``POST {url}/chat/completions``).

What differs between servers is handled here. A reply with a schema is asked for as
``response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``, the
shape OpenAI defines and llama.cpp's server, vLLM and Ollama (0.5+) read; with it a small model
returns exactly the object asked for, where plain JSON mode may run on to max_tokens without
closing it. A server that refuses that shape (older llama.cpp builds and LM Studio answer 400,
some older builds 500 naming ``response_format``; OpenAI's older models 400) is asked again
one rung down — ``{"type": "json_object"}``, then no ``response_format`` at all — and the rung
that worked is remembered for that endpoint and model, so later calls start there. A step
down is remembered only when the lower rung succeeds: a 400 for another reason (a prompt too
long) fails every rung and changes nothing. Reasoning models may put their thoughts in
``reasoning_content`` or in ``<think>`` blocks (the JSON parser strips those); usage may be
missing (then counted as zero). Retries, backoff and error messages are shared with the
embedding backend (httpjson.py).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import httpx

from ..errors import OFFLINE_HINT, ConfigError, LLMServiceError
from ..httpjson import (
    JSONEndpoint,
    RetryPolicy,
    display_url,
    float_option,
    redact,
    snippet,
    url_secrets,
    usage_count,
)
from .base import ChatModel, ChatReply, Message, ReplySchema

DEFAULT_URL = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
FORMATS = ("json_schema", "json_object", "text")
"""The ladder of ``response_format`` rungs, most constrained first (text: none sent)."""
_REFUSED = re.compile(r"HTTP (?:400|422)\b|response_format|json_schema|json_object", re.I)
"""A failure that may be the server refusing the format: a request rejected as invalid, or
any error naming the field (old llama.cpp builds answer 500 to ``json_schema``)."""


def response_format(rung: str, schema: ReplySchema | None) -> dict[str, Any] | None:
    """The ``response_format`` value of one rung of the ladder (None: send none)."""
    if rung == "json_schema" and schema is not None:
        return {"type": "json_schema", "json_schema": {
            "name": schema.name, "schema": schema.schema, "strict": True}}
    if rung == "json_object":
        return {"type": "json_object"}
    return None


class OpenAIChat(ChatModel):
    """A chat model behind an OpenAI-compatible HTTP API (``url`` ends in ``/v1``)."""

    name: ClassVar[str] = "openai"
    _refused: ClassVar[dict[tuple[str, str], set[str]]] = {}
    """(endpoint, model) → the ``response_format`` rungs its server refused."""
    _refused_lock: ClassVar[threading.Lock] = threading.Lock()

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
        # An empty url is a mistake, not a wish for the cloud default: prompts would go there.
        base = str(DEFAULT_URL if url is None else url).strip().rstrip("/")
        if base.endswith("/chat/completions"):
            base = base[: -len("/chat/completions")]
        if not base.startswith(("http://", "https://")):
            raise ConfigError(
                f"LLM url {display_url(base)!r} is not an http(s) URL",
                "give the API base, e.g. http://localhost:11434/v1 or https://api.openai.com/v1",
            )
        self.url = display_url(base)
        """The API base as shown in messages and describe(): without a ``user:password@``."""
        self.endpoint = f"{self.url}/chat/completions"
        retries = float_option("LLM", "max_retries", max_retries, 3, minimum=0)
        if retries != int(retries):
            # 2.5 used to mean 2 without a word (the embedding backend refuses it too)
            raise ConfigError(f"LLM option max_retries must be a whole number, not "
                              f"{max_retries!r}")
        policy = RetryPolicy(
            timeout=float_option("LLM", "timeout", timeout, 60.0, minimum=0.001),
            max_retries=int(retries),
            backoff=float_option("LLM", "backoff", backoff, 0.5, minimum=0.0),
            max_backoff=float_option("LLM", "max_backoff", max_backoff, 30.0, minimum=0.0),
        )
        self.api_key_env = api_key_env or DEFAULT_API_KEY_ENV
        self.retries = 0
        key = api_key if api_key is not None else os.environ.get(self.api_key_env)
        self._secrets = [key, *url_secrets(base)]
        self._endpoint = JSONEndpoint(
            f"{base}/chat/completions", policy,  # posts with the userinfo, shows none
            api_key=key,
            api_key_env=self.api_key_env, fail=self._fail,
            auth_hint=f"put a valid key in ${self.api_key_env}, {OFFLINE_HINT}",
            fallback_hint=OFFLINE_HINT, transport=transport, sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"OpenAIChat(url={self.url!r}, model={self.model!r})"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "url": self.url,
                "refused_formats": self.refused_formats}

    @property
    def refused_formats(self) -> list[str]:
        """The ``response_format`` rungs this endpoint and model refused (most constrained
        first); later calls skip them."""
        with self._refused_lock:
            refused = self._refused.get((self.endpoint, self.model), set())
            return [rung for rung in FORMATS if rung in refused]

    def _learn(self, refused: list[str]) -> None:
        with self._refused_lock:
            self._refused.setdefault((self.endpoint, self.model), set()).update(refused)

    @classmethod
    def forget_formats(cls) -> None:
        """Forget every refusal learnt (the next calls try ``json_schema`` again)."""
        with cls._refused_lock:
            cls._refused.clear()

    def close(self) -> None:
        self._endpoint.close()

    def _fail(self, what: str, hint: str | None = None) -> LLMServiceError:
        what = redact(what, self._secrets)  # a server's error text may echo the key
        return LLMServiceError(f"LLM endpoint {self.endpoint} (model {self.model!r}): {what}",
                               hint or f"check the url and model name, {OFFLINE_HINT}")

    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.3,
        json_mode: bool = False,
        schema: ReplySchema | None = None,
    ) -> ChatReply:
        payload: dict[str, Any] = {
            "model": self.model, "messages": list(messages), "max_tokens": max_tokens,
            "temperature": temperature,
        }
        wanted = "json_schema" if schema is not None else "json_object" if json_mode else "text"
        skipped = set(self.refused_formats)
        ladder = [rung for rung in FORMATS[FORMATS.index(wanted):] if rung not in skipped]
        failed: list[str] = []
        started = time.perf_counter()
        for rung in ladder:
            shape = response_format(rung, schema)
            if shape is None:
                payload.pop("response_format", None)
            else:
                payload["response_format"] = shape
            try:
                reply = self._post(payload)
            except LLMServiceError as exc:
                if rung == ladder[-1] or not _REFUSED.search(exc.message):
                    raise
                failed.append(rung)  # refused, or failed for another reason: one rung down
                continue
            if failed:
                self._learn(failed)  # this rung worked where the ones above did not
            return self._parse(reply, time.perf_counter() - started)
        raise AssertionError("the last rung returns or raises")  # pragma: no cover

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
        if isinstance(content, list):  # content parts (Mistral, some gateways): their text
            content = "".join(part.get("text", "") for part in content
                              if isinstance(part, dict) and isinstance(part.get("text"), str))
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
