"""`raso`'s public names: each lazy name resolves, and the eager imports type checkers read name exactly the same
objects (so an IDE's view of `raso.optimize` is the real one)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import raso

ROOT = Path(raso.__file__).resolve().parent


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
            for alias in node.names if node.module}


def test_every_lazy_name_is_also_imported_for_type_checkers_from_the_same_module() -> None:
    assert _type_checking_imports() == raso._LAZY


def test_every_lazy_name_resolves_to_its_module_object() -> None:
    for name, module in raso._LAZY.items():
        assert getattr(raso, name) is getattr(importlib.import_module(module), name), name


def test_the_packages_declare_inline_types() -> None:
    assert (ROOT / "py.typed").is_file() and (ROOT.parent / "corpus_tools" / "py.typed").is_file()
