"""The chat-model interface: one abstract method, a registry by name, and JSON helpers.

A backend turns a list of messages into a reply. Everything else deepfield needs from a model
lives here once: usage accounting (calls, tokens, seconds, for every research trace), the
:class:`ReplySchema` a JSON reply must follow (servers that can constrain decoding to it
return exactly that object; the others are asked for JSON or prose), and ``complete_json``,
which asks for JSON, parses it robustly and, when the reply is not valid, asks exactly once for
a repair before giving up with :class:`LLMReplyError`.

Backends register by name like embedders (entry-point group ``deepfield.llms``); the built-in
``openai`` backend registers the same way.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import entry_points
from typing import Any, ClassVar, Literal, TypedDict

from ..errors import ConfigError, LLMReplyError
from ..registry import check_registration
from .jsonreply import ReplyNotJSONError, parse_json_reply


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class ChatReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    finish_reason: str | None = None


@dataclass
class Usage:
    """What the model calls of one job cost."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    repairs: int = 0

    def add(self, reply: ChatReply) -> None:
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.seconds += reply.seconds

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 4)}


@dataclass(frozen=True)
class ReplySchema:
    """The JSON object a reply must be: ``name`` (letters, digits, ``_`` and ``-``, at most 64)
    and a JSON schema written for OpenAI's strict mode — every property required, no others,
    an optional value as a ``["string", "null"]`` type — the subset llama.cpp's server, vLLM
    and Ollama also turn into a grammar."""

    name: str
    schema: dict[str, Any]

    @classmethod
    def object(cls, name: str, **properties: dict[str, Any]) -> ReplySchema:
        """A schema for an object with exactly ``properties`` (each a JSON schema)."""
        return cls(name, {
            "type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False,
        })


STRING: dict[str, Any] = {"type": "string"}
STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
"""Property schemas the built-in replies use (see ReplySchema.object)."""


class ChatModel(ABC):
    """A chat model. Subclasses implement :meth:`chat`; ``model`` names what is asked."""

    name: ClassVar[str] = "chat"
    model: str = ""

    @abstractmethod
    def chat(
        self,
        messages: list[Message],
        *,
        max_tokens: int = 1024,
        temperature: float = 0.3,
        json_mode: bool = False,
        schema: ReplySchema | None = None,
    ) -> ChatReply:
        """One completion. ``json_mode`` asks the server for a JSON object where it can;
        ``schema`` (which implies it) for an object of that shape. Either is a request a
        backend may be unable to honour: callers parse and check the reply all the same."""

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model}

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Free connections; a later call opens new ones."""


def complete(
    model: ChatModel, messages: list[Message], usage: Usage, **options: Any
) -> str:
    """A plain-text completion, counted in ``usage``; reasoning blocks are kept."""
    started = time.perf_counter()
    reply = model.chat(messages, **options)
    usage.add(_timed(reply, started))
    return reply.text


def complete_json(
    model: ChatModel,
    messages: list[Message],
    usage: Usage,
    *,
    expect: type = dict,
    check: Callable[[Any], str | None] | None = None,
    schema: ReplySchema | None = None,
    max_tokens: int = 1024,
    temperature: float = 0.3,
) -> Any:
    """Ask for JSON; on an invalid reply ask once to repair it, then raise LLMReplyError.

    ``check`` validates the parsed value and returns what is wrong with it (or None);
    ``schema`` is sent to servers that can hold the model to it.
    """
    conversation = list(messages)
    for attempt in range(2):
        started = time.perf_counter()
        reply = model.chat(
            conversation, max_tokens=max_tokens, temperature=temperature,
            json_mode=expect is dict, schema=schema,
        )
        usage.add(_timed(reply, started))
        try:
            value = parse_json_reply(reply.text, expect)
            problem = check(value) if check else None
        except ReplyNotJSONError as exc:
            problem = str(exc)
            if reply.finish_reason == "length":
                problem += f" (the reply hit the {max_tokens}-token limit; answer more briefly)"
        if problem is None:
            return value
        if attempt == 0:
            usage.repairs += 1
            conversation = [
                *conversation,
                {"role": "assistant", "content": reply.text[-4000:]},
                {"role": "user", "content": (
                    f"That reply cannot be used: {problem}. Answer again with only the JSON "
                    "value, no prose, no code fences."
                )},
            ]
    raise LLMReplyError(f"model {model.model!r} did not return the JSON asked for: {problem}")


def _timed(reply: ChatReply, started: float) -> ChatReply:
    if reply.seconds:
        return reply
    return ChatReply(reply.text, reply.prompt_tokens, reply.completion_tokens,
                     time.perf_counter() - started, reply.finish_reason)


# -- registry -------------------------------------------------------------------------------

LLMFactory = Callable[..., ChatModel]
_registry: dict[str, LLMFactory] = {}
_ENTRY_POINT_GROUP = "deepfield.llms"


def register_llm(name: str, factory: LLMFactory, *, replace: bool = False) -> None:
    """Make a backend available as ``name`` (third-party backends may also use entry points).
    A name already in use (``openai``, an entry point, an earlier registration) is
    ConfigError unless ``replace`` is True; so are a bad name and a factory not callable."""
    taken = {*_registry, *(() if replace else
                           (entry.name for entry in entry_points(group=_ENTRY_POINT_GROUP)))}
    check_registration("LLM", name, factory, taken=taken, replace=replace,
                       current=_registry.get(name))
    _registry[name] = factory


def _load_entry_points() -> None:
    for entry in entry_points(group=_ENTRY_POINT_GROUP):
        if entry.name not in _registry:
            _registry[entry.name] = entry.load()


def available_llms() -> list[str]:
    _load_entry_points()
    return sorted(_registry)


def create_llm(name: str, **options: Any) -> ChatModel:
    if name not in _registry:
        _load_entry_points()
    factory = _registry.get(name)
    if factory is None:
        raise ConfigError(
            f"no LLM backend named {name!r}",
            f"known: {', '.join(available_llms()) or 'none'}",
        )
    return factory(**options)
