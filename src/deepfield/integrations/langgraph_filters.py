"""LangGraph's ``search(filter=...)`` rules over an item's value (no LangGraph import needed).

A filter maps keys to a value (equality) or to operators ``$eq``, ``$ne``, ``$gt``, ``$gte``,
``$lt``, ``$lte``; a dict compared with a dict matches key by key, as LangGraph's own
in-memory store does. Comparing values of different types never matches (and never raises).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq, "$ne": operator.ne, "$gt": operator.gt, "$gte": operator.ge,
    "$lt": operator.lt, "$lte": operator.le,
}


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, dict) and want and all(k in _OPERATORS for k in want):
        for name, operand in want.items():
            try:
                if not _OPERATORS[name](have, operand):
                    return False
            except TypeError:
                return False
        return True
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_compare(have.get(k), v) for k, v in want.items())
    return bool(have == want)


def matches(value: dict[str, Any], conditions: dict[str, Any]) -> bool:
    """Whether ``value`` meets every condition of the filter."""
    return all(_compare(value.get(key), want) for key, want in conditions.items())
