"""The one loader of RASO's prompt templates: agent, optimizer, dreamer and gateway prompts alike.

A template is a `.md` file that marks a slot as ``{{name}}``. Values are inserted verbatim and never
re-scanned, so text that contains braces, dollars or ``{{...}}`` (skills, code, observations, model output)
cannot alter the template.

A `PromptLibrary` finds a template by file name in an ordered list of folders; the first folder that has the
file wins. The package defaults live beside the modules that use them (`raso/agent/prompts`,
`raso/optimizer/prompts`, `raso/retrieval/prompts`, `raso/llm/prompts`), and their file names are unique
across those folders. `PromptLibrary.for_harness(harness)` puts the harness's own `prompts/` folder first, so
a harness replaces any prompt by shipping a file of the same name there.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypedDict

_PACKAGE = Path(__file__).resolve().parent
DEFAULT_PROMPT_DIRS: tuple[Path, ...] = (
    _PACKAGE / "agent" / "prompts",
    _PACKAGE / "optimizer" / "prompts",
    _PACKAGE / "retrieval" / "prompts",
    _PACKAGE / "llm" / "prompts",
)
HARNESS_PROMPTS_FOLDER = "prompts"
_SLOT = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class PromptNotFoundError(FileNotFoundError):
    """No folder of the library has a template of that name."""


class PromptSlotError(ValueError):
    """A template needs a value that was not given, or a harness override uses a slot its default lacks."""


def slots_of(text: str) -> set[str]:
    """The slot names a template text uses."""
    return {m.group(1) for m in _SLOT.finditer(text)}


def _fill(text: str, values: dict[str, Any], *, name: str = "template") -> str:
    """`text` with every ``{{slot}}`` replaced by ``str(values[slot])`` in one pass (values are never re-scanned)."""
    missing = sorted(slots_of(text) - set(values))
    if missing:
        raise PromptSlotError(f"prompt template {name!r} needs values for: {', '.join(missing)}")
    return _SLOT.sub(lambda m: str(values[m.group(1)]), text)


class _PickledLibrary(TypedDict):
    """A pickled PromptLibrary: its folders and every template's text."""

    folders: tuple[Path, ...]
    texts: dict[str, str]


class PromptLibrary:
    """Templates looked up by file name in `folders`, first match wins. Thread-safe; files are read once."""

    def __init__(self, folders: Iterable[Path | str] = DEFAULT_PROMPT_DIRS) -> None:
        self.folders: tuple[Path, ...] = tuple(Path(f) for f in folders)
        if not self.folders:
            raise ValueError("a PromptLibrary needs at least one folder")
        self._texts: dict[str, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_harness(cls, harness: Any, defaults: Sequence[Path | str] = DEFAULT_PROMPT_DIRS) -> "PromptLibrary":
        """The library of `harness` (an instance or class with `resource_dir`): its `prompts/` folder, then the
        defaults. Every `.md` file there must replace a default template and use only slots that default has,
        so a misspelt file or slot name fails here, before any model call, rather than being silently ignored
        or failing half-way through a run."""
        resource_dir = getattr(harness, "resource_dir", None)
        if resource_dir is None:
            raise ValueError(f"{harness!r} has no resource_dir, so it has no prompts folder")
        defaults_library = cls(defaults)
        own = Path(resource_dir) / HARNESS_PROMPTS_FOLDER
        if not own.is_dir():
            return defaults_library
        known = defaults_library.names()
        for path in sorted(own.glob("*.md")):
            if path.name not in known:
                raise PromptNotFoundError(
                    f"{path} overrides no prompt: there is no default template {path.name!r} "
                    f"(the defaults are {', '.join(sorted(known))})")
            extra = sorted(slots_of(path.read_text(encoding="utf-8")) - defaults_library.slots(path.name))
            if extra:
                allowed = ", ".join(sorted(defaults_library.slots(path.name))) or "none"
                raise PromptSlotError(f"{path} uses slot(s) {', '.join(extra)} that {path.name!r} is never given "
                                      f"(its slots: {allowed})")
        return cls((own, *defaults_library.folders))

    def names(self) -> set[str]:
        """File names of every template the library can find."""
        return {p.name for folder in self.folders if folder.is_dir() for p in folder.glob("*.md")}

    def path(self, name: str) -> Path:
        """The file that template `name` (e.g. "agent_system.md") is read from."""
        for folder in self.folders:
            candidate = folder / name
            if candidate.is_file():
                return candidate
        raise PromptNotFoundError(f"no prompt template {name!r} in any of: {', '.join(map(str, self.folders))}")

    def template(self, name: str) -> str:
        """The raw text of template `name`, slots unfilled."""
        with self._lock:
            text = self._texts.get(name)
        if text is None:
            text = self.path(name).read_text(encoding="utf-8")
            with self._lock:
                self._texts[name] = text
        return text

    def slots(self, name: str) -> set[str]:
        return slots_of(self.template(name))

    def render(self, name: str, **values: object) -> str:
        """Template `name` with its ``{{slot}}`` markers filled, stripped, ending in one newline.
        A slot without a value raises PromptSlotError; values for slots the template lacks are ignored
        (a harness override may leave a slot out)."""
        return _fill(self.template(name), values, name=name).strip() + "\n"

    def __getstate__(self) -> _PickledLibrary:
        """Pickled with every template read, so a library sent to a rollout worker (raso.execution) needs
        none of these folders there."""
        texts = {name: self.template(name) for name in self.names()}
        return {"folders": self.folders, "texts": texts}

    def __setstate__(self, state: _PickledLibrary) -> None:
        self.folders = state["folders"]
        self._texts = dict(state["texts"])
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PromptLibrary({[str(f) for f in self.folders]!r})"


DEFAULT_PROMPTS = PromptLibrary()


def render(name: str, **values: object) -> str:
    """Template `name` from the package defaults, filled (see PromptLibrary.render)."""
    return DEFAULT_PROMPTS.render(name, **values)


__all__ = ["DEFAULT_PROMPTS", "DEFAULT_PROMPT_DIRS", "PromptLibrary", "PromptNotFoundError", "PromptSlotError",
           "render", "slots_of"]
