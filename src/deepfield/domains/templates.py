"""The well-known pages of a research domain and the bodies new pages start from.

A domain is a field laid out after ResearcherZero's memory design (one folder per research
domain; switching domain is switching field). Its spec pages are ordinary memoryfield pages whose
frontmatter says what they are for:

=====================  ===============  ==============================================
file                   layer            what it holds
=====================  ===============  ==============================================
basic-info.md          basic-context    what the domain is: definition, scope, terms
taxonomy.md            basic-context    the category → concept tree
main-challenge.md      cognition        open problems, their benchmarks, state of the art
network.md             cognition        how concepts relate and evolved
human-preference.md    alignment        preferences and negative constraints (always loaded)
=====================  ===============  ==============================================

Atomic knowledge (methods, benchmarks, surveys, blogs) is not a folder but a ``kind`` key on
ordinary pages (see atomic.py). Guidance in the templates is in HTML comments, which context
building drops, so an unfilled page costs no tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KIND_BODIES", "LAYERS", "ROLES", "WELL_KNOWN", "SpecPage", "intro_text"]

LAYERS: tuple[str, ...] = ("basic-context", "cognition", "alignment")
LAYER_KEY = "layer"
ROLE_KEY = "role"
ALWAYS_LOAD_KEY = "always_load"


@dataclass(frozen=True)
class SpecPage:
    role: str
    filename: str
    layer: str
    title: str
    summary: str
    body: str
    always_load: bool = False

    def render_body(self, domain: str, description: str | None = None) -> str:
        text = self.body.replace("{domain}", domain)
        if "{description}" in text:
            text = text.replace(
                "{description}",
                description.strip() if description else
                "<!-- What this domain is: its definition and boundaries, in a paragraph. -->",
            )
        return text


WELL_KNOWN: tuple[SpecPage, ...] = (
    SpecPage(
        "basic-info", "basic-info.md", "basic-context", "Basic info",
        "What the domain is: definition, scope and key terms.",
        "# Basic info: {domain}\n\n{description}\n\n## Scope\n\n"
        "<!-- What belongs to this domain and what does not; neighbouring domains. -->\n\n"
        "## Key terms\n\n<!-- The few terms a newcomer must know, one line each. -->\n",
    ),
    SpecPage(
        "taxonomy", "taxonomy.md", "basic-context", "Taxonomy",
        "The domain's categories and the concepts under each.",
        "# Taxonomy: {domain}\n\n"
        "<!-- Categories as headings (## Category) or top-level list items; concepts as list\n"
        "items nested under them. Text after ': ' is a description, names in parentheses are\n"
        "aliases. For example:\n\n"
        "## Memory\n"
        "- Retrieval-Augmented Generation (RAG): memory as retrieval\n"
        "  - GraphRAG\n"
        "- Memory consolidation\n\n"
        "`deepfield taxonomy {domain}` prints the tree with page counts; `--lint` lists pages\n"
        "whose categories or concepts are missing here. -->\n",
    ),
    SpecPage(
        "main-challenge", "main-challenge.md", "cognition", "Main challenges",
        "The domain's open problems, the benchmarks that measure them and the state of the art.",
        "# Main challenges: {domain}\n\n"
        "<!-- One section per open problem: why it matters, the benchmarks that measure it,\n"
        "the state of the art (method, score, date) and what blocks progress. -->\n",
    ),
    SpecPage(
        "network", "network.md", "cognition", "Concept network",
        "How the domain's concepts relate to each other and how they evolved.",
        "# Concept network: {domain}\n\n"
        "<!-- Relations between concepts, one per line (A → B: how B builds on or replaces A),\n"
        "lines of work over time, and disagreements kept side by side for review. -->\n",
    ),
    SpecPage(
        "human-preference", "human-preference.md", "alignment", "Human preferences",
        "What the human wants from research in this domain, and what never to do.",
        "# Human preferences: {domain}\n\n## Preferences\n\n"
        "<!-- Sources, methods and styles the human prefers. -->\n\n"
        "## Negative constraints\n\n"
        "<!-- What never to do, cite or recommend. -->\n",
        always_load=True,
    ),
)
ROLES: tuple[str, ...] = tuple(p.role for p in WELL_KNOWN)
BY_ROLE: dict[str, SpecPage] = {p.role: p for p in WELL_KNOWN}

KIND_BODIES: dict[str, str] = {
    "method": "## Problem\n\n## Method\n\n## Results\n\n## Limitations\n",
    "benchmark": "## What it measures\n\n## Challenge it reflects\n\n## State of the art\n",
    "survey": "## Design philosophy\n\n## Taxonomy\n\n## Key insights\n",
    "blog": "## Main points\n\n## Why it matters\n",
}
"""Section skeletons for an atomic page added without text (ResearcherZero extracts surveys'
design philosophy and the challenge each benchmark reflects)."""


def intro_text(domain: str, description: str | None) -> str:
    """The domain field's ``index.md``: what it is and how its pages are laid out."""
    about = description.strip() if description else f"Research memory for the {domain} domain."
    return (
        f"# {domain}\n\n{about}\n\n"
        "A research domain: basic-info.md and taxonomy.md say what it is, main-challenge.md "
        "and network.md what is open and how ideas connect, human-preference.md what the human "
        "wants. The other pages are atomic knowledge (methods, benchmarks, surveys, blogs) "
        "tagged with a kind, a category and concepts from the taxonomy.\n"
    )
