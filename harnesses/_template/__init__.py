"""Template harness: answer a question about a short document.

Made from RASO's harness template; docs/adding-a-harness.md explains each part.
"""

from .harness import TemplateEnv, TemplateHarness

__all__ = ["TemplateEnv", "TemplateHarness"]
