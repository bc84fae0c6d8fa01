"""The MCP tools' argument types: each with the description and range an agent reads in the
tool's input schema (a client shows the schema, not always the tool's docstring), and which
the SDK checks before a tool runs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field as Arg

FieldName = Annotated[str, Arg(description="The field's name (list_fields lists them).")]
FieldNames = Annotated[list[str] | str | None, Arg(
    description="The fields to look in: a list of names, or one name. Default: every field.")]
Page = Annotated[str, Arg(
    description="The page: its filename (woks.md), stem (woks) or uuid.")]
Query = Annotated[str, Arg(description="What to look for, in words (not empty).")]
Question = Annotated[str, Arg(description="The question to research, in words.")]
K = Annotated[int, Arg(ge=1, le=100, description="How many results, 1 to 100.")]
SearchMode = Annotated[Literal["bm25", "vector", "hybrid"] | None, Arg(
    description="bm25 (keywords), vector or hybrid. Default: hybrid when the store has an "
                "embedding model, else bm25.")]
Unit = Annotated[Literal["page", "chunk"], Arg(
    description="page: one result per page; chunk: each matching chunk, with its text.")]
WithFrontmatter = Annotated[bool, Arg(
    description="Also each page's whole frontmatter (large; default false).")]
ReadMode = Annotated[Literal["outline", "full", "section"] | None, Arg(
    description="outline (headings with first sentences; the default), full, or section "
                "(with section). Left out with a section: that section.")]
Section = Annotated[str | None, Arg(
    description="A heading, or 'Parent > Child', as the outline shows it.")]
Depth = Annotated[int, Arg(ge=1, le=6, description="Heading levels the outline shows, 1 to 6.")]
Markdown = Annotated[str, Arg(
    description="The page: Markdown, with or without YAML frontmatter (keep a page's uuid "
                "there to replace it).")]
PageName = Annotated[str | None, Arg(
    description="The filename to use (lowercase letters, digits, hyphens). Default: from "
                "the title.")]
CreateField = Annotated[bool, Arg(
    description="Create the field first if the store has none of that name (default false: "
                "an unknown field is an error).")]
Text = Annotated[str, Arg(description="Notes, a conversation or a document to memorize.")]
Format = Annotated[str | None, Arg(
    description="The text's format, if known: openai, jsonl, locomo, markdown or text. "
                "Default: detected.")]
Rounds = Annotated[int, Arg(ge=1, le=10, description="Research rounds at most, 1 to 10.")]
Budget = Annotated[int, Arg(description="Tokens the reply's context may take.")]
Trace = Annotated[bool, Arg(
    description="Also each round's plan and queries (ten times the size; for debugging).")]
Task = Annotated[str, Arg(description="What the context is for (level deep researches it).")]
Level = Annotated[Literal["light", "medium", "deep"], Arg(
    description="light or medium: preferences, introduction and domain material; deep "
                "(the default) also researches the task.")]
Offset = Annotated[int, Arg(ge=0, description="Skip this many pages (a reply's next_offset).")]
Limit = Annotated[int, Arg(ge=1, le=1000, description="Pages in this reply, 1 to 1000.")]
