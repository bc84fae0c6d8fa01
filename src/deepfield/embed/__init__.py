"""Embedding backends: the interface and registry in base.py, one module per backend."""
