"""The Researcher: deep reading of a memory, GAM-style, with or without a model.

    from deepfield.research import research
    result = research([field], "When did Caroline go to the support group?", budget=1000)
    print(result.context)          # evidence lines grouped by page, within the budget
    result.to_json()["rounds"]     # the trace: plan, queries per tool, hits, decision
"""

from .evidence import Evidence
from .loop import research
from .result import ResearchResult, RoundTrace

__all__ = ["Evidence", "ResearchResult", "RoundTrace", "research"]
