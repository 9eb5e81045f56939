"""Drafting a harness's task description T and harness description H from its own code (as the paper makes H).

The optimizer model reads the harness package's `.py` and `.md` files (bounded, quoted as untrusted data),
a few facts from the harness object and some example tasks, and answers with both texts in one structured
reply. The drafts are written as `*.draft.md` beside (never over) the real `task_description.md` and
`harness_description.md`: a person reviews them, RASO never uses them by itself.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from raso.choices import Split, choices_of
from raso.fileio import atomic_write_text
from raso.harness import Harness, Task
from raso.llm.gateway import Gateway
from raso.prompts import DEFAULT_PROMPTS, PromptLibrary
from raso.safe_files import MiB, UnsafePathError, read_bytes

from .render import clip, profile_limits, quote_block

DESCRIBE_TEMPLATE = "harness_describe.md"
STAGE_DESCRIBE = "harness.describe"
OPTIMIZER_ROLE = "optimizer"
TASK_DRAFT = "task_description.draft.md"
HARNESS_DRAFT = "harness_description.draft.md"
# The texts being drafted are left out of what the model reads, so it describes the code, not the old text.
DRAFTED_FILES = ("task_description.md", "harness_description.md")
SOURCE_SUFFIXES = (".py", ".md")
MAX_SOURCE_BYTES = 4 * MiB  # one file read for a draft (it is clipped far below this anyway)


class DescribeLimits(BaseModel):
    """How much of the harness the model reads, and how long it may answer."""

    file_chars: int = Field(default=12_000, ge=200, description="one source file")
    total_chars: int = Field(default=60_000, ge=1_000, description="all source files together")
    max_files: int = Field(default=40, ge=1, description="source files read at most")
    example_tasks: int = Field(default=3, ge=0, description="example task instructions shown")
    example_chars: int = Field(default=600, ge=50, description="one example task instruction")
    reply_tokens: int = Field(default=4096, ge=64, description="the reply's token limit (the USD budget reserves it)")


def limits_for(gateway: Gateway) -> DescribeLimits:
    """The limits the optimizer model's profile sets (tighter for a small-context model) over the defaults."""
    return profile_limits(DescribeLimits, gateway.profile(OPTIMIZER_ROLE).describe_limits)


class HarnessDescriptionDrafts(BaseModel):
    # The model's reply. No docstring: a small model copies schema descriptions into its answer.
    task_description: str = Field(min_length=1, description="T: the objective and the exact answer format")
    harness_description: str = Field(
        min_length=1, description="H: commands/tools, file access, observations, budget, scoring")


class SourceFile(BaseModel):
    """One file the model reads: its path relative to the package and its (possibly clipped) text."""

    path: str
    text: str
    clipped: bool = False


class HarnessSources(BaseModel):
    """What the model is shown of a harness, and which files did not fit the limits."""

    root: Path
    files: list[SourceFile]
    omitted: list[str] = Field(default_factory=list)


MAX_OWN_INSTRUCTIONS = 5  # task instructions of a user's tasks folder read as sources


def _candidate_files(harness: Harness | type[Harness]) -> tuple[Path, list[Path]]:
    cls = harness if isinstance(harness, type) else type(harness)
    module_file = Path(inspect.getfile(cls)).resolve()
    root = module_file.parent
    if (root / "__init__.py").is_file():  # a package: all of it
        found = [p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES]
    else:  # a lone module beside unrelated files: only it
        found = [module_file]
    # a folder the class ships but that is not this harness's own (the `tasks` harness's example tasks)
    skipped = [root / name for name in getattr(cls, "describe_skip", ())]
    found = [p for p in found if not any(p.is_relative_to(folder) for folder in skipped)]
    resource_dir = Path(getattr(cls, "resource_dir", root)).resolve()
    if resource_dir.is_dir() and resource_dir != root:
        found += [p for p in resource_dir.glob("*.md")]
    # an instance whose resources are a user's folder (`tasks:PATH`): its notes and the tasks' instructions, never
    # their checks or solutions (they hold the answers, which a draft could carry into H)
    own_dir = Path(getattr(harness, "resource_dir", resource_dir)).resolve()
    own: set[Path] = set()
    if not isinstance(harness, type) and own_dir.is_dir() and own_dir not in (root, resource_dir):
        # a few instructions stand for the folder's tasks (a folder may hold thousands)
        own = {*own_dir.glob("*.md"), *sorted(own_dir.glob("*/instruction.md"))[:MAX_OWN_INSTRUCTIONS]}
        found += sorted(own)
    keep = []
    for path in found:
        parts = path.relative_to(root).parts if path.is_relative_to(root) else (path.name,)
        if any(part.startswith((".", "__pycache__")) for part in parts):
            continue
        if path.name in DRAFTED_FILES or path.name.endswith(".draft.md"):
            continue
        keep.append(path)
    # the class's own module first, then the user's folder (what the tasks are), then code before prose, tests last
    # (the first to go when space runs out)
    keep = sorted(set(keep), key=lambda p: (p != module_file, p not in own, p.name.startswith("test"),
                                            p.suffix != ".py", str(p)))
    return root, keep


def collect_sources(harness: Harness | type[Harness], limits: DescribeLimits | None = None) -> HarnessSources:
    """The harness's `.py` and `.md` files within `limits`: each clipped, those beyond the total omitted by name."""
    limits = limits or DescribeLimits()
    root, paths = _candidate_files(harness)
    files: list[SourceFile] = []
    omitted: list[str] = []
    used = 0
    for path in paths:
        name = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        room = min(limits.file_chars, limits.total_chars - used)
        if len(files) >= limits.max_files or room < 200:
            omitted.append(name)
            continue
        try:  # a user's folder may hold a link to any file here: it is never followed into the prompt
            text = read_bytes(path, MAX_SOURCE_BYTES).decode("utf-8", errors="replace").strip()
        except UnsafePathError:
            omitted.append(f"{name} (not read: a link, a special file or over {MAX_SOURCE_BYTES // MiB} MB)")
            continue
        shown = clip(text, room)
        files.append(SourceFile(path=name, text=shown, clipped=len(shown) < len(text)))
        used += len(shown)
    return HarnessSources(root=root, files=files, omitted=omitted)


def _splits(harness: Harness) -> dict[str, list[Task]] | str:
    """The harness's splits, or why they are not available (tasks may need data absent here; the code is not)."""
    try:
        return harness.splits()
    except Exception as exc:  # noqa: BLE001 - the description can still be drafted from the code
        return f"{type(exc).__name__}: {exc}"


def _facts(harness: Harness, splits: dict[str, list[Task]] | str) -> str:
    text = harness.text_form()
    lines = [f"- class: {type(harness).__module__}.{type(harness).__qualname__}",
             f"- max_steps (environment actions per task): {harness.max_steps}"]
    if text is not None:
        lines.append(f"- max_reply_tokens (agent reply length per turn): {text.max_reply_tokens}")
    if isinstance(splits, str):
        lines.append(f"- tasks per split: not available here ({clip(splits, 200)})")
    else:
        lines.append("- tasks per split: " + ", ".join(f"{k} {len(v)}" for k, v in splits.items()))
    return "\n".join(lines)


def _examples(splits: dict[str, list[Task]] | str, limits: DescribeLimits) -> str:
    tasks = [] if isinstance(splits, str) else [t for split in choices_of(Split) for t in splits.get(split, [])]
    if not tasks or not limits.example_tasks:
        return "(none available)"
    return "\n".join(quote_block("reference", clip(t.instruction, limits.example_chars), kind="task", id=t.id)
                     for t in tasks[: limits.example_tasks])


def describe_messages(harness: Harness, sources: HarnessSources, limits: DescribeLimits,
                      *, prompts: PromptLibrary | None = None) -> list[dict[str, Any]]:
    """The exact messages sent to the optimizer model (tests and logs inspect them)."""
    files = "\n".join(
        quote_block("reference", f.text, kind="file", path=f.path + (" (clipped)" if f.clipped else ""))
        for f in sources.files) or "(no source files found)"
    omitted = f"Not shown (over the size limit): {', '.join(sources.omitted)}" if sources.omitted else ""
    splits = _splits(harness)
    content = (prompts or DEFAULT_PROMPTS).render(
        DESCRIBE_TEMPLATE, harness_name=harness.name, facts=_facts(harness, splits), files=files, omitted=omitted,
        examples=_examples(splits, limits))
    return [{"role": "user", "content": content.strip()}]


def draft_descriptions(gateway: Gateway, harness: Harness, *, limits: DescribeLimits | None = None,
                       prompts: PromptLibrary | None = None) -> HarnessDescriptionDrafts:
    """T and H drafted by the gateway's optimizer model from the harness's own code (one structured call)."""
    limits = limits or limits_for(gateway)
    messages = describe_messages(harness, collect_sources(harness, limits), limits, prompts=prompts)
    return gateway.structured(OPTIMIZER_ROLE, messages, HarnessDescriptionDrafts, stage=STAGE_DESCRIBE,
                              max_tokens=limits.reply_tokens)


class DraftsExistError(FileExistsError):
    """Draft files from an earlier run are in the way (they may hold a person's edits)."""


def draft_paths(out_dir: str | Path) -> tuple[Path, Path]:
    """Where the T and H drafts go in `out_dir`."""
    return Path(out_dir) / TASK_DRAFT, Path(out_dir) / HARNESS_DRAFT


def check_drafts_absent(out_dir: str | Path) -> None:
    """Raise DraftsExistError if `out_dir` holds drafts (checked before spending a model call on new ones)."""
    existing = [str(p) for p in draft_paths(out_dir) if p.exists()]
    if existing:
        raise DraftsExistError(f"draft(s) already exist: {', '.join(existing)}; review and remove them first, "
                               "or replace them explicitly")


def write_drafts(drafts: HarnessDescriptionDrafts, out_dir: str | Path, *, replace: bool = False) -> list[Path]:
    """Write `task_description.draft.md` and `harness_description.draft.md` into `out_dir`. The real
    description files are never touched; earlier drafts are replaced only with `replace=True`."""
    if not replace:
        check_drafts_absent(out_dir)
    task_path, harness_path = draft_paths(out_dir)
    return [atomic_write_text(task_path, drafts.task_description.strip() + "\n"),
            atomic_write_text(harness_path, drafts.harness_description.strip() + "\n")]
