"""raso."""
