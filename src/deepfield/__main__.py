"""``python -m deepfield`` runs the CLI."""

from .cli import main

main()
