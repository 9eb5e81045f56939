"""Every choice list of the product is declared once: no two module-level `X = Literal[...]` aliases in raso/ have
the same values, and no Literal written inline repeats one of them (it must name the alias, e.g. from
raso.choices); no module of raso/, harnesses/ or experiments/ copies a list of raso.choices as a tuple of strings
(it reads `choices_of(...)`), nor spells one of its values another way (`rasu_raw` for `rasu-raw`)."""

from __future__ import annotations

import ast
from pathlib import Path

RASO = Path(__file__).resolve().parent.parent / "raso"
PACKAGES = ("raso", "harnesses", "experiments")


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
    assert {"RetrievalKind", "InitMode", "UpdateMode", "FailureKind", "Outcome", "Split", "GateMode"} <= set(choices)


def _normalized(value: object) -> object:
    return value.replace("_", "-") if isinstance(value, str) else value


def _string_lists(tree: ast.Module) -> list[tuple[int, list[str]]]:
    """Module-level tuples and lists of two or more string constants, with their line."""
    found = []
    for stmt in tree.body:
        value = getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(value, (ast.Tuple, ast.List)):
            items = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(items) == len(value.elts) >= 2:
                found.append((stmt.lineno, items))
    return found


def _copies(tree: ast.Module, choices: dict[str, frozenset[object]]) -> list[str]:
    lists = {frozenset(_normalized(v) for v in values): name for name, values in choices.items()}
    spelling = {_normalized(v): v for values in choices.values() for v in values if isinstance(v, str)}
    problems = []
    for line, items in _string_lists(tree):
        if frozenset(_normalized(v) for v in items) in lists:
            problems.append(f"{line}: copies {lists[frozenset(_normalized(v) for v in items)]}")
        problems += [f"{line}: {v!r} spells {spelling[_normalized(v)]!r}" for v in items
                     if _normalized(v) in spelling and spelling[_normalized(v)] != v]
    return problems


def test_no_module_copies_a_choice_list_or_respells_a_choice() -> None:
    choices = _module_aliases(ast.parse((RASO / "choices.py").read_text(encoding="utf-8")), {})
    root = RASO.parent
    problems = [f"{path.relative_to(root)}:{problem}" for package in PACKAGES
                for path in sorted((root / package).rglob("*.py")) if path != RASO / "choices.py"
                for problem in _copies(ast.parse(path.read_text(encoding="utf-8")), choices)]
    assert not problems, problems


def test_the_copy_check_finds_a_tuple_and_a_respelled_value() -> None:
    choices = {"Split": frozenset({"train", "val", "test"}), "UpdateMode": frozenset({"rasu", "rfsu", "rasu-raw"})}
    tree = ast.parse('SPLIT_NAMES = ("train", "val", "test")\nMETHODS = ("rasu", "rasu_raw", "gepa")\nOK = ("a", "b")\n')
    assert _copies(tree, choices) == ["1: copies Split", "2: 'rasu_raw' spells 'rasu-raw'"]


def test_the_check_finds_a_copied_list(tmp_path: Path) -> None:
    choices = _module_aliases(ast.parse('K = Literal["a", "b"]\nM = Literal[K, "c"]\n'), {})
    assert choices == {"K": frozenset({"a", "b"}), "M": frozenset({"a", "b", "c"})}
    copied = ast.parse('def f(x: Literal["b", "a"]) -> None: ...').body[0].args.args[0].annotation  # type: ignore
    assert _values(copied, choices) in set(choices.values())
