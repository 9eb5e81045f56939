"""Subcommands of the `raso` CLI (see raso.cli)."""
