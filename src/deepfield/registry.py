"""Checks shared by the backend registries (embedders, chat models): a registration names
a backend that deepfield.toml can refer to, so the name must be one it can write, the factory
something it can call, and a name already taken is replaced only when asked."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import ConfigError

_BACKEND_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def check_registration(kind: str, name: object, factory: object, *, taken: Iterable[str],
                       replace: bool, current: object = None) -> str:
    """``name`` if ``factory`` may be registered under it, else ConfigError. ``taken``: names
    in use (built-ins and entry points included); ``current``: the factory registered now
    (registering that same one again is a no-op, e.g. a module imported twice)."""
    if not isinstance(name, str) or not _BACKEND_NAME.match(name):
        raise ConfigError(
            f"{kind} backend name {name!r} is not a name deepfield.toml can use",
            "use lowercase letters, digits, '.', '_' and '-' (at most 64), e.g. 'my-model'")
    if not callable(factory):
        raise ConfigError(
            f"the {kind} backend {name!r} must be registered with a class or function that "
            f"builds it, not a value of type {type(factory).__name__}",
            "pass the class itself (register(name, MyBackend)), or a function taking the "
            "backend's options as keywords")
    if not replace and factory is not current and name in set(taken):
        raise ConfigError(
            f"a {kind} backend named {name!r} is already registered",
            "choose another name, or pass replace=True to replace it on purpose")
    return name
