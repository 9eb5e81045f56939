"""A new harness package from the template (`harnesses/_template`): copied, with its classes and name renamed.

The template is read as files, never imported (raso does not import concrete harnesses). Nothing is
overwritten: the package folder must not exist, and a copy that fails half-way is removed again.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import shutil
from pathlib import Path

from pydantic import BaseModel

from raso.fileio import atomic_write_text

from .registry import available_harnesses

TEMPLATE_PACKAGE = "_template"
TEMPLATE_CLASS_PREFIX = "Template"
TEMPLATE_NAME = "template"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
ENTRY_POINT_FILE = "entry_point.toml"
_RENAMED_SUFFIXES = (".py", ".md")
_SKIPPED = ("__pycache__", "README.md")  # the copy gets its own README (below)


class HarnessScaffoldError(ValueError):
    """The harness cannot be created as asked (bad name, folder exists, template missing); nothing was written."""


class ScaffoldResult(BaseModel):
    """What `scaffold_harness` made: the package, its import target and the entry point that registers it."""

    name: str
    package_dir: Path
    module: str
    import_root: Path  # the folder that must be on sys.path for `module` to import
    class_name: str
    target: str
    entry_point: str
    files: list[Path]


def template_dir() -> Path:
    """The template package's folder, found without importing it."""
    spec = importlib.util.find_spec("harnesses")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / TEMPLATE_PACKAGE
        if (candidate / "harness.py").is_file():
            return candidate
    raise HarnessScaffoldError("the harness template (harnesses/_template) is not installed with raso")


def check_name(name: str) -> None:
    """Raise HarnessScaffoldError unless `name` can be both a harness name and a Python package name."""
    if not NAME_PATTERN.fullmatch(name) or keyword.iskeyword(name):
        hint = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
        hint = hint if hint and hint[0].isalpha() and not keyword.iskeyword(hint) else "my_harness"
        raise HarnessScaffoldError(
            f"bad harness name {name!r}: use lowercase letters, digits and underscores, starting with a letter, "
            f"and not a Python keyword (it is also the package name), e.g. {hint!r}")
    registered = available_harnesses()
    if name in registered:
        raise HarnessScaffoldError(f"a harness named {name!r} is already registered ({registered[name]}); "
                                   "choose another name")


def class_prefix(name: str) -> str:
    """`my_shop` -> `MyShop`."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def package_module(parent: Path, name: str) -> str:
    """The dotted import path of package `name` created in `parent`: enclosing packages (folders with an
    `__init__.py`) are prefixed, so `harnesses/my_shop` in a checkout is `harnesses.my_shop`."""
    parts = [name]
    folder = parent.resolve()
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def rename(text: str, name: str) -> str:
    """Template identifiers in `text` replaced by those of harness `name`."""
    prefix = class_prefix(name)
    text = re.sub(rf"\b{TEMPLATE_CLASS_PREFIX}(?=Harness\b|Env\b| harness\b)", prefix, text)
    return text.replace(f'"{TEMPLATE_NAME}"', f'"{name}"').replace(f"`{TEMPLATE_NAME}`", f"`{name}`")


def entry_point_snippet(name: str, target: str) -> str:
    return f'[project.entry-points."raso.harnesses"]\n{name} = "{target}"\n'


def _readme(result: ScaffoldResult) -> str:
    return f"""# {result.class_name.removesuffix("Harness")} harness (`{result.name}`)

Made from RASO's harness template (see docs/adding-a-harness.md). Replace the document-question game in
`harness.py` and `tasks.json` with your environment, then make `task_description.md` (T),
`harness_description.md` (H) and `action_format.md` true to it (`raso harness describe {result.name}` drafts
T and H from the code for you to review).

Register it in the `pyproject.toml` of the project that holds this package, then reinstall (`pip install -e .`):

```toml
{result.entry_point.strip()}
```

Until then it loads by target, with `{result.import_root}` on the Python path:
`PYTHONPATH={result.import_root} raso harnesses {result.target}`.
"""


def scaffold_harness(name: str, parent: str | Path = ".", *, source: Path | None = None) -> ScaffoldResult:
    """Create package `parent/name` from the template. Raises HarnessScaffoldError (nothing written) for a bad
    or registered name, an existing folder or a missing template."""
    check_name(name)
    parent = Path(parent)
    if parent.exists() and not parent.is_dir():
        raise HarnessScaffoldError(f"{parent} is not a folder")
    package_dir = parent / name
    if package_dir.exists():
        raise HarnessScaffoldError(f"{package_dir} already exists; nothing was changed (choose another name or --dir)")
    source = source or template_dir()
    module = package_module(parent, name) if parent.exists() else name
    class_name = f"{class_prefix(name)}Harness"
    target = f"{module}:{class_name}"
    import_root = package_dir.resolve().parents[module.count(".")] if parent.exists() else parent.resolve()
    result = ScaffoldResult(name=name, package_dir=package_dir, module=module, import_root=import_root,
                            class_name=class_name, target=target,
                            entry_point=entry_point_snippet(name, target), files=[])
    package_dir.mkdir(parents=True)
    try:
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if path.is_dir() or any(part in _SKIPPED for part in relative.parts) or path.suffix == ".pyc":
                continue
            destination = package_dir / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix in _RENAMED_SUFFIXES:
                atomic_write_text(destination, rename(path.read_text(encoding="utf-8"), name))
            else:
                shutil.copyfile(path, destination)
            result.files.append(destination)
        result.files.append(atomic_write_text(package_dir / "README.md", _readme(result)))
        result.files.append(atomic_write_text(package_dir / ENTRY_POINT_FILE, result.entry_point))
    except BaseException:
        shutil.rmtree(package_dir, ignore_errors=True)  # we created it: a half-made package helps no one
        raise
    return result
