"""report.html: one self-contained page about a run (no network: styles, script and SVG plots inline).

Sections: the run at a glance, the candidate lineage, the final skill and the diff of every accepted candidate
against its parent, lessons with their corpus provenance, per-task scores with each trajectory one click away,
cost, and plots. Built only from files in the run directory, like report.md.

Everything that came from a model, a harness or the corpus is data: the template escapes every value
(Jinja2 autoescape), no value ever becomes a link target or an attribute other than a class or an id this
module makes, and the only markup that is not escaped is the page's own CSS/script and the SVG plots
matplotlib draws from numbers and fixed labels.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import io
import json
import re
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from raso.llm.ledger import PRICE_HINT, bucket_cost_text, cost_text, priced_usd

from .report_facts import (
    best_skill_warning,
    cost_plot_note,
    degradation_lines,
    priced_spend_in_curve,
    val_curve_figure,
)
from .run_dir import RunDir, atomic_write_text, read_jsonl
from .state import CandidateRecord, RunState

TEMPLATES = Path(__file__).resolve().parent / "templates"

#: How much of one observation / model reply a trajectory shows (the rest is cut from the middle).
OBSERVATION_CHARS = 900
REPLY_CHARS = 700
#: Steps shown per trajectory (the first and last ones when there are more).
MAX_STEPS = 40
#: Corpus text shown per quoted section.
QUOTE_CHARS = 4000

_SVG_SETTINGS = threading.Lock()  # held while matplotlib's process-wide SVG settings are changed
_BATCH = re.compile(r"^(s0_val|iter(\d{3,})_(train|val)|test_v(\d{3,}))$")
_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]{3,}")
_STOPWORDS = frozenset("""this that with from when then than them they their there these those what which will
would should could have been were your into each only also more most must very just like over such some same
always never before after while other about does done make made using used every first last next answer""".split())


#: The page's only script: a link to an id inside closed <details> opens them; the expand/collapse buttons.
#: It reads no value from the data. The page's Content-Security-Policy allows this script by its hash and no other.
PAGE_SCRIPT = """
(function () {
  function reveal(id) {
    var el = id && document.getElementById(id);
    if (!el) return;
    for (var node = el; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    el.scrollIntoView({block: "start"});
  }
  window.addEventListener("hashchange", function () { reveal(decodeURIComponent(location.hash.slice(1))); });
  document.addEventListener("DOMContentLoaded", function () {
    if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
    document.querySelectorAll("a[href^='#']").forEach(function (link) {
      link.addEventListener("click", function () { reveal(link.getAttribute("href").slice(1)); });
    });
    document.querySelectorAll("button[data-toggle]").forEach(function (button) {
      button.addEventListener("click", function () {
        var open = button.getAttribute("data-toggle") === "open";
        var scope = document.getElementById(button.getAttribute("data-scope"));
        scope.querySelectorAll("details").forEach(function (d) { d.open = open; });
      });
    });
  });
})();
"""


# ------------------------------------------------------------------ the template engine
def environment(*extra_template_dirs: Path) -> Any:
    """The Jinja2 environment of RASO's HTML pages: autoescape on for every template (values are data)."""
    import jinja2
    from markupsafe import Markup

    loader = jinja2.FileSystemLoader([*map(str, extra_template_dirs), str(TEMPLATES)])
    env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    digest = base64.b64encode(hashlib.sha256(PAGE_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    env.globals["page_script"] = Markup(PAGE_SCRIPT)
    env.globals["script_hash"] = f"sha256-{digest}"
    env.filters["num"] = fmt_number
    env.filters["usd"] = lambda v: "-" if v is None else f"${float(v):.4f}"
    env.filters["version"] = lambda v: "-" if v is None else f"v{int(v):03d}"
    return env


def fmt_number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def cut(text: Any, limit: int) -> str:
    """`text` at most about `limit` characters: the head and the tail, with what was cut said in the middle."""
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]}\n… [{len(text) - head - tail} characters cut] …\n{text[-tail:]}"


def svg_of(fig: Any) -> str:
    """A matplotlib figure as an inline <svg> element (text kept as text, no XML prolog, no timestamp)."""
    import matplotlib

    buf = io.StringIO()
    # rc_context changes process-wide settings: one figure at a time, so threads drawing side by side keep theirs
    with _SVG_SETTINGS, matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "raso-report"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


# ------------------------------------------------------------------ reading the run directory
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _config_value(cfg: dict[str, Any], name: str, default: Any = None) -> Any:
    """The value at dotted `name` of the recorded config (`default` when it holds none)."""
    node: Any = cfg
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _glance(cfg: dict[str, Any], state: RunState, ledger: dict[str, Any]) -> dict[str, Any]:
    def get(name: str, default: Any = None) -> Any:
        return _config_value(cfg, name, default)

    target = get("models.target")
    optimizer = get("models.optimizer") or target
    init_method = get("init.method")
    update_method = get("update.method")
    retrieval = get("retrieval.kind", default="-")
    uses_corpus = str(init_method).startswith("rasi") or str(update_method).startswith("rasu")
    schedule = {name: get(f"schedule.{name}") for name in
                ("epochs", "minibatch", "max_iterations", "train_limit", "val_limit", "test_limit", "seed", "workers")}
    schedule["K"] = get("retrieval.k")
    schedule["M"] = get("init.num_requirements")
    budgets = {"rollouts": get("budget.rollouts"), "USD": get("budget.usd"), "test USD": get("budget.test_usd")}
    tests = {score.label: score for score in state.test}
    totals = ledger.get("totals", {})
    profiles: list[tuple[str, Any, str]] = []
    for role, model in (("target", target), ("optimizer", optimizer)):
        if model and all(model != m for _, m, _ in profiles):
            profiles.append((role, model, _profile_summary(str(model))))
    return {
        "profiles": profiles,
        "harness": cfg.get("harness", "?"),
        "status": "finished" if state.phase == "done" else f"in progress (phase {state.phase})",
        "stop_reason": state.stop_reason,
        "target": target, "optimizer": optimizer,
        "init_method": init_method, "update_method": update_method,
        "retrieval": retrieval if uses_corpus else "none",
        "schedule": [(k, v) for k, v in schedule.items() if v is not None],
        "budgets": [(k, v if v else "none") for k, v in budgets.items() if k != "test USD" or v],
        "gate": _gate_rule(cfg),
        "holdout": state.holdout, "holdout_note": state.holdout_note,
        "s0_val": state.curve[0].best_val if state.curve else None,
        "best_version": state.current_version, "best_val": state.current_val,
        # when s0 stayed the best skill, its test score is the best skill's (the engine scores it once)
        "s0_test": tests.get("s0"),
        "best_test": tests.get("best") or (tests.get("s0") if state.current_version == 0 else None),
        "test_note": state.test_note or ("pending: the run has not reached its end" if state.phase != "done" else None),
        "iterations": state.iterations_done,
        "accepted": sum(1 for c in state.candidates if c.accepted), "candidates": len(state.candidates),
        "rollouts": state.rollouts_used, "train_rollouts": state.train_rollouts, "val_rollouts": state.val_rollouts,
        "test_rollouts": state.test_rollouts,
        "calls": totals.get("calls", 0), "cache_hits": totals.get("cache_hits", 0),
        "prompt_tokens": totals.get("prompt_tokens", 0), "completion_tokens": totals.get("completion_tokens", 0),
        "cost_usd": priced_usd(totals),  # the priced part: unpriced_calls says what it leaves out
        "unpriced_calls": int(totals.get("unpriced_calls", 0) or 0),
        "cost_text": bucket_cost_text(totals),
        "wall_time_s": state.wall_time_s, "resumes": state.resumes, "upgraded_from": state.upgraded_from,
        "started_at": state.started_at, "finished_at": state.finished_at,
    }


def _gate_rule(cfg: dict[str, Any]) -> dict[str, Any]:
    """The validation gate's rule as the run's config recorded it (a run from before gate modes: strict)."""
    recorded = cfg.get("gate")
    gate: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    mode = str(gate.get("mode", "strict"))
    level = gate.get("level", 0.05)
    rule = {
        "strict": "accepted when its val mean is strictly above the current skill's stored val mean",
        "paired": "the current skill is re-scored on the same val tasks in the same iteration; accepted when the "
                  "mean per-task difference (candidate - current) is above 0",
        "significant": f"paired, and the gain must be significant: one-sided sign-flip permutation test at level "
                       f"{level:g}; the interval is a paired bootstrap at {1 - 2 * float(level):.0%}",
    }.get(mode, mode)
    return {"mode": mode, "level": level, "rule": rule, "repeats": gate.get("rollouts_per_task", 1),
            "holdout": gate.get("val_holdout", 0)}


def _status(c: CandidateRecord) -> str:
    """accepted, rejected (by the gate), not evaluated (never reached the gate: identical to its parent, or the
    budget ran out) or no candidate (the proposal failed)."""
    if c.accepted:
        return "accepted"
    if c.version is None:
        return "no candidate"
    return "rejected" if c.candidate_val is not None else "not evaluated"


def _gate_rows(state: RunState) -> list[dict[str, Any]]:
    """Each candidate's gate decision: the rule, the scores compared, the statistic with its interval and
    p-value (paired modes), the val rollouts it cost, and the candidate's own model calls and USD."""
    rows = []
    for c in state.candidates:
        paired = c.incumbent_val is not None
        rows.append({
            "iteration": c.iteration, "version": c.version, "parent": c.current_version, "mode": c.gate_mode,
            "status": _status(c),
            "candidate_val": c.candidate_val,
            "incumbent_val": c.incumbent_val if paired else c.current_val,
            "incumbent_kind": "re-scored" if paired else "stored",
            "statistic": c.statistic, "interval": c.interval, "p_value": c.p_value,
            "gate_rollouts": c.gate_rollouts,
            "calls": sum(u.calls for u in c.cost.values()),
            "cost_text": cost_text(sum(u.cost_usd for u in c.cost.values()),
                                   sum(u.unpriced_calls for u in c.cost.values())),
            "reason": c.reason,
        })
    return rows


def _profile_summary(model: str) -> str:
    """What the model profile says the model can do (raso.llm.profiles), as the markdown report names it."""
    try:
        from raso.llm.profiles import profile_for

        return profile_for(model).summary()
    except (ImportError, ValueError) as exc:  # a profile module of another version, or an unknown model name
        return f"unknown ({exc})"


def _lineage(state: RunState) -> list[dict[str, Any]]:
    """The tree of skills: s0 at the root, each candidate under the skill it was proposed from."""
    s0_val = state.curve[0].best_val if state.curve else None
    root = {"version": 0, "label": "s0", "val": s0_val, "status": "initial", "reason": "the initial skill",
            "iteration": 0, "children": [], "best": state.current_version == 0, "gate": None}
    nodes: dict[int, dict[str, Any]] = {0: root}
    orphans: list[dict[str, Any]] = []
    for c in state.candidates:
        node: dict[str, Any] = {"version": c.version, "label": f"iteration {c.iteration}", "val": c.candidate_val,
                "status": _status(c),
                "reason": c.reason + (f" ({c.error})" if c.error and c.error not in c.reason else ""),
                "iteration": c.iteration, "children": [], "best": c.version is not None
                and c.version == state.current_version, "gate": _gate_summary(c)}
        parent = nodes.get(c.current_version)
        (parent["children"] if parent else orphans).append(node)
        if c.version is not None:
            nodes[c.version] = node
    pending = state.pending
    if pending is not None and pending.candidate_version is not None:  # proposed, not yet through the gate
        node = {"version": pending.candidate_version, "label": f"iteration {pending.iteration}", "val": None,
                "status": "pending", "reason": "not evaluated on val yet (the run stopped before its gate)",
                "iteration": pending.iteration, "children": [], "best": False, "gate": None}
        parent = nodes.get(state.current_version if state.current_version is not None else 0)
        (parent["children"] if parent else orphans).append(node)
    return [root, *orphans]


def _gate_summary(c: CandidateRecord) -> str | None:
    """The gate's numbers in one line for a lineage node (None when the candidate never reached the gate)."""
    if c.candidate_val is None or c.statistic is None:
        return None
    text = f"{c.gate_mode}: Δ {c.statistic:+.3f}"
    if c.interval is not None:
        text += f" [{c.interval[0]:+.3f}, {c.interval[1]:+.3f}]"
    if c.p_value is not None:
        text += f", p={c.p_value:.3f}"
    return text + f", {c.gate_rollouts} val rollouts"


def _proposals(rd: RunDir) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(rd.proposals.glob("*.json")):
        data = _read_json(path)
        if isinstance(data, dict):
            out[path.stem] = data
    return out


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _diff(old: str, new: str, lessons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The unified diff of two skill files as rows (kind, text, marks): an added line is marked with the
    proposal's lessons it shares at least three content words with (the proposal records which lessons and
    gradients the candidate was written from, not which line came from which)."""
    lesson_words = [(i, _words(f"{lesson.get('requirement', '')} {lesson.get('text', '')}"))
                    for i, lesson in enumerate(lessons)]
    rows = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), "parent", "candidate", n=2, lineterm=""):
        if line.startswith(("---", "+++")):
            continue
        kind = {"@": "hunk", "+": "add", "-": "del"}.get(line[:1], "ctx")
        marks = []
        if kind == "add":
            words = _words(line)
            for index, lw in lesson_words:
                shared = len(words & lw)
                if shared >= 3:
                    marks.append({"lesson": index + 1, "shared": shared})
        rows.append({"kind": kind, "text": line, "marks": marks})
    return rows


def _skill_text(rd: RunDir, version: int | None) -> str | None:
    if version is None:
        return None
    try:
        return rd.skill_path(version).read_text(encoding="utf-8")
    except OSError:
        return None


def _diffs(rd: RunDir, state: RunState, proposals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in state.candidates:
        if not c.accepted or c.version is None:
            continue
        proposal = proposals.get(f"iter{c.iteration:03d}", {})
        lessons = _lessons_of(proposal)
        gradients = [{"failure_mode": str(g.get("failure_mode", "")), "evidence": str(g.get("evidence") or "")}
                     for g in proposal.get("gradients") or [] if isinstance(g, dict)]
        old, new = _skill_text(rd, c.current_version), _skill_text(rd, c.version)
        out.append({"version": c.version, "parent": c.current_version, "iteration": c.iteration,
                    "val": c.candidate_val, "parent_val": c.current_val, "gradients": gradients, "lessons": lessons,
                    "rows": _diff(old or "", new or "", lessons) if old is not None and new is not None else None})
    return out


def _lessons_of(proposal: dict[str, Any]) -> list[dict[str, Any]]:
    """The proposal's lessons with every field the page reads (older run directories may lack some)."""
    return [{"requirement": str(lesson.get("requirement", "")), "text": str(lesson.get("text", "")),
             "adapted": lesson.get("adapted", True) is not False,
             "sources": [s for s in lesson.get("sources") or [] if isinstance(s, dict)]}
            for lesson in proposal.get("lessons") or [] if isinstance(lesson, dict)]


def _items_of(unit: str, proposal: dict[str, Any]) -> list[tuple[str, str]]:
    """(requirement, query) of each retrieval the proposal made, in the order of its `retrieved` lists."""
    if unit == "init":
        return [(str(r.get("requirement", "")), str(r.get("query", "")))
                for r in proposal.get("requirements") or [] if isinstance(r, dict)]
    return [(str(g.get("failure_mode", "")), str(g.get("query", "")))
            for g in proposal.get("gradients") or [] if isinstance(g, dict) and str(g.get("query", "")).strip()]


def _section(section: dict[str, Any], quotes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ref = section["ref"] if isinstance(section.get("ref"), dict) else section
    quoted = quotes.get(str(ref.get("section_id", "")), {})
    return {"repo": ref.get("repo", "?"), "path": ref.get("path", "?"), "commit": str(ref.get("commit", "")),
            "heading_path": ref.get("heading_path", ""), "section_id": ref.get("section_id", ""),
            "skill_name": section.get("skill_name") or quoted.get("skill_name", ""),
            "license": section.get("license") or quoted.get("license", ""),
            "text": cut(section.get("text") or quoted.get("text"), QUOTE_CHARS) if (section.get("text")
                                                                                  or quoted.get("text")) else None}


def _lesson_units(state: RunState, proposals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per proposal (init, iter001, ...): every requirement or gradient that was searched for, with the sections
    it found and the lesson made of them (used), or why no lesson was made (dropped / nothing retrieved)."""
    by_iteration = {c.iteration: c for c in state.candidates}
    units = []
    for unit, proposal in proposals.items():
        if "retrieved" not in proposal and "lessons" not in proposal:
            continue
        retrieved = [r if isinstance(r, list) else [] for r in proposal.get("retrieved") or []]
        quotes = {str((s.get("ref") or {}).get("section_id", "")): s
                  for sections in retrieved for s in sections if isinstance(s, dict)}
        lessons = _lessons_of(proposal)
        errors = [str(e) for e in proposal.get("errors") or []]
        items = _items_of(unit, proposal)
        unused = list(lessons)
        slots = []
        for index, (requirement, query) in enumerate(items):
            sections = retrieved[index] if index < len(retrieved) else []
            lesson = next((le for le in unused if le.get("requirement") == requirement), None)
            if lesson is not None:
                unused.remove(lesson)
            dropped = next((e for e in errors if e.startswith(f"adaptation for requirement {index + 1} ")), None)
            status = "used" if lesson else ("dropped" if dropped else ("nothing retrieved" if not sections
                                                                       else "no lesson"))
            slots.append({"requirement": requirement, "query": query, "status": status, "reason": dropped,
                          "lesson": lesson, "adapted": (lesson or {}).get("adapted", True),
                          "sources": [_section(s, quotes) for s in (lesson or {}).get("sources") or []
                                      if isinstance(s, dict)],
                          "retrieved": [_section(s, quotes) for s in sections if isinstance(s, dict)]})
        for lesson in unused:  # a lesson the items above do not explain (e.g. an older run directory)
            slots.append({"requirement": lesson.get("requirement", ""), "query": "", "status": "used", "reason": None,
                          "lesson": lesson, "adapted": lesson.get("adapted", True),
                          "sources": [_section(s, quotes) for s in lesson.get("sources") or [] if isinstance(s, dict)],
                          "retrieved": []})
        if not slots:
            continue
        match = re.fullmatch(r"iter(\d+)", unit)
        record = by_iteration.get(int(match.group(1))) if match else None
        if unit == "init":
            outcome = "written into s0"
        elif record is None:
            outcome = "no decision recorded"
        elif record.version is None:
            outcome = f"no candidate ({record.reason})"
        else:
            outcome = f"written into v{record.version:03d}, {'accepted' if record.accepted else 'rejected'}"
        units.append({"unit": unit, "mode": proposal.get("mode", ""), "outcome": outcome, "slots": slots})
    if not units and state.lessons:  # no proposal files: the lessons log alone, without the quoted text
        units.append({"unit": "lessons.jsonl", "mode": "", "outcome": "", "slots": [
            {"requirement": lesson.get("requirement", ""), "query": "", "status": "used", "reason": None,
             "lesson": lesson, "adapted": lesson.get("adapted", True), "retrieved": [],
             "sources": [_section(s, {}) for s in lesson.get("sources") or [] if isinstance(s, dict)]}
            for lesson in _lessons_of({"lessons": state.lessons})]})
    return units


def _batch_version(batch: str, candidates: dict[int, CandidateRecord], current: int | None) -> tuple[str, int | None, str]:
    """(split, skill version, column label) of a trajectory batch name."""
    match = _BATCH.match(batch)
    if not match:
        return "other", None, batch
    if batch == "s0_val":
        return "val", 0, "v000 (s0)"
    if match.group(4):
        return "test", int(match.group(4)), f"v{int(match.group(4)):03d}"
    record = candidates.get(int(match.group(2)))
    if match.group(3) == "train":  # rolled out with s_t: the decided candidate's parent, or s_t of the pending one
        version = record.current_version if record else current
        return "train", version, f"iter {int(match.group(2))} train"
    version = record.version if record else None
    return "val", version, (f"v{version:03d}" if version is not None else batch)


def _steps(rollout: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The rollout's steps for the page (the first and last ones of a long trajectory) and how many were left out."""
    numbered = [(n, s) for n, s in enumerate(rollout.get("trajectory") or [], start=1) if isinstance(s, dict)]
    hidden = max(0, len(numbered) - MAX_STEPS)
    if hidden:
        numbered = numbered[:MAX_STEPS // 2] + [(0, {"gap": hidden})] + numbered[-(MAX_STEPS - MAX_STEPS // 2):]
    out: list[dict[str, Any]] = []
    for number, step in numbered:
        if "gap" in step:
            out.append({"gap": step["gap"]})
            continue
        out.append({"number": number, "observation": cut(step.get("observation"), OBSERVATION_CHARS),
                    "reply": cut(step.get("reply"), REPLY_CHARS), "action": cut(step.get("action"), REPLY_CHARS),
                    "result": cut(step.get("result"), OBSERVATION_CHARS) if step.get("kind") == "load_skill" else "",
                    "reward": step.get("reward", 0.0), "kind": step.get("kind", "env")})
    return out, hidden


def _outcome(rollout: dict[str, Any]) -> str | None:
    """How a saved rollout failed: its `outcome` (None when it did not fail)."""
    outcome = rollout.get("outcome")
    return None if outcome in (None, "ok") else str(outcome)


def _scores(rd: RunDir, state: RunState) -> dict[str, Any]:
    """The task x skill-version tables (val; test for s0 and best) and every batch's trajectories."""
    candidates = {c.iteration: c for c in state.candidates}
    batches: list[dict[str, Any]] = []
    for path in sorted(rd.trajectories.glob("*.rollouts.jsonl")):
        name = path.name[: -len(".rollouts.jsonl")]
        split, version, label = _batch_version(name, candidates, state.current_version)
        rollouts = read_jsonl(path)
        anchor = "b-" + re.sub(r"[^a-z0-9_]", "-", name.lower())
        entries = []
        for index, r in enumerate(rollouts):
            steps, hidden = _steps(r)
            entries.append({"id": f"{anchor}-{index}", "task_id": str(r.get("task_id", "?")),
                            "reward": r.get("reward"), "soft_score": r.get("soft_score"),
                            "error": r.get("error"), "outcome": _outcome(r),
                            "final_output": cut(r.get("final_output"), OBSERVATION_CHARS) if r.get("final_output")
                            else None, "steps": steps, "hidden_steps": hidden,
                            "env_steps": r.get("env_steps", len(r.get("trajectory") or []))})
        rewards = [float(e["reward"]) for e in entries if e["reward"] is not None]
        batches.append({"name": name, "anchor": anchor, "split": split, "version": version, "label": label,
                        "rollouts": entries, "mean": sum(rewards) / len(rewards) if rewards else None,
                        "order": (0 if name == "s0_val" else 1, name)})
    batches.sort(key=lambda b: b["order"])
    for b in batches:
        if b["split"] == "test":
            b["label"] += " (s0)" if b["version"] == 0 else (" (best)" if b["version"] == state.current_version else "")

    def table(split: str) -> dict[str, Any]:
        columns = [b for b in batches if b["split"] == split]
        tasks: dict[str, dict[str, Any]] = defaultdict(dict)
        for b in columns:
            for e in b["rollouts"]:
                tasks[e["task_id"]].setdefault(b["name"], e)
        return {"columns": columns, "rows": [{"task_id": t, "cells": cells} for t, cells in tasks.items()]}

    accepted = {c.version for c in state.candidates if c.accepted}
    return {"val": table("val"), "test": table("test"), "batches": batches, "accepted": accepted}


def _cost(state: RunState, ledger: dict[str, Any], glance: dict[str, Any]) -> dict[str, Any]:
    def rows(key: str) -> list[dict[str, Any]]:
        return [{"name": name, **row, "cost_text": bucket_cost_text(row)}
                for name, row in sorted((ledger.get(key) or {}).items())]

    gain = None
    if glance["s0_val"] is not None and glance["best_val"] is not None:
        gain = (glance["best_val"] - glance["s0_val"]) * 100
    # a cost per point is known only when every call's cost is
    total = glance["cost_usd"] if not glance["unpriced_calls"] else 0.0
    return {"by_stage": rows("by_stage"), "by_role": rows("by_role"), "by_model": rows("by_model"),
            "gain_points": gain, "per_point": total / gain if total > 0 and gain and gain > 0 else None,
            "per_accepted": total / glance["accepted"] if total > 0 and glance["accepted"] else None}


def _plots(state: RunState) -> list[dict[str, str]]:
    if not state.curve:
        return []
    plots = [{"title": "best val score against rollouts",
              "svg": svg_of(val_curve_figure(state, "rollouts_used", "rollouts used (train + val)"))}]
    if priced_spend_in_curve(state):  # with every call free or unpriced the curve is a vertical line
        plots.append({"title": "best val score against cost",
                      "svg": svg_of(val_curve_figure(state, "cost_usd", "cost (USD)"))})
    return plots


def build_html_report(run_dir: RunDir | str | Path) -> str:
    """The HTML page of a run directory (finished or not)."""
    from markupsafe import Markup

    from corpus_tools.card import record_label

    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    state = RunState.model_validate_json(rd.checkpoint.read_text(encoding="utf-8"))
    cfg = _read_json(rd.config_json) or {}
    ledger = _read_json(rd.ledger) or {}
    proposals = _proposals(rd)
    glance = _glance(cfg, state, ledger)
    glance["corpus"] = record_label(rd.recorded_corpus())
    glance["best_warning"] = best_skill_warning(rd, state, str(glance["optimizer"] or ""))
    final_version = state.current_version
    final = None
    if rd.best_skill.exists():
        final = rd.best_skill.read_text(encoding="utf-8")
    plots = [{"title": p["title"], "svg": Markup(p["svg"])} for p in _plots(state)]
    return environment().get_template("run_report.html.j2").render(
        title=f"RASO run report: {glance['harness']}", run_dir=str(rd.root), glance=glance,
        lineage=_lineage(state), gate_rows=_gate_rows(state), final_skill=final, final_version=final_version,
        diffs=_diffs(rd, state, proposals), lesson_units=_lesson_units(state, proposals),
        scores=_scores(rd, state), cost=_cost(state, ledger, glance), plots=plots,
        cost_plot_note=cost_plot_note(state), price_hint=PRICE_HINT,
        degradations=degradation_lines(rd, state, ledger), candidates=state.candidates,
    )


def write_html_report(run_dir: RunDir | str | Path) -> Path:
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    return atomic_write_text(rd.report_html, build_html_report(rd))


__all__ = ["build_html_report", "cut", "environment", "svg_of", "write_html_report"]
