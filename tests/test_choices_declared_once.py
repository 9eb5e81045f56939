"""Every choice list of the product is declared once: no two module-level `X = Literal[...]` aliases in raso/ have
the same values, and no Literal written inline repeats one of them (it must name the alias, e.g. from
raso.choices)."""

from __future__ import annotations

import ast
from pathlib import Path

RASO = Path(__file__).resolve().parent.parent / "raso"


def _is_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Subscript) and (
        (isinstance(node.value, ast.Name) and node.value.id == "Literal")
        or (isinstance(node.value, ast.Attribute) and node.value.attr == "Literal"))


def _values(node: ast.Subscript, aliases: dict[str, frozenset[object]]) -> frozenset[object]:
    """The values of a Literal; a name inside it stands for the alias of that name (Literal[InitKind, "x"])."""
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values: set[object] = set()
    for item in items:
        if isinstance(item, ast.Constant):
            values.add(item.value)
        elif isinstance(item, ast.Name) and item.id in aliases:
            values |= aliases[item.id]
        else:
            values.add(ast.dump(item))
    return frozenset(values)


def _module_aliases(tree: ast.Module, imported: dict[str, frozenset[object]]) -> dict[str, frozenset[object]]:
    aliases = dict(imported)
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else (
            stmt.target if isinstance(stmt, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and stmt.value is not None and _is_literal(stmt.value):
            aliases[target.id] = _values(stmt.value, aliases)
    return aliases


def test_every_literal_choice_list_is_declared_once() -> None:
    choices = _module_aliases(ast.parse((RASO / "choices.py").read_text(encoding="utf-8")), {})
    trees = {path.relative_to(RASO.parent): ast.parse(path.read_text(encoding="utf-8"))
             for path in sorted(RASO.rglob("*.py"))}
    declared: dict[frozenset[object], str] = {}
    alias_nodes: set[int] = set()
    for where, tree in trees.items():
        aliases = _module_aliases(tree, choices)
        for stmt in tree.body:
            value = getattr(stmt, "value", None)
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and value is not None and _is_literal(value):
                name = (stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target).id  # type: ignore[union-attr]
                assert aliases[name] not in declared, f"{where}: {name} repeats {declared[aliases[name]]}"
                declared[aliases[name]] = f"{where}:{name}"
                alias_nodes.add(id(value))
    inline = [f"{where}:{node.lineno}" for where, tree in trees.items() for node in ast.walk(tree)
              if _is_literal(node) and id(node) not in alias_nodes
              and _values(node, _module_aliases(tree, choices)) in declared]  # type: ignore[arg-type]
    assert not inline, f"inline Literal repeating a declared choice list: {inline}"
    assert {"RetrievalKind", "InitMode", "UpdateMode", "FailureKind", "Outcome"} <= set(choices)


def test_the_check_finds_a_copied_list(tmp_path: Path) -> None:
    choices = _module_aliases(ast.parse('K = Literal["a", "b"]\nM = Literal[K, "c"]\n'), {})
    assert choices == {"K": frozenset({"a", "b"}), "M": frozenset({"a", "b", "c"})}
    copied = ast.parse('def f(x: Literal["b", "a"]) -> None: ...').body[0].args.args[0].annotation  # type: ignore
    assert _values(copied, choices) in set(choices.values())
