"""Research domains (after ResearcherZero's memory design): a field per domain, with well-known
pages in layers (basic context, cognition, alignment), atomic knowledge pages tagged with a kind,
category and concepts, a taxonomy tree, and the material for progressive context levels.

Modules: ``atomic`` (atomic-page keys, search filters), ``taxonomy`` (the tree, counts, lint),
``templates`` (the well-known pages), ``domain`` (create, add, load), ``levels`` (light, medium,
deep material and budget packing). Only the first two are imported here: search uses them, and
the others import the field and store modules.
"""

from .atomic import KINDS, AtomicMeta, Filters, atomic_frontmatter, atomic_meta
from .taxonomy import Taxonomy, TaxonomyNode, parse_taxonomy

__all__ = [
    "KINDS", "AtomicMeta", "Filters", "Taxonomy", "TaxonomyNode", "atomic_frontmatter",
    "atomic_meta", "parse_taxonomy",
]
