"""Text the CLI prints is stripped of control characters.

Titles, snippets, filenames and page text come from pages anyone may have written; printed
raw, a BEL rings, an escape sequence moves the cursor, retitles the window or rewrites what
was printed before, and bidirectional overrides reorder what is shown. While a command runs
in text mode, standard output and error go through :class:`CleanStream`, which drops C0 and
C1 control characters (tab and line feed stay), DEL, every escape sequence and the Unicode
bidi controls; deepfield's own styling (bold search results) is written past it by
:func:`secho`, after cleaning the text it styles. ``--json`` output is left alone: JSON
escapes control characters itself, and agents read it byte for byte.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import click

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"                # CSI sequences (colours, cursor, erase)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"    # OSC (window title, hyperlinks)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"         # DCS, SOS, PM, APC strings
    r"|\x1b.?"                                # any other escape
)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                       "\u2066-\u2069]")


def clean(text: str) -> str:
    """``text`` without control characters and escape sequences (tab and line feed stay)."""
    if text.isprintable():
        return text
    return _CONTROLS.sub(lambda m: m.group(0) if m.group(0) in "\t\n" else "",
                         _ESCAPES.sub("", text))


def counted(count: int, noun: str) -> str:
    """``count`` with ``noun``, plural unless it is one: "1 round", "3 rounds"."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def secho(text: str, **style: Any) -> None:
    """``click.secho`` of cleaned ``text``: deepfield's own styling reaches the terminal,
    whatever styling the text itself carried does not."""
    stream = sys.stdout.inner if isinstance(sys.stdout, CleanStream) else sys.stdout
    click.secho(clean(text), file=stream, **style)


class CleanStream:
    """A text stream that writes ``clean(text)`` to ``inner`` unless ``raw()`` says not to."""

    def __init__(self, inner: TextIO, raw: Callable[[], bool]) -> None:
        self.inner = inner
        self._raw = raw

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        return self.inner.write(text if self._raw() else clean(text))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # encoding, errors, buffer, isatty, flush …
        return getattr(self.inner, name)


@contextmanager
def cleaned_output(raw: Callable[[], bool]) -> Iterator[None]:
    """Standard output and error cleaned while the block runs (``raw()``: pass text as is)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = CleanStream(saved[0], raw)
    sys.stderr = CleanStream(saved[1], raw)
    try:
        yield
    finally:
        if isinstance(sys.stdout, CleanStream):
            sys.stdout = saved[0]
        if isinstance(sys.stderr, CleanStream):
            sys.stderr = saved[1]
