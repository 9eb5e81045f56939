"""The `tasks` harness: a folder of a user's own tasks (raso's layout or Harbor task folders) as a harness."""

from harnesses.tasks.harness import TasksHarness

__all__ = ["TasksHarness"]
