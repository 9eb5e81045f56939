"""The layer order of the code (docs/design.md §2), checked on every import statement by AST: at module level,
inside functions and under TYPE_CHECKING alike (a type-only import that reaches up still ties the layers).

Packages: corpus_tools <- raso <- harnesses <- experiments. Inside raso, `RASO_LAYERS` declares the order of its
modules and subpackages, lowest first; a module may import its own unit, a peer of its layer or anything below,
never above. A new subpackage or top-level module of raso must be given a layer here. Apart from the order, the
modules of the four packages import each other without a cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("corpus_tools", "raso", "harnesses", "experiments")

#: raso's units, lowest layer first; the units of one layer are peers.
RASO_LAYERS: tuple[tuple[str, ...], ...] = (
    ("raso.choices", "raso.errors", "raso.fileio", "raso.safe_files", "raso.prompts"),  # base modules
    ("raso.skill",),
    ("raso.llm",),  # the gateway: no harness, no skill
    ("raso.harness",),  # the harness protocol, its forms, the sandbox, the action grammar
    ("raso.retrieval",),
    ("raso.optimizer",),  # the algorithm steps, their context (RunContext) and protocols
    ("raso.agent", "raso.execution"),  # who runs a rollout, and where
    ("raso.engine",),  # the loop, its config, run directory and reports
    ("raso.api",),  # the only wiring
    ("raso.cli", "raso.testing"),
    ("raso",),  # the front door (raso/__init__.py)
)

#: Upward imports allowed for now (none left). An entry must still be found: remove it once its import is gone.
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()

#: Import cycles allowed for now (none left). An entry must still be found: remove it once it is gone.
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()


def module_files() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__) for every module of the four packages."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
            if "node_modules" in parts or any(part.startswith(".") for part in parts):
                continue
            is_init = parts[-1] == "__init__"
            modules[".".join(parts[:-1] if is_init else parts)] = (path, is_init)
    return modules


def imported_modules(module: str, is_init: bool, node: ast.Import | ast.ImportFrom,
                     known: dict[str, tuple[Path, bool]]) -> Iterator[str]:
    """The modules one import statement loads (relative imports resolved; `from pkg import sub` names `pkg.sub`)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        base = module.split(".") if is_init else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    yield target
    for alias in node.names:
        if f"{target}.{alias.name}" in known:
            yield f"{target}.{alias.name}"


def import_edges() -> dict[str, dict[str, int]]:
    """module -> {imported module of the four packages: line}, from every import statement in the module."""
    known = module_files()
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for module, (path, is_init) in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in imported_modules(module, is_init, node, known):
                inside_own_package = module.startswith(target + ".")  # a package's own __init__: already running
                if target.split(".")[0] in PACKAGES and target != module and not inside_own_package:
                    edges[module].setdefault(target, node.lineno)
    return edges


def raso_unit(module: str) -> tuple[int, str] | None:
    """(layer, unit) of a raso module: its most specific declared unit; None when no unit is declared."""
    best: tuple[int, str] | None = None
    for layer, units in enumerate(RASO_LAYERS):
        for unit in units:
            if (module == unit or module.startswith(unit + ".")) and (best is None or len(unit) > len(best[1])):
                best = (layer, unit)
    return best


def upward_imports() -> set[tuple[str, str, int]]:
    found = set()
    for module, targets in import_edges().items():
        for target, line in targets.items():
            package, target_package = PACKAGES.index(module.split(".")[0]), PACKAGES.index(target.split(".")[0])
            if target_package > package:
                found.add((module, target, line))
            elif target_package == package == PACKAGES.index("raso"):
                own, other = raso_unit(module), raso_unit(target)
                assert own is not None and other is not None  # test_every_raso_module_has_a_layer says which
                if other[0] > own[0]:
                    found.add((module, target, line))
    return found


def test_every_raso_module_has_a_layer() -> None:
    undeclared = sorted(m for m in module_files() if m.startswith("raso") and raso_unit(m) is None)
    assert not undeclared, f"give these a layer in RASO_LAYERS (docs/design.md §2): {undeclared}"


def test_imports_never_run_up_the_layers() -> None:
    found = upward_imports()
    unexpected = sorted(f"{m}:{line} imports {t}" for m, t, line in found if (m, t) not in KNOWN_UPWARD)
    assert not unexpected, "imports that reach up a layer:\n" + "\n".join(unexpected)
    gone = sorted(KNOWN_UPWARD - {(m, t) for m, t, _ in found})
    assert not gone, f"no longer imported, remove from KNOWN_UPWARD: {gone}"


def test_the_optimizer_and_the_harnesses_reach_nothing_above_them() -> None:
    """Finding 5 of issue 38, by name: the steps import RunContext and their protocols from their own package,
    harnesses take ConfigError from the base module (not the engine's config), the LLM layer never imports the
    harness (the action grammar lives beside the action space it compiles)."""
    edges = import_edges()
    optimizer_up = sorted(f"{m} -> {t}" for m, ts in edges.items() if m.startswith("raso.optimizer")
                          for t in ts if t.startswith(("raso.engine", "raso.agent", "raso.api")))
    harnesses_engine = sorted(f"{m} -> {t}" for m, ts in edges.items() if m.startswith("harnesses")
                              for t in ts if t.startswith("raso.engine"))
    llm_harness = sorted(f"{m} -> {t}" for m, ts in edges.items() if m.startswith("raso.llm")
                         for t in ts if t.startswith("raso.harness"))
    assert optimizer_up == [] and harnesses_engine == [] and llm_harness == []


def cycles(edges: dict[str, dict[str, int]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in list(edges):
        if root in index:
            continue
        work = [(root, iter(edges.get(root, {})))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, {}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def test_no_import_cycles() -> None:
    found = cycles(import_edges())
    unexpected = sorted(sorted(c) for c in found - KNOWN_CYCLES)
    assert not unexpected, f"modules that import each other (in-function and type-only imports count): {unexpected}"
    gone = sorted(sorted(c) for c in KNOWN_CYCLES - found)
    assert not gone, f"no longer a cycle, remove from KNOWN_CYCLES: {gone}"


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == {frozenset({"a", "b", "c"})}
    assert cycles({"a": {"b": 1}, "b": {}}) == set()


@pytest.mark.parametrize(("imports", "forbidden"), [
    ("import raso.optimizer.rasi, raso.optimizer.rasu, raso.optimizer.steps", ("raso.engine", "raso.agent")),
    ("import harnesses.tasks.folder", ("raso.engine", "raso.agent", "raso.optimizer")),
    ("import raso.llm.gateway", ("raso.harness", "raso.engine")),
])
def test_importing_a_lower_layer_loads_nothing_above_it(imports: str, forbidden: tuple[str, ...]) -> None:
    code = (f"import sys\n{imports}\n"
            f"print(sorted(m for m in sys.modules if m.startswith({forbidden!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
