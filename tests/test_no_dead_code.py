"""No public function, method or property that nothing calls: each public name defined at module level or in a class
of the checked modules is used somewhere else in the repository's Python code (tests count: they are callers too).
Checked modules: the ones where dead code was found (issue 38: `build_index`, `RunContext.has_retriever`,
`LazyRetriever.built`); add a module here when it is cleaned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("corpus_tools/index.py", "raso/optimizer/context.py")
SOURCES = ("raso", "corpus_tools", "harnesses", "experiments", "benchmarks", "tests")


def _public_definitions(tree: ast.Module) -> list[tuple[str, int]]:
    """Public functions, classes' public methods and properties (not dunders) with their line."""
    found: list[tuple[str, int]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            found.append((node.name, node.lineno))
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += [(item.name, item.lineno) for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_")]
    return found


def _unused(definitions: list[tuple[str, int]], own: str, others: str) -> list[str]:
    """The defined names that appear neither in `others` nor in `own` beyond their definition."""
    out = []
    for name, _line in definitions:
        word = re.compile(rf"\b{re.escape(name)}\b")
        if not word.search(others) and len(word.findall(own)) <= 1:
            out.append(name)
    return out


def test_checked_modules_define_nothing_unused() -> None:
    texts = {path: path.read_text(encoding="utf-8") for folder in SOURCES for path in (ROOT / folder).rglob("*.py")
             if path != Path(__file__).resolve()}  # this file names the removed ones
    problems = []
    for relative in CHECKED:
        path = ROOT / relative
        own = texts[path]
        others = "\n".join(text for p, text in texts.items() if p != path)
        problems += [f"{relative}: {name}" for name in _unused(_public_definitions(ast.parse(own)), own, others)]
    assert not problems, f"defined but never used: {problems}"


def test_the_check_finds_an_unused_function_and_property() -> None:
    own = ("def used() -> int: ...\ndef unused() -> int: ...\n"
           "class Lazy:\n    @property\n    def built(self) -> bool: ...\n    def get(self) -> int: ...\n")
    definitions = _public_definitions(ast.parse(own))
    assert definitions == [("used", 1), ("unused", 2), ("built", 5), ("get", 6)]
    assert _unused(definitions, own, "x = used() + Lazy().get()") == ["unused", "built"]
