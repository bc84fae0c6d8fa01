"""deepfield for agent frameworks, each an optional extra that installs the framework:

- :mod:`.memory_tool` (``deepfield[anthropic]``): a backend for Claude's memory tool;
- :mod:`.langchain` (``deepfield[langchain]``): a LangChain ``BaseRetriever``;
- :mod:`.llamaindex` (``deepfield[llamaindex]``): a LlamaIndex ``BaseRetriever``;
- :mod:`.langgraph` (``deepfield[langgraph]``): a LangGraph ``BaseStore``, one field per
  namespace.

Nothing here is imported by ``import deepfield``; import the module you need. A field that does
not exist raises :class:`deepfield.errors.UnknownFieldError`, never a framework's own error.
"""
