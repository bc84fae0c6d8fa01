"""Chat models for the memorizer and researcher: interface, registry, config, JSON replies."""

from .base import (
    ChatModel,
    ChatReply,
    Message,
    Usage,
    available_llms,
    complete,
    complete_json,
    create_llm,
    register_llm,
)
from .config import LLMConfig, build_llm, load_llm_config
from .jsonreply import ReplyNotJSONError, parse_json_reply, strip_thinking
from .openai_chat import OpenAIChat
from .openai_chat import create as _create_openai

# The built-in backend registers like a third-party one would.
register_llm("openai", _create_openai)

__all__ = [
    "ChatModel", "ChatReply", "LLMConfig", "Message", "OpenAIChat", "ReplyNotJSONError", "Usage",
    "available_llms", "build_llm", "complete", "complete_json", "create_llm",
    "load_llm_config", "parse_json_reply", "register_llm", "strip_thinking",
]
