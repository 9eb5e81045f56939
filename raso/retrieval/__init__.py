"""Retrieval for RASO: section retrievers over a corpus index, SkillDreamer, SkillRouter, and the
skill-retrieval benchmark runner."""
