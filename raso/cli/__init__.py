"""The `raso` command line (see raso.cli.main)."""

from .main import main

__all__ = ["main"]
