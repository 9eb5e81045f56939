"""ALFWorld: household tasks in TextWorld text games (the real `alfworld` package, imported on first use)."""

from harnesses.alfworld.harness import AlfworldHarness

__all__ = ["AlfworldHarness"]
