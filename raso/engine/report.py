"""The run report: report.md (score per iteration, rollouts, tokens, cost, wall time, lessons with provenance)
and PNG plots of the best val score against rollouts used and against cost, plus report.html (html_report.py).
Built only from files in the run directory, so `raso report RUN_DIR` works on any run, finished or not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raso.llm.ledger import PRICE_HINT, bucket_cost_text, cost_text

from .config import load_resolved
from .report_facts import best_skill_warning, cost_plot_note, degradation_lines, val_curve_figure
from .run_dir import RunDir, atomic_write_text, read_jsonl
from .state import RunState


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _plot(state: RunState, x_key: str, xlabel: str, path: Path) -> Path:
    fig = val_curve_figure(state, x_key, xlabel)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, format="png")
    tmp.replace(path)
    return path


def _lesson_sources(lesson: dict[str, Any]) -> str:
    refs = []
    for src in lesson.get("sources") or []:
        if isinstance(src, dict):
            where = f"{src.get('repo', '?')}/{src.get('path', '?')}@{str(src.get('commit', ''))[:10]}"
            heading = src.get("heading_path") or ""
            refs.append(f"{where} § {heading}" if heading else where)
    return "; ".join(refs) if refs else "(no corpus sources)"


def _test_section(state: RunState, config: Any) -> list[str]:
    """The test-split scores of s0 and the best skill (reported only; never used for selection)."""
    lines = ["## Test split", ""]
    if not config.schedule.test:
        return lines + ["Not evaluated (`schedule.test` is off for this run).", ""]
    if not state.test:
        note = state.test_note or ("pending: the run has not reached its end" if state.phase != "done" else
                                   "not evaluated")
        return lines + [note, ""]
    lines += ["| skill | version | test mean reward | tasks |", "|---|---|---|---|"]
    for score in state.test:
        lines.append(f"| {score.label} | v{score.version:03d} | {_fmt(score.mean_reward)} | {score.tasks} |")
    limit = f"the first {config.schedule.test_limit} test tasks" if config.schedule.test_limit else "every test task"
    lines += ["", f"Scored on {limit} after the optimization ended ({state.test_rollouts} rollouts, counted apart "
              "from the budget); never used for selection." + (f" Note: {state.test_note}" if state.test_note else ""),
              ""]
    return lines


def _gate_line(config: Any) -> str:
    gate = config.gate
    text = f"- gate: {gate.mode}"
    if gate.mode == "significant":
        text += f" (one-sided sign-flip permutation test, level {gate.level:g})"
    text += f"; {gate.rollouts_per_task} rollout(s) per val and test task"
    if gate.val_holdout:
        text += f"; val holdout {gate.val_holdout:g}"
    return text


def _holdout_rows(state: RunState, config: Any) -> list[str]:
    """The final skill on the held-out part of val, beside its gated val score."""
    if not config.gate.val_holdout:
        return []
    h = state.holdout
    if h is None:
        return [f"| held-out val score | - ({state.holdout_note or 'pending'}) |"]
    gap = "" if h.gated_val is None else f"; gated val {h.gated_val:.3f}, gap {h.gated_val - h.mean_reward:+.3f}"
    return [f"| held-out val score (v{h.version:03d}, never seen by the gate) | {h.mean_reward:.3f} on {h.tasks} "
            f"task(s), {h.rollouts} rollouts{gap} |"]


def _candidate_cost_section(state: RunState) -> list[str]:
    """Each candidate's own model calls (the ledger's records of its units): what a proposal and its
    evaluation cost."""
    rows = [c for c in state.candidates if c.cost]
    if not rows:
        return []
    lines = ["", "## Cost per candidate", "",
             "| iter | candidate | accepted | train calls | propose calls | propose tokens | val calls | "
             "val tokens | USD (train + propose + val) |", "|---|---|---|---|---|---|---|---|---|"]
    for c in rows:
        train, propose, val = (c.cost.get(k) for k in ("train", "propose", "val"))
        usd = cost_text(sum(u.cost_usd for u in c.cost.values()), sum(u.unpriced_calls for u in c.cost.values()))
        cand = f"v{c.version:03d}" if c.version is not None else "none"

        def tokens(u: Any) -> int:
            return (u.prompt_tokens + u.completion_tokens) if u is not None else 0

        lines.append(f"| {c.iteration} | {cand} | {'yes' if c.accepted else 'no'} | {train.calls if train else 0} | "
                     f"{propose.calls if propose else 0} | {tokens(propose)} | {val.calls if val else 0} | "
                     f"{tokens(val)} | {usd} |")
    return lines


def _plan_section(run_dir: RunDir, state: RunState, totals: dict[str, Any], ledger: dict[str, Any]) -> list[str]:
    """The cost plan made before the run (plan.json) against what the run spent."""
    if not run_dir.plan.exists():
        return []
    try:
        plan = json.loads(run_dir.plan.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if "error" in plan:
        return ["", "## Plan against spend", "", f"No plan was made: {plan['error']}"]
    spent = {"s0_val": None, "train": state.train_rollouts, "val": None, "holdout": None, "test": state.test_rollouts}
    val_in_candidates = sum(c.gate_rollouts for c in state.candidates)
    spent["val"] = val_in_candidates
    spent["s0_val"] = state.val_rollouts - val_in_candidates
    spent["holdout"] = state.holdout.rollouts if state.holdout is not None else 0
    lines = ["", "## Plan against spend", "",
             "The plan was made before the run without calling a model (`raso optimize --plan` prints it)"
             + (f"; rollout length measured in {plan['previous_run']}" if plan.get("previous_run") else "") + ".",
             "", "| rollouts | planned | spent |", "|---|---|---|"]
    for phase, planned in (plan.get("rollouts") or {}).items():
        lines.append(f"| {phase} | {planned} | {spent.get(phase, '-')} |")
    by_role = ledger.get("by_role", {})
    lines += ["", "| role | model | planned calls | calls | planned tokens | tokens | planned USD | USD |",
              "|---|---|---|---|---|---|---|---|"]
    for role in plan.get("roles") or []:
        row = by_role.get(role["role"], {})
        planned_usd = f"${role['usd']:.4f}" if role.get("usd") is not None else "unpriced"
        lines.append(f"| {role['role']} | {role['model']} | {role['calls']} | {row.get('calls', 0)} | "
                     f"{role['prompt_tokens'] + role['completion_tokens']} | "
                     f"{row.get('prompt_tokens', 0) + row.get('completion_tokens', 0)} | {planned_usd} | "
                     f"{bucket_cost_text(row)} |")
    return lines


def _cost_cell(ledger: dict[str, Any]) -> str:
    """The total cost, never a silent $0: calls to models without a known price are named."""
    totals = ledger.get("totals", {})
    cost = bucket_cost_text(totals)
    if not int(totals.get("unpriced_calls", 0) or 0):
        return cost
    models = sorted(m for m, row in ledger.get("by_model", {}).items() if row.get("unpriced_calls"))
    return f"{cost} — no price known for {', '.join(f'`{m}`' for m in models)}; {PRICE_HINT}"


def _corpus_line(config: Any, run_dir: RunDir) -> str:
    """Which corpus the run names (recorded in config.resolved.json when it started), and whether it retrieved
    from it."""
    from corpus_tools.card import record_label

    line = f"- corpus: {record_label(run_dir.recorded_corpus())}"
    return line if config.needs_retriever else line + " (not used: this run retrieves nothing)"


def _index_line(config: Any) -> str | None:
    if not config.needs_retriever:
        return None
    index = config.retrieval.index
    if index is None:
        return "- corpus index: the starter corpus (its repositories name no benchmark; a demo, not the paper's corpus)"
    try:
        from corpus_tools.blocklist import index_blocklists

        blocklists = ", ".join(index_blocklists(index)) or "none"
    except (OSError, ValueError):
        blocklists = "unreadable"
    line = f"- corpus index: `{index}` (blocklists: {blocklists})"
    if config.retrieval.allow_unfiltered_index:
        line += ("; **--allow-unfiltered-index was given: the index may not exclude this benchmark's repositories, "
                 "so retrieved skills may leak it**")
    return line


def _profile_lines(config: Any) -> list[str]:
    """The model profiles the run used (raso.llm.profiles): what each model can do and which repairs ran."""
    from raso.llm.profiles import profile_for

    models = config.models
    target, optimizer = models.target, config.resolved_optimizer_model()
    target_profile = profile_for(target, models.profile)
    optimizer_profile = profile_for(optimizer, models.optimizer_profile if models.optimizer is not None
                                    else models.optimizer_profile or models.profile)
    if target == optimizer and target_profile == optimizer_profile:
        return [f"- model profile: {target_profile.summary()}"]
    return [f"- target model profile: {target_profile.summary()}",
            f"- optimizer model profile: {optimizer_profile.summary()}"]


def _degradations_section(run_dir: RunDir, state: RunState, ledger: dict[str, Any]) -> list[str]:
    lines = [f"- {line}" for line in degradation_lines(run_dir, state, ledger)]
    if not lines:
        return []
    return ["## Degradations", "", "What ran in a weaker way than configured (see also events.jsonl and "
            "proposals/*.json):", "", *lines, ""]


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def build_report(run_dir: RunDir) -> str:
    state = RunState.model_validate_json(run_dir.checkpoint.read_text(encoding="utf-8"))
    config = load_resolved(run_dir.config_json)
    ledger: dict[str, Any] = {}
    if run_dir.ledger.exists():
        ledger = json.loads(run_dir.ledger.read_text(encoding="utf-8"))
    totals = ledger.get("totals", {})
    initial = state.curve[0].best_val if state.curve else None
    schedule = config.schedule
    warning = best_skill_warning(run_dir, state, config.resolved_optimizer_model())
    lines = [
        f"# RASO run report: {config.harness}",
        "",
        *([warning, ""] if warning else []),
        f"- run directory: `{run_dir.root}` (the same run as one page: `report.html`)",
        f"- status: {'finished' if state.phase == 'done' else 'in progress (phase ' + state.phase + ')'}"
        + (f"; stopped because: {state.stop_reason}" if state.stop_reason else ""),
        f"- target model: `{config.models.target}`; optimizer model: `{config.resolved_optimizer_model()}`",
        f"- init: {config.init.method}; update: {config.update.method}; adaptation: "
        f"{_on_off(config.init.adapt)} (init), {_on_off(config.update.adapt)} (update); "
        f"retrieval: {config.retrieval.kind if config.needs_retriever else 'none'}",
        f"- schedule: {schedule.epochs} epoch(s), minibatch {schedule.minibatch}, chunk {config.update.chunk_size}, "
        f"K {config.retrieval.k}, M {config.init.num_requirements}, seed {schedule.seed}, workers {schedule.workers}",
        f"- budgets: rollouts {config.budget.rollouts or 'none'}, USD {config.budget.usd or 'none'}"
        + (f" (test evaluation apart: USD {config.budget.test_usd})" if config.budget.test_usd is not None else ""),
        _gate_line(config),
    ]
    lines += _profile_lines(config)
    lines.append(_corpus_line(config, run_dir))
    index_line = _index_line(config)
    if index_line:
        lines.append(index_line)
    if state.upgraded_from is not None:
        lines.append(f"- run directory upgraded from format {state.upgraded_from} to {state.version} on resume")
    if config.quick_defaults_applied:
        applied = ", ".join(f"{key}={config.get(key)}" for key in config.quick_defaults_applied)
        lines.append(f"- quick defaults for the embedded model: {applied} (each is used only where nothing else set "
                     "the option; `--set KEY=VALUE` chooses your own)")
    lines += [
        "",
        "## Result",
        "",
        "| | value |",
        "|---|---|",
        f"| initial skill s0 val score | {_fmt(initial)} |",
        f"| best skill | v{state.current_version:03d} |" if state.current_version is not None else "| best skill | - |",
        f"| best val score | {_fmt(state.current_val)} |",
        *_holdout_rows(state, config),
        f"| iterations | {state.iterations_done} |",
        f"| candidates accepted | {sum(1 for c in state.candidates if c.accepted)} of {len(state.candidates)} |",
        f"| rollouts (train + val) | {state.rollouts_used} ({state.train_rollouts} + {state.val_rollouts}) |",
        f"| model calls | {totals.get('calls', 0)} (+{totals.get('cache_hits', 0)} replayed from cache) |",
        f"| tokens (prompt / completion) | {totals.get('prompt_tokens', 0)} / {totals.get('completion_tokens', 0)} |",
        f"| cost | {_cost_cell(ledger)} |",
        f"| wall time | {state.wall_time_s:.1f} s{f' ({state.resumes} resume(s))' if state.resumes else ''} |",
        "",
        "The best skill is `SKILL.md` (also `skills/skill_vNNN.md`). Val scores are mean rewards over "
        f"{'the first ' + str(schedule.val_limit) + ' ' if schedule.val_limit else 'all '}val tasks; rollouts count "
        "train minibatch rollouts plus every val evaluation (s0 included).",
        "",
        *_test_section(state, config),
        *_degradations_section(run_dir, state, ledger),
        "## Score per iteration",
        "",
        "| iter | epoch | minibatch | train mean | candidate | cand. val | current val | gate statistic | "
        "interval | p | gate rollouts | decision | rollouts | cost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    if initial is not None:
        lines.append(f"| 0 | - | - | - | v000 (s0) | {_fmt(initial)} | - | - | - | - | - | initial | "
                     f"{state.curve[0].rollouts_used} | "
                     f"{cost_text(state.curve[0].cost_usd, state.curve[0].unpriced_calls)} |")
    for c in state.candidates:
        cand = f"v{c.version:03d}" if c.version is not None else "none"
        interval = f"[{c.interval[0]:+.3f}, {c.interval[1]:+.3f}]" if c.interval is not None else "-"
        stat = f"{c.statistic:+.3f}" if c.statistic is not None else "-"
        lines.append(f"| {c.iteration} | {c.epoch + 1} | {len(c.train_task_ids)} | {_fmt(c.train_mean_reward)} | "
                     f"{cand} | {_fmt(c.candidate_val)} | {_fmt(c.current_val)} | {stat} | {interval} | "
                     f"{_fmt(c.p_value)} | {c.gate_rollouts} | {c.reason} | {c.rollouts_used} | "
                     f"{cost_text(c.cost_usd, c.unpriced_calls)} |")
    lines += _candidate_cost_section(state)
    lines += _plan_section(run_dir, state, totals, ledger)
    lines += ["", "## Plots", ""]
    for name in ("val_vs_rollouts.png", "val_vs_cost.png"):
        if (run_dir.plots / name).exists():
            lines.append(f"![{name}](plots/{name})")
    note = cost_plot_note(state)
    if note:
        lines += ["", f"{note}."]
    by_stage = ledger.get("by_stage", {})
    if by_stage:
        lines += ["", "## Usage by stage", "", "| stage | calls | cached | prompt tokens | completion tokens | cost |",
                  "|---|---|---|---|---|---|"]
        for stage, row in sorted(by_stage.items()):
            lines.append(f"| {stage} | {row.get('calls', 0)} | {row.get('cache_hits', 0)} | "
                         f"{row.get('prompt_tokens', 0)} | {row.get('completion_tokens', 0)} | "
                         f"{bucket_cost_text(row)} |")
    lessons = read_jsonl(run_dir.lessons) or state.lessons
    if lessons:
        lines += ["", "## Lessons and their provenance", ""]
        for lesson in lessons:
            text = " ".join(str(lesson.get("text", "")).split())
            if len(text) > 400:
                text = text[:397] + "..."
            lines.append(f"- **{lesson.get('stage')} (skill v{lesson.get('skill_version', 0):03d}) — "
                         f"{lesson.get('requirement', '')}**: {text}  \n  sources: {_lesson_sources(lesson)}")
    return "\n".join(lines) + "\n"


def write_report(run_dir: RunDir | str | Path) -> Path:
    """Write plots/*.png, report.md and report.html (raso.engine.html_report); returns report.md's path."""
    from .html_report import write_html_report

    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    state = RunState.model_validate_json(rd.checkpoint.read_text(encoding="utf-8"))
    _plot(state, "rollouts_used", "rollouts used (train + val)", rd.plots / "val_vs_rollouts.png")
    _plot(state, "cost_usd", "cost (USD)", rd.plots / "val_vs_cost.png")
    path = atomic_write_text(rd.report, build_report(rd))
    write_html_report(rd)
    return path
