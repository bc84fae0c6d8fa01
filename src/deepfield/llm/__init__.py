"""Chat models for the memorizer and researcher: interface, registry, config, JSON replies.

The OpenAI-compatible backend (and httpx with it) is imported on first use, so importing
deepfield stays fast for commands that never talk to a model.
"""

from typing import Any

from .base import (
    ChatModel,
    ChatReply,
    Message,
    ReplySchema,
    Usage,
    available_llms,
    complete,
    complete_json,
    create_llm,
    register_llm,
)
from .config import LLMConfig, build_llm, load_llm_config
from .jsonreply import ReplyNotJSONError, parse_json_reply, strip_thinking


def _create_openai(**options: Any) -> ChatModel:
    from .openai_chat import OpenAIChat

    return OpenAIChat(**options)


# The built-in backend registers like a third-party one would.
register_llm("openai", _create_openai)


def __getattr__(name: str) -> Any:
    if name == "OpenAIChat":
        from .openai_chat import OpenAIChat

        return OpenAIChat
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ChatModel", "ChatReply", "LLMConfig", "Message", "OpenAIChat", "ReplyNotJSONError",
    "ReplySchema", "Usage",
    "available_llms", "build_llm", "complete", "complete_json", "create_llm",
    "load_llm_config", "parse_json_reply", "register_llm", "strip_thinking",
]
