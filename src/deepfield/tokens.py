"""A cheap, model-free token estimate for budgets (context packing, level material).

deepfield does not ship a tokenizer: budgets only need to be roughly right and never badly
low. The estimate errs on the high side, so text packed under a budget fits real tokenizers:

* CJK ideographs, kana and hangul count one token each (BPE tokenizers spend about one or
  more per character on them);
* everything else counts the larger of ``words × 1.3`` and ``characters / 4`` (the usual
  rule of thumb for English prose, and for URLs, code and numbers, which split finely).

    >>> count_tokens("Carbon fibre woks heat unevenly.")
    7
    >>> count_tokens("碳纤维炒锅")
    5
"""

from __future__ import annotations

import math
import re

__all__ = ["TokenTally", "count_tokens", "truncate_to_tokens"]

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)
_WORD = re.compile(r"\S+")
WORD_FACTOR = 1.3
CHARS_PER_TOKEN = 4


def _parts(text: str) -> tuple[int, int, int]:
    """(CJK characters, other words, other non-blank characters) of ``text``."""
    if not text:
        return 0, 0, 0
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text) if cjk else text
    words = len(_WORD.findall(rest))
    return cjk, words, len(rest) - rest.count(" ") - rest.count("\n")


def _estimate(cjk: int, words: int, chars: int) -> int:
    latin = max(words * WORD_FACTOR, chars / CHARS_PER_TOKEN) if words else 0.0
    return cjk + math.ceil(latin)


def count_tokens(text: str) -> int:
    """Estimated tokens in ``text`` (0 for empty text); see the module docstring."""
    return _estimate(*_parts(text))


class TokenTally:
    """The exact estimate of pieces of text joined by line breaks, kept as pieces are added.

    Summing ``count_tokens`` of each piece overcounts: each piece is rounded up on its own.
    The estimate depends only on totals of words, characters and CJK characters, and line
    breaks add none of them, so the tally of the pieces is the count of the joined text.
    """

    def __init__(self, text: str = "") -> None:
        self.cjk, self.words, self.chars = _parts(text)

    @property
    def tokens(self) -> int:
        return _estimate(self.cjk, self.words, self.chars)

    def add(self, *pieces: str, budget: int | None = None) -> bool:
        """Add ``pieces`` unless the count would then pass ``budget``; True if they were."""
        cjk, words, chars = self.cjk, self.words, self.chars
        for piece in pieces:
            c, w, n = _parts(piece)
            cjk, words, chars = cjk + c, words + w, chars + n
        if budget is not None and _estimate(cjk, words, chars) > budget:
            return False
        self.cjk, self.words, self.chars = cjk, words, chars
        return True


def truncate_to_tokens(text: str, budget: int) -> str:
    """The longest prefix of ``text`` that ends at a line or sentence end and fits ``budget``.

    Returns "" when not even the first sentence fits; never cuts a word in half.
    """
    if count_tokens(text) <= budget:
        return text
    cuts = [m.end() for m in re.finditer(r"\n|(?<=[.!?。！？])\s", text)]
    best = ""
    low, high = 0, len(cuts) - 1
    while low <= high:  # counts grow with the prefix, so binary search for the last cut
        mid = (low + high) // 2
        candidate = text[: cuts[mid]].rstrip()
        if count_tokens(candidate) <= budget:
            best = candidate
            low = mid + 1
        else:
            high = mid - 1
    return best
