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

__all__ = ["count_tokens", "truncate_to_tokens"]

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)
_WORD = re.compile(r"\S+")
WORD_FACTOR = 1.3
CHARS_PER_TOKEN = 4


def count_tokens(text: str) -> int:
    """Estimated tokens in ``text`` (0 for empty text); see the module docstring."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text) if cjk else text
    words = len(_WORD.findall(rest))
    chars = len(rest) - rest.count(" ") - rest.count("\n")
    latin = max(words * WORD_FACTOR, chars / CHARS_PER_TOKEN) if words else 0.0
    return cjk + math.ceil(latin)


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
