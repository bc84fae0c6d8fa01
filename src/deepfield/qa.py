"""GAM's question-answering protocol: a model answers from a context; token F1 and BLEU-1.

Used by bench/qa.py to score what research hands an agent. Answers are normalised as in the
LoCoMo and GAM evaluations: lower-cased, punctuation and the articles a/an/the removed,
whitespace collapsed. BLEU-1 is unigram precision with the brevity penalty (one reference).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

from .llm.base import ChatModel, Message, Usage, complete
from .llm.jsonreply import strip_thinking

ANSWER_PROMPT = """Answer the question from the memory context only, as a short phrase
(a name, a date such as "15 July 2023", a number, or a few words), not a sentence. Resolve
relative dates ("yesterday", "last week") using the date of the session they were said in.
If the context does not contain the answer, give your best short guess."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "‘’“”–—")


def normalize_answer(text: str) -> str:
    text = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, reference: str) -> float:
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(reference).split()
    if not predicted or not gold:
        return float(predicted == gold)
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, reference: str) -> float:
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(reference).split()
    if not predicted or not gold:
        return float(predicted == gold)
    matched = sum((Counter(predicted) & Counter(gold)).values())
    precision = matched / len(predicted)
    brevity = 1.0 if len(predicted) > len(gold) else math.exp(1 - len(gold) / len(predicted))
    return brevity * precision


def answer(model: ChatModel, question: str, context: str, usage: Usage) -> str:
    """The model's short answer to ``question`` from ``context`` (one call)."""
    messages: list[Message] = [
        {"role": "system", "content": ANSWER_PROMPT},
        {"role": "user", "content": f"Memory context:\n{context}\n\nQuestion: {question}\n"
                                    "Short answer:"},
    ]
    text = strip_thinking(complete(model, messages, usage, max_tokens=64, temperature=0.0))
    return " ".join(text.split()).strip().strip('"')
