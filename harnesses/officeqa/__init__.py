"""OfficeQA harness: questions over U.S. Treasury Bulletins answered by searching, reading and computing."""

from harnesses.officeqa.harness import OfficeQAHarness

__all__ = ["OfficeQAHarness"]
