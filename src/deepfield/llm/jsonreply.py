"""Pull the JSON object out of a chat model's reply, however it was wrapped.

Models asked for JSON still add things: ``<think>…</think>`` reasoning (DeepSeek-R1, Qwen3),
Markdown code fences, a sentence before or after, trailing commas, or a reply cut off by the
token limit. This finds the first complete JSON object (or array) that parses and says why
when there is none, so the caller can ask once for a repair.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class ReplyNotJSONError(ValueError):
    """No JSON value could be read from the reply; the message says why (for the repair turn)."""


def strip_thinking(text: str) -> str:
    """The reply without reasoning blocks (an unclosed block runs to the end and is dropped)."""
    return _THINK.sub("", text).strip()


def parse_json_reply(text: str, expect: type = dict) -> Any:
    """The first JSON value of type ``expect`` (dict or list) found in ``text``."""
    cleaned = strip_thinking(text)
    if not cleaned:
        raise ReplyNotJSONError("the reply is empty (only reasoning or nothing at all)")
    candidates = [m.group(1) for m in _FENCE.finditer(cleaned)] + [cleaned]
    for candidate in candidates:
        value = _first_value(candidate, expect)
        if value is not None:
            return value
    opener = "{" if expect is dict else "["
    if opener in cleaned and not _balanced(cleaned[cleaned.index(opener):]):
        raise ReplyNotJSONError("the JSON in the reply is cut off (truncated before it closed)")
    kind = "object" if expect is dict else "array"
    raise ReplyNotJSONError(f"the reply contains no valid JSON {kind}")


def _first_value(text: str, expect: type) -> Any:
    opener = "{" if expect is dict else "["
    decoder = json.JSONDecoder()
    start = text.find(opener)
    while start != -1:
        for attempt in (text[start:], _TRAILING_COMMA.sub(r"\1", text[start:])):
            try:
                value, _ = decoder.raw_decode(attempt)
            except json.JSONDecodeError:
                continue
            if isinstance(value, expect):
                return value
        start = text.find(opener, start + 1)
    return None


def _balanced(text: str) -> bool:
    """Whether every bracket opened in ``text`` is closed (strings respected)."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth <= 0 and not in_string
