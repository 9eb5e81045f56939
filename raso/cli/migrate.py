"""`raso migrate PATH`: convert, once, a configuration file or a run directory written by an older RASO to today's
formats. The rest of the code reads only today's formats (it refuses the old ones with a line naming this command).

What it converts:

- options of configuration format 1 (flat names: `epochs`, `agent_max_steps`, `k`, `init = "rfsi"`, ...) to format 2
  (nested sections: `schedule.epochs`, `agent.max_steps`, `retrieval.k`, `init.method`), in a config file (.toml,
  .yaml/.yml, .json; an experiment config's `optimize` table, `settings` and `methods` too) and in every
  `config.resolved.json` / `config.resolved.yaml` below a directory;
- options that moved between sections when "backend" stopped naming three things (`agent.backend` ->
  `program.name`, `agent.command` -> `program.command.template`, the external sandbox limits -> `program.*`,
  `execution.backend` -> `execution.executor`; `MOVED_OPTIONS`), in the same files;
- rollouts saved before `outcome` existed (`failure_kind` and `model_unusable`) to their `outcome`, in every
  `trajectories/` folder below a directory (a run directory, an evaluation's output, an experiment's results).

A config file's original is kept beside it as `NAME.bak` (a YAML or TOML file's comments are in that copy only);
files in a directory are rewritten in place, each atomically, with nothing lost (the new fields follow from the old
ones). Converted files are checked to read back under today's models before anything is written. Links are never
followed and every file read is bounded. Running it again changes nothing. A run directory it converts is locked
as every command writing into a run locks it (raso.engine.run_dir.RunLock): one in use is refused, naming its holder.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
import yaml
from pydantic import ValidationError

from raso.engine.config import (
    CORPUS_KEY,
    FORMAT_VERSION,
    ConfigError,
    nested,
    validate,
)
from raso.fileio import atomic_write_text
from raso.harness import Rollout
from raso.safe_files import MiB, UnsafePathError, list_files, read_text

#: Format-1 (flat) option names and the dotted keys they became in format 2 (`adapt` set both steps' flag).
FORMAT1_KEYS: dict[str, tuple[str, ...]] = {
    "model": ("models.target",), "optimizer_model": ("models.optimizer",), "api_base": ("models.api_base",),
    "optimizer_api_base": ("models.optimizer_api_base",), "structured_output": ("models.structured_output",),
    "optimizer_structured_output": ("models.optimizer_structured_output",), "prices": ("models.prices",),
    "agent_mode": ("agent.mode",), "agent_max_steps": ("agent.max_steps",), "agent_max_tokens": ("agent.max_tokens",),
    "adapt": ("init.adapt", "update.adapt"), "num_requirements": ("init.num_requirements",),
    "chunk_size": ("update.chunk_size",), "init_skill_max_chars": ("init.skill_max_chars",),
    "index": ("retrieval.index",), "allow_unfiltered_index": ("retrieval.allow_unfiltered_index",),
    "k": ("retrieval.k",),
    **{name: (f"schedule.{name}",) for name in ("epochs", "minibatch", "max_iterations", "train_limit", "val_limit",
                                                "test", "test_limit", "seed", "workers")},
    "budget_rollouts": ("budget.rollouts",), "budget_usd": ("budget.usd",),
    **{name: (f"budget.{name}",) for name in ("infra_retries", "infra_retry_wait_s", "call_attempts",
                                              "call_retry_max_wait_s")},
}
#: Options that moved between sections within format 2 when "backend" stopped naming three things (issue 38): the
#: external agent program and its sandbox limits left `agent` for `program`, the executor got its own name.
MOVED_OPTIONS: dict[str, str] = {
    "agent.backend": "program.name", "agent.command": "program.command.template",
    "agent.skills_dir": "program.command.skills_dir", "agent.cpu_seconds": "program.cpu_seconds",
    "agent.memory_mb": "program.memory_mb", "agent.disk_mb": "program.disk_mb",
    "agent.external_wall_s": "program.wall_s", "execution.backend": "execution.executor",
}
#: Experiment method names of the underscore spelling, now raso's mode names (raso.choices.InitMode/UpdateMode).
RENAMED_METHODS = {"rasi_raw": "rasi-raw", "rasu_raw": "rasu-raw"}
#: The rollout fields `outcome` replaced.
ROLLOUT_FIELDS_BEFORE_OUTCOME = ("failure_kind", "model_unusable")
RESOLVED_CONFIG_NAMES = ("config.resolved.json", "config.resolved.yaml")
MAX_FILE_BYTES = 256 * MiB
MAX_FILES = 1_000_000


class MigrateError(ValueError):
    """A path that cannot be converted; the message names it and why (nothing was written)."""


# ---------------------------------------------------------------------------------------------- options
def is_format1(options: Mapping[str, Any]) -> bool:
    """Whether `options` (one run's options) still use format-1 names."""
    applied = options.get("quick_defaults_applied")
    return (options.get("format_version") == 1 or any(key in FORMAT1_KEYS for key in options)
            or (isinstance(applied, list) and any(str(name) in FORMAT1_KEYS for name in applied)))


def _dotted(name: str) -> tuple[str, ...]:
    return FORMAT1_KEYS.get(name, (name,))


def _pop_path(tree: dict[str, Any], path: list[str]) -> tuple[bool, Any]:
    node: Any = tree
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and path[-1] in node:
        return True, node.pop(path[-1])
    return False, None


def moved_to_current(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """`options` (nested sections) with the options of `MOVED_OPTIONS` under their new keys, or None when none is
    there. A section left empty by the move is dropped; a new key that is already set is kept (the old one dropped)."""
    out = copy.deepcopy(dict(options))
    moved = False
    for old, new in MOVED_OPTIONS.items():
        found, value = _pop_path(out, old.split("."))
        if not found:
            continue
        moved = True
        node = out
        *parents, leaf = new.split(".")
        for part in parents:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node.setdefault(leaf, value)
    applied = out.get("quick_defaults_applied")
    if isinstance(applied, list) and any(str(name) in MOVED_OPTIONS for name in applied):
        out["quick_defaults_applied"] = [MOVED_OPTIONS.get(str(name), name) for name in applied]
        moved = True
    if not moved:
        return None
    for section in ("agent", "execution"):
        if out.get(section) == {}:
            del out[section]
    return out


def options_to_format2(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` (format 1, flat) as format 2: nested sections, `format_version` 2. Keys of both formats (the
    harness, the run directory, a section given as a table) are kept; word sections (`init = "rfsi"`) become
    their table (`init.method`)."""
    flat: dict[str, Any] = {}
    for key, value in options.items():
        if key == "format_version":
            continue
        if key == "quick_defaults_applied" and isinstance(value, list):
            flat[key] = [target for name in value for target in _dotted(str(name))]
            continue
        for target in _dotted(key):
            flat[target] = copy.deepcopy(value)
    out = nested(flat)
    return {"format_version": FORMAT_VERSION, **(moved_to_current(out) or out)}


def setting_to_format2(setting: Mapping[str, Any]) -> dict[str, Any]:
    """An experiment setting (one sweep point's overrides, flat keys) with its format-1 names dotted."""
    return {MOVED_OPTIONS.get(target, target): value for key, value in setting.items() for target in _dotted(key)}


def _checked_options(options: dict[str, Any], where: str) -> dict[str, Any]:
    """`options` if they read as today's configuration, else MigrateError naming what does not."""
    try:
        validate({k: v for k, v in options.items() if k != CORPUS_KEY}, where)
    except ConfigError as exc:
        raise MigrateError(f"{where} does not read as a format-{FORMAT_VERSION} configuration after converting; "
                           f"nothing was written:\n{exc}") from None
    return options


def config_to_format2(data: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """A config file's mapping in format 2, or None when nothing in it needs converting. An experiment config (an
    `optimize` table beside other keys) has its `optimize` table, `settings` and `methods` converted."""
    if "optimize" in data and isinstance(data["optimize"], Mapping):
        out = dict(data)
        optimize = data["optimize"]
        if is_format1(optimize):
            out["optimize"] = options_to_format2(optimize)
        elif (moved := moved_to_current(optimize)) is not None:
            out["optimize"] = moved
        settings = data.get("settings")
        if isinstance(settings, list):
            out["settings"] = [setting_to_format2(s) if isinstance(s, Mapping) else s for s in settings]
        methods = data.get("methods")
        if isinstance(methods, list):
            out["methods"] = [_renamed_method(m) if isinstance(m, str) else m for m in methods]
        return out if out != data else None
    if not is_format1(data):
        moved = moved_to_current(data)
        return None if moved is None else _checked_options(moved, where)
    return _checked_options(options_to_format2(data), where)


def _renamed_method(name: str) -> str:
    for old, new in RENAMED_METHODS.items():
        name = name.replace(old, new)
    return name


# ---------------------------------------------------------------------------------------------- rollouts
def rollout_to_current(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """A saved rollout with `outcome` in place of `failure_kind` and `model_unusable`, or None when it has
    `outcome` already (or is no rollout)."""
    if "outcome" in row or not any(name in row for name in ROLLOUT_FIELDS_BEFORE_OUTCOME):
        return None
    out = dict(row)
    kind, unusable = out.pop("failure_kind", None), out.pop("model_unusable", False)
    if kind == "agent":
        out["outcome"] = "agent_error"
    elif kind is not None:
        out["outcome"] = kind
    elif unusable:  # a crash recorded without a kind: its model could not be used (never counted)
        out["outcome"] = "unusable"
    else:
        out["outcome"] = "agent_error" if out.get("error") else "ok"
    return out


def _checked_rollout(row: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        Rollout.model_validate(row)
    except ValidationError as exc:
        raise MigrateError(f"{where}: a rollout does not read after converting; nothing was written: "
                           f"{exc.errors()[0].get('msg', 'invalid')}") from None
    return row


# ---------------------------------------------------------------------------------------------- files
@dataclass
class Report:
    """What a migration changed (relative paths), and what it left alone and why."""

    changed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    backup: Path | None = None

    def lines(self, path: Path, dry_run: bool) -> list[str]:
        verb = "would convert" if dry_run else "converted"
        if not self.changed:
            out = [f"{path}: nothing to migrate (already in today's formats)"]
        else:
            out = [f"{path}: {verb} {len(self.changed)} file(s): " + ", ".join(self.changed[:8])
                   + (f", ... ({len(self.changed) - 8} more)" if len(self.changed) > 8 else "")]
        if self.backup is not None:
            out.append(f"the original is kept as {self.backup}")
        out.extend(f"left alone: {item}" for item in self.skipped)
        return out


def _read(path: Path) -> str:
    try:
        return read_text(path, MAX_FILE_BYTES)
    except (UnsafePathError, UnicodeDecodeError, OSError) as exc:
        raise MigrateError(f"cannot read {path}: {exc}") from None


def _dump(data: Mapping[str, Any], suffix: str) -> str:
    if suffix == ".toml":
        return tomli_w.dumps(_without_none(data))
    if suffix in (".yaml", ".yml"):
        return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True)
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _without_none(data: Any) -> Any:
    """TOML has no null: a None option is its default, so it is left out."""
    if isinstance(data, Mapping):
        return {k: _without_none(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_without_none(v) for v in data]
    return data


def _parse(path: Path, text: str) -> Any:
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            return tomllib.loads(text)
        if suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise MigrateError(f"config file {path} is not valid {suffix.lstrip('.').upper()}: {exc}") from None


def migrate_config_file(path: Path, *, dry_run: bool = False) -> Report:
    """Convert one config file in place, keeping the original as `NAME.bak`."""
    report = Report()
    text = _read(path)
    data = _parse(path, text)
    if not isinstance(data, dict):
        raise MigrateError(f"config file {path}: expected a table/mapping of options, got {type(data).__name__}")
    converted = config_to_format2(data, str(path))
    if converted is None:
        return report
    report.changed.append(path.name)
    if dry_run:
        return report
    backup = path.with_name(path.name + ".bak")
    if backup.exists() or backup.is_symlink():
        raise MigrateError(f"{backup} exists already: move it away first (it would be replaced by the original)")
    atomic_write_text(backup, text)
    atomic_write_text(path, _dump(converted, path.suffix.lower()))
    report.backup = backup
    return report


def _jsonl_rows(text: str) -> list[Any]:
    rows: list[Any] = []
    for line in text.splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line (a killed append): kept as it is
                rows.append(line)
    return rows


def _convert_rollout_file(path: Path, where: str) -> str | None:
    """The new text of a trajectory file (one rollout as JSON, or rows of JSON lines), or None if unchanged."""
    text = _read(path)
    if path.suffix == ".jsonl":
        rows = _jsonl_rows(text)
        changed = False
        lines = []
        for row in rows:
            new = rollout_to_current(row) if isinstance(row, dict) else None
            if new is not None:
                changed = True
                lines.append(json.dumps(_checked_rollout(new, where), ensure_ascii=False))
            else:
                lines.append(row if isinstance(row, str) else json.dumps(row, ensure_ascii=False))
        return "\n".join(lines) + "\n" if changed else None
    try:
        row = json.loads(text)
    except json.JSONDecodeError:
        return None  # not a rollout file
    new = rollout_to_current(row) if isinstance(row, dict) else None
    return None if new is None else json.dumps(_checked_rollout(new, where), indent=1, ensure_ascii=False)


def _convert_resolved_config(path: Path, where: str) -> str | None:
    text = _read(path)
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise MigrateError(f"{where} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        return None
    record = {CORPUS_KEY: data[CORPUS_KEY]} if CORPUS_KEY in data else {}
    plain = {k: v for k, v in data.items() if k != CORPUS_KEY}
    if is_format1(data):
        options = _checked_options(options_to_format2(plain), where)
    elif (moved := moved_to_current(plain)) is not None:
        options = _checked_options(moved, where)
    else:
        return None
    converted = {**options, **record}
    if path.suffix == ".json":
        return json.dumps(converted, indent=1, ensure_ascii=False, default=str)
    return yaml.safe_dump(converted, sort_keys=False, allow_unicode=True)


def migrate_directory(folder: Path, *, dry_run: bool = False) -> Report:
    """Convert every resolved config and every saved rollout below `folder` (links not followed). All files are
    converted in memory and checked first; only then is anything written."""
    report = Report()
    files, more = list_files(folder, MAX_FILES)
    if more:
        raise MigrateError(f"{folder} holds more than {MAX_FILES:,} files: migrate its run directories one by one")
    pending: dict[Path, str] = {}
    for relative in files:
        parts = relative.split("/")
        name = parts[-1]
        convert: Callable[[Path, str], str | None] | None = None
        if name in RESOLVED_CONFIG_NAMES:
            convert = _convert_resolved_config
        elif "trajectories" in parts[:-1] and (name.endswith(".json") or name.endswith(".rollouts.jsonl")):
            convert = _convert_rollout_file
        if convert is None:
            continue
        new = convert(folder / relative, relative)
        if new is not None:
            pending[folder / relative] = new
            report.changed.append(relative)
    if not dry_run:
        with _run_dirs_locked(folder, pending):
            for path, text in pending.items():
                atomic_write_text(path, text)
    return report


@contextmanager
def _run_dirs_locked(folder: Path, paths: Iterable[Path]) -> Iterator[None]:
    """Hold the lock of every run directory (a folder with a checkpoint.json, at or below `folder`) that holds
    one of `paths`, as any command writing into a run does; MigrateError naming the holder of a busy one."""
    from raso.engine.run_dir import RunDir
    from raso.errors import RunError

    roots: set[Path] = set()
    for path in paths:
        for parent in path.parents:
            if RunDir(parent).exists():
                roots.add(parent)
                break
            if parent == folder:
                break
    with ExitStack() as stack:
        try:
            for root in sorted(roots):
                stack.enter_context(RunDir(root).lock("migrate"))
        except RunError as exc:
            raise MigrateError(f"{exc} (nothing was converted)") from None
        yield


def migrate(path: str | Path, *, dry_run: bool = False) -> Report:
    """Convert a config file or a directory (see the module's docstring). MigrateError for a path that cannot be
    converted (nothing written)."""
    path = Path(path)
    if path.is_symlink():
        raise MigrateError(f"{path} is a symbolic link: give the file or folder it points to")
    if path.is_dir():
        return migrate_directory(path, dry_run=dry_run)
    if path.is_file():
        if path.suffix.lower() not in (".toml", ".yaml", ".yml", ".json"):
            raise MigrateError(f"{path}: not a config file (.toml, .yaml, .yml, .json) nor a directory")
        return migrate_config_file(path, dry_run=dry_run)
    raise MigrateError(f"{path} does not exist")


# ---------------------------------------------------------------------------------------------- command
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "migrate",
        help="convert a config file or run directory of an older RASO to today's formats (once)",
        description="Convert a config file (.toml, .yaml, .json) or a directory (a run directory, an evaluation's "
        "output, an experiment's results) written by an older RASO to today's formats: flat (format-1) options "
        "to nested sections, rollouts saved before `outcome` to their outcome. A config file's original is kept "
        "as NAME.bak. Running it again changes nothing.",
    )
    parser.add_argument("path", help="a config file or a directory")
    parser.add_argument("--dry-run", action="store_true", help="only say what would be converted")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        report = migrate(args.path, dry_run=args.dry_run)
    except MigrateError as exc:
        print(f"raso migrate: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report.lines(Path(args.path), args.dry_run)))
    return 0


__all__ = ["FORMAT1_KEYS", "MOVED_OPTIONS", "MigrateError", "Report", "config_to_format2", "is_format1", "migrate", "moved_to_current",
           "options_to_format2", "rollout_to_current"]
