"""Read, set and remove one server entry in an agent's config text, JSON or TOML alike.

JSON and JSONC go through :mod:`.jsonc` (in-place splicing, comments kept); TOML through
``tomlkit``, which keeps comments and layout too. Every function takes and returns the file's
text, so the caller can show a diff before anything is written. Syntax errors come back as
:class:`ConfigSyntaxError` with the line and column.
"""

from __future__ import annotations

from typing import Any

from . import jsonc


class ConfigSyntaxError(ValueError):
    """The file is not valid JSON/TOML; ``line`` and ``column`` are 1-based (0: unknown)."""

    def __init__(self, reason: str, line: int, column: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        self.column = column


class ConfigShapeError(ValueError):
    """Valid syntax, but a value on the way to the entry is not an object (table)."""


def _strict(fmt: str) -> bool:
    return fmt == "json"


def check(text: str, fmt: str) -> Any:
    """The parsed document (None for an empty file); raises :class:`ConfigSyntaxError`."""
    if fmt == "toml":
        return _toml_doc(text).unwrap()
    try:
        return jsonc.loads(text, strict=_strict(fmt))
    except jsonc.JSONCError as exc:
        raise ConfigSyntaxError(exc.reason, exc.line, exc.column) from None


def get(text: str, fmt: str, path: list[str]) -> Any:
    document = check(text, fmt)
    for key in path:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def set_entry(text: str, fmt: str, path: list[str], value: dict[str, Any]) -> str:
    if fmt == "toml":
        return _toml_set(text, path, value)
    check(text, fmt)
    try:
        return jsonc.set_value(text, path, value, strict=_strict(fmt))
    except jsonc.JSONCError as exc:
        raise ConfigShapeError(exc.reason) from None


def remove_entry(text: str, fmt: str, path: list[str]) -> str:
    if fmt == "toml":
        return _toml_remove(text, path)
    check(text, fmt)
    return jsonc.remove_value(text, path, strict=_strict(fmt))


# ---------------------------------------------------------------------- TOML


def _toml_doc(text: str) -> Any:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        reason = str(exc).split(" at line ")[0]
        raise ConfigSyntaxError(reason, exc.line, exc.col) from None


def _toml_container(doc: Any, path: list[str], create: bool) -> Any:
    import tomlkit

    node = doc
    for depth, key in enumerate(path):
        child = node.get(key)
        if child is None:
            if not create:
                return None
            # A table of tables is written [mcp_servers.deepfield], not under an empty
            # [mcp_servers] header.
            child = tomlkit.table(is_super_table=depth == len(path) - 1)
            node[key] = child
        if not isinstance(child, dict):
            raise ConfigShapeError(f"{'.'.join(path[: depth + 1])} is a TOML "
                               f"{type(child).__name__}, not a table")
        node = child
    return node


def _toml_set(text: str, path: list[str], value: dict[str, Any]) -> str:
    import tomlkit

    doc = _toml_doc(text)
    container = _toml_container(doc, path[:-1], create=True)
    table = tomlkit.table()
    for key, item in value.items():
        table[key] = item
    container[path[-1]] = table
    return str(tomlkit.dumps(doc))


def _toml_remove(text: str, path: list[str]) -> str:
    import tomlkit

    doc = _toml_doc(text)
    container = _toml_container(doc, path[:-1], create=False)
    if container is None or path[-1] not in container:
        return text
    del container[path[-1]]
    return str(tomlkit.dumps(doc))
