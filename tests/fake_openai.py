"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, shared by every test that talks HTTP.

It is a real server on an ephemeral port, in a background thread, so clients are exercised
through their real HTTP stack (connection errors, timeouts, headers, JSON encoding)::

    def test_retry(openai_server):
        openai_server.enqueue(status=503)              # the next POST /v1/embeddings fails
        ...                                            # then the default handler answers
        assert openai_server.requests[-1].json["model"] == "m"

Replies are scripted per path with :meth:`FakeOpenAIServer.enqueue` and consumed in order; when
nothing is queued for a path its default handler answers (``/v1/embeddings``: deterministic
vectors from :class:`tests.fakes.FakeEmbedder`; ``/v1/models``: a model list), and any other
path gets an OpenAI-style 404. Every request is recorded in ``requests``. Chat completions are
scripted the same way (``enqueue(path="/v1/chat/completions", json=chat_completion("hi"))``),
or given a default with :meth:`FakeOpenAIServer.set_handler`. A server that does not know a
``response_format`` is played with :meth:`FakeOpenAIServer.refuse_formats` (it answers such
requests with the error real servers send, before any scripted reply is used), and
:meth:`FakeOpenAIServer.response_formats` lists what each chat request asked for.
"""

from __future__ import annotations

import json as jsonlib
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from .fakes import FakeEmbedder

EMBEDDINGS = "/v1/embeddings"
CHAT = "/v1/chat/completions"
MODELS = "/v1/models"


@dataclass
class Reply:
    """One scripted answer. ``json`` or ``body`` (raw bytes/str) is the payload; ``delay``
    waits before answering; ``disconnect`` closes the connection without any answer."""

    status: int = 200
    json: Any = None
    body: bytes | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    disconnect: bool = False

    def has_payload(self) -> bool:
        return self.json is not None or self.body is not None

    def payload(self) -> tuple[bytes, str]:
        if self.body is not None:
            data = self.body.encode("utf-8") if isinstance(self.body, str) else self.body
            return data, "text/plain; charset=utf-8"
        if self.json is None and self.status >= 400:
            error = {"message": f"scripted HTTP {self.status}", "type": "fake_error"}
            return jsonlib.dumps({"error": error}).encode(), "application/json"
        return jsonlib.dumps(self.json).encode("utf-8"), "application/json"


@dataclass
class Request:
    """What the server received: ``headers`` has lower-case names; ``json`` is None when the
    body was not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any


Handler = Callable[[Request], Reply]


class FakeOpenAIServer:
    """The server; use as a context manager or through the ``openai_server`` fixture."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        """Vector size of the default embeddings handler; change it to fake a model swap."""
        self.requests: list[Request] = []
        self._queues: dict[str, deque[Reply]] = {}
        self._handlers: dict[str, Handler] = {
            EMBEDDINGS: self._embeddings,
            MODELS: lambda _request: Reply(json={"object": "list", "data": []}),
        }
        self._refused: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The API base clients are configured with (ends in ``/v1``)."""
        return f"{self.base}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on a scripted delay
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()

    # -- scripting ----------------------------------------------------------------------------

    def enqueue(
        self,
        path: str = EMBEDDINGS,
        *,
        status: int = 200,
        json: Any = None,
        body: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
        disconnect: bool = False,
    ) -> None:
        """Queue the next reply for ``path`` (replies for one path are used in order).

        Without ``json`` or ``body`` a success carries the default handler's answer (so
        ``enqueue(delay=5)`` is a slow but normal reply) and an error status carries an
        OpenAI-style error object. Send a literal JSON ``null`` with ``body="null"``.
        """
        reply = Reply(status, json, body, dict(headers or {}), delay, disconnect)
        with self._lock:
            self._queues.setdefault(path, deque()).append(reply)

    def set_handler(self, path: str, handler: Handler) -> None:
        """Answer ``path`` with ``handler`` whenever nothing is queued for it."""
        self._handlers[path] = handler

    def refuse_formats(self, *types: str, status: int = 400, message: str | None = None) -> None:
        """Answer chat requests whose ``response_format`` type is one of ``types`` with
        ``status`` and an OpenAI-style error, as servers that do not know it do (llama.cpp's
        words by default: ``response_format type must be one of "text" or "json_object"``);
        scripted replies wait for a request the server accepts."""
        for kind in types:
            text = message or (f'response_format type must be one of "text" or '
                               f'"json_object", but got: {kind}' if kind != "json_object"
                               else "'response_format.type' must be 'json_schema' or 'text'")
            self._refused[kind] = (status, text)

    def response_formats(self) -> list[str | None]:
        """The ``response_format`` type of each chat request so far (None: none sent)."""
        formats: list[str | None] = []
        for request in self.requests_to(CHAT):
            shape = request.json.get("response_format") if isinstance(request.json, dict) \
                else None
            formats.append(shape.get("type") if isinstance(shape, dict) else None)
        return formats

    def pending(self, path: str = EMBEDDINGS) -> int:
        """Scripted replies not yet used for ``path``."""
        with self._lock:
            return len(self._queues.get(path, ()))

    def requests_to(self, path: str = EMBEDDINGS) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    # -- answering ----------------------------------------------------------------------------

    def _answer(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            refusal = self._refusal(request)
            if refusal is not None:
                return refusal
            queue = self._queues.get(request.path)
            scripted = queue.popleft() if queue else None
        # Handlers run outside the lock, so they may read server.requests themselves.
        if scripted is None:
            return self._default(request)
        if not scripted.has_payload() and scripted.status < 400:
            # Only status, headers, delay or disconnect were scripted: the body is what the
            # default handler would have sent.
            return self._default(request, scripted)
        return scripted

    def _refusal(self, request: Request) -> Reply | None:
        if request.path != CHAT or not isinstance(request.json, dict):
            return None
        shape = request.json.get("response_format")
        kind = shape.get("type") if isinstance(shape, dict) else None
        if kind not in self._refused:
            return None
        status, message = self._refused[kind]
        error = {"code": status, "message": message, "type": "invalid_request_error"}
        return Reply(status, {"error": error})

    def _default(self, request: Request, scripted: Reply | None = None) -> Reply:
        handler = self._handlers.get(request.path)
        if handler is None:
            error = {"message": f"no route {request.method} {request.path}", "type": "not_found"}
            return Reply(404, {"error": error})
        reply = handler(request)
        if scripted is None:
            return reply
        return Reply(scripted.status, reply.json, reply.body, {**reply.headers, **scripted.headers},
                     scripted.delay, scripted.disconnect)

    def _embeddings(self, request: Request) -> Reply:
        body = request.json
        if not isinstance(body, dict) or not body.get("model") or "input" not in body:
            error = {"message": "body must be JSON with `model` and `input`", "type": "invalid"}
            return Reply(400, {"error": error})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = int(body.get("dimensions") or self.dim)
        vectors = FakeEmbedder(dim=dim).embed_batch([str(t) for t in texts], "document")
        tokens = sum(len(str(t).split()) for t in texts)
        return Reply(json={
            "object": "list",
            "model": body["model"],
            "data": [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
                for i, vector in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })

    def wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)


def chat_completion(content: str, model: str = "fake-chat", **extra: Any) -> dict[str, Any]:
    """The JSON of a non-streaming chat completion whose one choice says ``content``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        **extra,
    }


def _handler_class(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so no thread lingers on an idle keep-alive.
        protocol_version = "HTTP/1.0"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                parsed = jsonlib.loads(raw) if raw else None
            except ValueError:
                parsed = None
            request = Request(
                self.command,
                self.path.split("?", 1)[0],
                {k.lower(): v for k, v in self.headers.items()},
                raw,
                parsed,
            )
            reply = server._answer(request)
            if reply.delay:
                server.wait(reply.delay)
            if reply.disconnect:
                self.close_connection = True
                return
            data, content_type = reply.payload()
            self.send_response(reply.status)
            headers = {"Content-Type": content_type, **reply.headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _guarded(self) -> None:
            # The client may have given up (a timeout test): that is not a server failure.
            try:
                self._serve()
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True

        def do_GET(self) -> None:
            self._guarded()

        def do_POST(self) -> None:
            self._guarded()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean; assertions read server.requests instead

    return _Handler


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A started fake server, stopped after the test; the response formats chat clients
    learnt it refuses are forgotten with it (a later test's server may get the same port)."""
    from deepfield.llm.openai_chat import OpenAIChat

    with FakeOpenAIServer() as server:
        yield server
    OpenAIChat.forget_formats()
