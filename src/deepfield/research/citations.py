"""Checking the ``[filename]`` citations of a model's research summary.

The integrator is asked to follow each fact with its source as ``[filename]``; a model can
still cite a page that the research never found, or that no field has (a name it made up).
Passed on as it is, such a citation sends the agent reading the context to a page that is not
there, and nothing said so. Each unknown filename is marked ``[name.md?]`` and named in a
warning; the fact is kept, since the model may only have garbled the name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..field import Field

_BRACKETS = re.compile(r"\[([^\[\]\n]{1,300})\](?!\()")
"""A bracketed citation, not a Markdown link's text (``[text](target)``)."""
_FILENAME = re.compile(r"(?<![\w.\-/])((?:[\w.\-]+/)?[\w.\-]+\.md)(?![\w?])", re.UNICODE)


def check_citations(summary: str, found: Iterable[tuple[str, str]],
                    fields: Sequence[Field]) -> tuple[str, list[str]]:
    """``summary`` with the citations of pages neither found by the research (``found``:
    (field, filename) pairs) nor in one of ``fields`` marked ``?``, and a warning per
    unknown name."""
    known = {filename for _field, filename in found}
    known |= {f"{field}/{filename}" for field, filename in found}
    unknown: list[str] = []

    def page_exists(name: str) -> bool:
        field_name, _, filename = name.rpartition("/")
        return any((not field_name or f.name == field_name) and (f.path / filename).is_file()
                   for f in fields)

    def mark(match: re.Match[str]) -> str:
        def one(found_name: re.Match[str]) -> str:
            name = found_name.group(1)
            if name in known or page_exists(name):
                return name
            if name not in unknown:
                unknown.append(name)
            return f"{name}?"
        return "[" + _FILENAME.sub(one, match.group(1)) + "]"

    checked = _BRACKETS.sub(mark, summary)
    where = ", ".join(f.name for f in fields)
    return checked, [f"the model's summary cites {name}, which the research did not find and "
                     f"no page of {where} is: marked [{name}?]; do not rely on that citation"
                     for name in unknown]
