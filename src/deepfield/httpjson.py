"""JSON over HTTP with retries: the one client loop behind every OpenAI-compatible backend.

Embedding and chat endpoints fail the same ways, so they share this: transient failures
(429, 5xx, refused or dropped connections) are retried with exponential backoff and jitter,
honouring ``Retry-After``; anything else fails at once through the caller's ``fail`` factory,
with a message naming the endpoint and model, because a misconfigured URL should not cost
minutes of retries. The caller owns the ``httpx.Client`` (so tests can inject a transport).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import ConfigError, DeepfieldError

Fail = Callable[[str, str | None], DeepfieldError]


@dataclass(frozen=True)
class RetryPolicy:
    timeout: float = 30.0
    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0

    def delay(self, attempt: int) -> float:
        # "Equal jitter": at least half the step, so retries stay spaced out, and spread over
        # the other half, so many clients do not retry in lockstep.
        step = min(self.max_backoff, self.backoff * (2.0**attempt))
        return step / 2 + random.uniform(0.0, step / 2)


class RetryableError(Exception):
    """A failure worth another attempt: ``reason`` describes it, ``wait`` is the server's ask."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


def attempt_post(
    client: httpx.Client,
    url: str,
    payload: dict[str, Any],
    *,
    fail: Fail,
    timeout: float,
    auth_hint: str,
    fallback_hint: str,
    key_note: str,
) -> Any:
    """One POST: the decoded JSON reply, or RetryableError / the caller's error.

    ``key_note`` says what was sent as credentials ("the API key was refused", "no API key was
    sent ($OPENAI_API_KEY is not set)") for the 401/403 message.
    """
    try:
        response = client.post(url, json=payload)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
        raise RetryableError(f"cannot connect ({str(exc) or type(exc).__name__})") from None
    except httpx.TimeoutException:
        raise fail(
            f"no reply within {timeout:g} s",
            "raise the `timeout` option if the server is slow (a model may be loading), "
            + fallback_hint,
        ) from None
    except httpx.HTTPError as exc:
        raise fail(f"request failed: {str(exc) or type(exc).__name__}", None) from None
    status = response.status_code
    if status == 429 or status >= 500:
        raise RetryableError(
            f"HTTP {status}{server_says(response)}", retry_after(response.headers)
        )
    if status in (401, 403):
        raise fail(f"HTTP {status}: {key_note}{server_says(response)}", auth_hint)
    if status == 404:
        raise fail(
            f"HTTP 404{server_says(response)}",
            "check that the URL ends in /v1 (e.g. http://localhost:11434/v1) and that the "
            "server has the model (Ollama: `ollama pull MODEL`), " + fallback_hint,
        )
    if 300 <= status < 400:
        target = response.headers.get("location", "elsewhere")
        raise fail(
            f"HTTP {status}: redirected to {target}",
            "set the url to the address the server redirects to (e.g. https://…/v1), "
            + fallback_hint,
        )
    if status >= 400:
        raise fail(f"HTTP {status}{server_says(response)}", None)
    try:
        return response.json()
    except ValueError:
        raise fail(
            f"the reply is not JSON: {snippet(response.text)!r}",
            "is the URL an OpenAI-compatible API? " + fallback_hint,
        ) from None


def post_with_retries(
    attempt: Callable[[], Any],
    policy: RetryPolicy,
    *,
    fail: Fail,
    fallback_hint: str,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[], None] | None = None,
) -> Any:
    """Call ``attempt`` until it returns, retrying RetryableError as ``policy`` allows."""
    tries = 0
    while True:
        try:
            return attempt()
        except RetryableError as exc:
            if tries >= policy.max_retries:
                count = f"{tries + 1} attempt" + ("s" if tries else "")
                raise fail(
                    f"{exc.reason}, giving up after {count}",
                    "check that the server is running and reachable at this URL "
                    "(Ollama: `ollama serve`), " + fallback_hint,
                ) from None
            wait = policy.delay(tries) if exc.wait is None else exc.wait
            if wait > policy.max_backoff:
                raise fail(
                    f"{exc.reason}; the server asks to wait {wait:g} s, longer than "
                    f"max_backoff ({policy.max_backoff:g} s)",
                    "try again later or raise the `max_backoff` option, " + fallback_hint,
                ) from None
            tries += 1
            if on_retry is not None:
                on_retry()
            sleep(wait)


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait: ``Retry-After`` as seconds or an HTTP date."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def server_says(response: httpx.Response) -> str:
    """The server's own error text, briefly: OpenAI nests it, Ollama does not."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return f": {snippet(text)}" if text else ""
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get("message", error)
    return f": {snippet(str(error))}"


def snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class JSONEndpoint:
    """One OpenAI-compatible endpoint: a lazily opened client that sends the API key, and
    POSTs with the retry policy above. The embedding and chat backends both talk through it."""

    def __init__(
        self,
        url: str,
        policy: RetryPolicy,
        *,
        api_key: str | None,
        api_key_env: str,
        fail: Fail,
        auth_hint: str,
        fallback_hint: str,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.policy = policy
        self.api_key = api_key
        self.api_key_env = api_key_env
        self._fail = fail
        self._auth_hint = auth_hint
        self._fallback_hint = fallback_hint
        self._transport = transport
        self._sleep = sleep
        self._client: httpx.Client | None = None

    def client(self) -> httpx.Client:
        if self._client is None:
            headers = {"Accept": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            self._client = httpx.Client(timeout=httpx.Timeout(self.policy.timeout),
                                        headers=headers, transport=self._transport)
            # Backends have no close() duty in their interfaces; free the sockets with them.
            weakref.finalize(self, self._client.close)
        return self._client

    def close(self) -> None:
        """Close the connections (a later request opens new ones)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def post(self, payload: dict[str, Any],
             on_retry: Callable[[], None] | None = None) -> Any:
        """POST ``payload`` with retries on transient failures; the decoded JSON reply."""
        key_note = (
            "the API key was refused" if self.api_key
            else f"no API key was sent (${self.api_key_env} is not set)"
        )

        def attempt() -> Any:
            return attempt_post(
                self.client(), self.url, payload, fail=self._fail,
                timeout=self.policy.timeout, auth_hint=self._auth_hint,
                fallback_hint=self._fallback_hint, key_note=key_note,
            )

        return post_with_retries(attempt, self.policy, fail=self._fail,
                                 fallback_hint=self._fallback_hint, sleep=self._sleep,
                                 on_retry=on_retry)


def float_option(what: str, name: str, value: Any, default: float, *, minimum: float) -> float:
    """A finite number option of ``what`` ("embedding", "LLM"), ``default`` when unset."""
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} option {name} must be a number, not {value!r}") from None
    if not math.isfinite(number) or number < minimum:
        raise ConfigError(f"{what} option {name} must be at least {minimum:g}, not {value!r}")
    return number


def usage_count(value: Any) -> int:
    """A token count from a reply's ``usage`` (servers may omit it or send nonsense: 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
