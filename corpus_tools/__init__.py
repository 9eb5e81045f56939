"""corpus_tools."""
