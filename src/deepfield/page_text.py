"""Text in and out of page files: bytes that must be UTF-8 Markdown, strings that must be
writable as UTF-8, and the layout (BOM, CRLF) a rewrite in place keeps.

Python decodes bytes that are not UTF-8 into lone surrogates (command-line arguments, JSON
escapes) and files with replacement characters; either written back would fail deep inside
(YAML, the embedder) or destroy the original bytes, so both are refused here with a typed
error that says what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import DeepfieldError, InvalidPageError


def require_text(value: object, what: str, error: type[DeepfieldError] = InvalidPageError) -> str:
    """``value`` if it is a string that can be written as UTF-8; else ``error`` naming what
    was given (a library caller passing None or a number gets a deepfield error, not an
    AttributeError from inside)."""
    if not isinstance(value, str):
        raise error(f"{what} must be text, not {type(value).__name__}")
    check_utf8(value, what, error)
    return value


def is_utf8(data: bytes) -> bool:
    """Whether ``data`` decodes as UTF-8 (a page file another tool wrote may not)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


UTF8_HINT = ("give it as UTF-8 text; in a shell, check that the terminal and the locale use "
             "UTF-8, e.g. LANG=C.UTF-8")


def check_utf8(text: str, what: str, error: type[DeepfieldError] = InvalidPageError) -> None:
    """``error`` if ``text`` holds a lone surrogate, so cannot be written as UTF-8. Python
    decodes bytes that are not UTF-8 (a Latin-1 command-line argument, a JSON ``\\udce9``
    escape) into such characters; encoding them later fails deep inside (YAML, the
    embedder, the file system) with a UnicodeEncodeError instead of saying what is wrong."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = ord(text[exc.start])
        # 0xDC80-0xDCFF: Python's stand-in for an undecodable byte (surrogateescape)
        what_is_there = (f"the byte 0x{char - 0xDC00:02x}" if 0xDC80 <= char <= 0xDCFF
                         else f"a lone surrogate U+{char:04X}")
        raise error(f"{what} is not valid UTF-8: {what_is_there} at character "
                    f"{exc.start + 1}", UTF8_HINT) from None


def check_text(data: bytes, what: str, max_bytes: int) -> str:
    """Decode page bytes; binary, non-UTF-8, empty and oversized input get clear errors."""
    if len(data) > max_bytes:
        raise InvalidPageError(
            f"{what} is {len(data):,} bytes; deepfield writes pages up to {max_bytes:,} bytes",
            "split it into smaller documents first (pages over 8 KB are split automatically)",
        )
    if b"\x00" in data:
        raise InvalidPageError(f"{what} looks binary (contains NUL bytes), not Markdown text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidPageError(
            f"{what} is not valid UTF-8 (bad byte at offset {exc.start})",
            "re-save it as UTF-8 (e.g. `iconv -t UTF-8`)",
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise InvalidPageError(f"{what} is empty")
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class TextLayout:
    """How a page file is laid out beyond its characters: a leading byte-order mark, and
    CRLF line endings throughout. A rewrite of a few frontmatter keys puts both back, so the
    file changes only where the keys did (an editor on Windows would otherwise see every
    line change)."""

    bom: bool = False
    crlf: bool = False

    def encode(self, text: str) -> bytes:
        """``text`` (LF line endings, as Page renders it) as the file's bytes."""
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        return (("\ufeff" if self.bom else "") + text).encode("utf-8")


def decode_page_file(data: bytes, what: str) -> tuple[str, TextLayout]:
    """A stored page's text for a rewrite in place, and its layout (``TextLayout.encode``
    gives the bytes back). Bytes that are not UTF-8 raise InvalidPageError: decoding them
    with replacement characters and writing the text back would destroy them for good.
    Mixed line endings are kept as they are (only a consistently CRLF file is converted)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidPageError(
            f"{what} is not valid UTF-8 (bad byte at offset {exc.start}); it was left "
            "unchanged",
            "fix its encoding first, e.g. re-save it as UTF-8 (`iconv -f latin1 -t UTF-8`), "
            "then run the command again",
        ) from None
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    if crlf:
        text = text.replace("\r\n", "\n")
    return text, TextLayout(bom, crlf)
