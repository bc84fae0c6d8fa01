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
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterable
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
        response = _post_within(client, url, payload, timeout)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
        raise RetryableError(f"cannot connect ({str(exc) or type(exc).__name__})") from None
    except (httpx.TimeoutException, _OverdueError):
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


class _OverdueError(Exception):
    """The whole request took longer than its timeout."""


def _post_within(client: httpx.Client, url: str, payload: dict[str, Any],
                 timeout: float) -> httpx.Response:
    """POST with ``timeout`` as a deadline for the whole request, not for each read: httpx's
    timeouts are per socket operation, so a server trickling a byte now and then held a
    "2 s" call for minutes. The request runs in a daemon thread the caller stops waiting for
    at the deadline; the thread itself gives up at its next chunk after it."""
    deadline = time.monotonic() + timeout
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            with client.stream("POST", url, json=payload) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise _OverdueError
                box["response"] = httpx.Response(
                    response.status_code, headers=response.headers,
                    content=b"".join(chunks), request=response.request)
        except BaseException as exc:  # handed to the caller's thread as it is
            box["error"] = exc

    worker = threading.Thread(target=run, name="deepfield-http", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()) + 0.05)
    if worker.is_alive():
        raise _OverdueError
    if "error" in box:
        raise box["error"]
    response: httpx.Response = box["response"]
    return response


def display_url(url: str) -> str:
    """``url`` without its ``user:password@`` part, to show in messages."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def url_secrets(url: str) -> list[str]:
    """The password (and user) in ``url``'s userinfo, to redact from server texts."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return []
    return [s for s in (parts.password, parts.username) if s]


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret (an API key, a URL's password) replaced: servers echo a
    refused key back ("Incorrect API key provided: sk-…"), and messages end up in logs."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


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
        secrets = [api_key, *url_secrets(url)]

        def redacting_fail(what: str, hint: str | None) -> DeepfieldError:
            # Server texts in messages may echo the key; the caller's factory names the URL.
            return fail(redact(what, secrets), hint)

        self._fail: Fail = redacting_fail
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
    if isinstance(value, bool):  # `timeout = true` in TOML is no number of seconds
        raise ConfigError(f"{what} option {name} must be a number, not {value!r}")
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
