"""Importers: notes from other tools (Obsidian, Claude Code memory, the Anthropic memory tool,
basic-memory, any Markdown folder, LoCoMo conversations) into fields, and export back out.

Pick one by name through :data:`deepfield.importers.registry.IMPORTERS`.
"""
