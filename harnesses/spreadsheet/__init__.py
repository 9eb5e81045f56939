"""SpreadsheetBench harness: the agent writes an openpyxl program, runs it in a sandbox, and submits it."""

from harnesses.spreadsheet.harness import SpreadsheetHarness

__all__ = ["SpreadsheetHarness"]
