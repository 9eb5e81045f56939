"""What both run reports say alike, report.md (report.py) and report.html (html_report.py): the val curve
figure, the degradations and the warning about an unusable best skill. Built only from files in the run
directory; both report modules import it, neither imports the other's internals."""

from __future__ import annotations

import json
from typing import Any

from .run_dir import RunDir
from .state import RunState


def unpriced_in_curve(state: RunState) -> int:
    """How many calls without a known price the val curve's points had made by the last one (their cost, unknown,
    is left out of every point's cost_usd)."""
    return max([0, *(p.unpriced_calls for p in state.curve), *(c.unpriced_calls for c in state.candidates)])


def priced_spend_in_curve(state: RunState) -> bool:
    return any(p.cost_usd > 0 for p in state.curve) or any(c.cost_usd > 0 for c in state.candidates)


def cost_plot_note(state: RunState) -> str | None:
    """What the plot against cost leaves out, as a sentence beside it: the spend of calls without a known price."""
    unpriced = unpriced_in_curve(state)
    if not unpriced:
        return None
    if not priced_spend_in_curve(state):
        return f"No cost to plot: the cost of the {unpriced} unpriced call(s) is unknown"
    return f"The plot against cost shows priced calls only: the cost of {unpriced} unpriced call(s) is not shown"


def val_curve_figure(state: RunState, x_key: str, xlabel: str) -> Any:
    """The best val score (step line) and every candidate's val score against `x_key` ("rollouts_used" or
    "cost_usd"). The x axis starts at 0; rollouts get integer ticks, so one point never reads 1.900 ... 2.100.
    Against cost, the spend of calls without a known price is left out and the title says so; when no call had a
    known price the figure holds only that sentence (an axis of $0 would be a cost nobody measured)."""
    # matplotlib's object API, never pyplot: no global figure registry or backend switch, so cells running in
    # threads side by side (an experiment on a Dask cluster) can draw at the same time
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.subplots()
    unpriced = unpriced_in_curve(state) if x_key == "cost_usd" else 0
    if unpriced and not priced_spend_in_curve(state):
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"Val score vs cost\ncost unknown: {unpriced} unpriced call(s)", ha="center", va="center")
        return fig
    note = f"priced calls only; cost of {unpriced} unpriced call(s) not shown" if unpriced else None
    xs = [getattr(p, x_key) for p in state.curve]
    ys = [p.best_val for p in state.curve]
    if xs:
        ax.step(xs, ys, where="post", color="tab:blue", label="best val (s_t)")
        ax.plot(xs, ys, "o", color="tab:blue")
    accepted = [(getattr(c, x_key), c.candidate_val)
                for c in state.candidates if c.candidate_val is not None and c.accepted]
    rejected = [(getattr(c, x_key), c.candidate_val) for c in state.candidates
                if c.candidate_val is not None and not c.accepted]
    if accepted:
        ax.scatter(*zip(*accepted), marker="^", color="tab:green", zorder=3, label="candidate accepted")
    if rejected:
        ax.scatter(*zip(*rejected), marker="x", color="tab:red", zorder=3, label="candidate rejected")
    right = max([*xs, *(x for x, _ in accepted + rejected), 0])
    if x_key == "rollouts_used":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0, max(right, 1) * 1.05 + 0.5)
    else:
        ax.set_xlim(0, right * 1.08 if right > 0 else 1.0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean val reward")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.set_title(f"Val score vs {xlabel.split(' (')[0]}" + (f"\n({note})" if note else ""),
                 fontsize=None if note is None else 10)
    if xs or accepted or rejected:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def _proposal_errors(run_dir: RunDir) -> list[tuple[str, str]]:
    """(unit, error) for every step the initializer and the proposals skipped or replaced by a fallback."""
    out: list[tuple[str, str]] = []
    for path in sorted(run_dir.proposals.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for error in data.get("errors") or []:
            out.append((path.stem, " ".join(str(error).split())))
    return out


def degradation_lines(run_dir: RunDir, state: RunState, ledger: dict[str, Any]) -> list[str]:
    """Everything that ran in a weaker way than configured, one line each: infrastructure failures and retries,
    fallbacks logged by retrieval, and optimizer steps skipped or replaced (junk drafts, dropped or echoed lessons)."""
    totals = ledger.get("totals", {})
    lines: list[str] = []
    retries, failures = int(totals.get("retries", 0) or 0), int(totals.get("failures", 0) or 0)
    if retries or failures or state.infra_failed_rollouts or state.infra_stops:
        lines.append(f"infrastructure: {retries} model-call retr{'y' if retries == 1 else 'ies'} by the gateway, "
                     f"{failures} call(s) failed after them; {state.infra_failed_rollouts} rollout(s) failed for "
                     f"infrastructure reasons and were never scored ({state.infra_reruns} re-run); the run stopped "
                     f"{state.infra_stops} time(s) on an outage and was resumed {state.resumes} time(s)")
    for key, entry in sorted(state.degradations.items()):
        lines.append(f"{entry.get('count', 1)}× {entry.get('example', key)}")
    errors = _proposal_errors(run_dir)
    kinds = {"assembled": "RASI fallback skill (the draft was unusable; assembled from requirements and lessons)",
             "lesson was dropped": "lesson dropped (empty or an echo of its input)",
             "gradient for chunk": "gradient chunk skipped (unusable reply)",
             "merge failed": "gradient merge failed (chunk outputs used)",
             "sanitizer ": "small-model repair (the optimizer model profile's sanitizers)"}
    for unit, error in errors:
        label = next((v for k, v in kinds.items() if k in error), "step skipped")
        text = error if len(error) <= 300 else error[:297] + "..."
        lines.append(f"{unit}: {label}: {text}")
    return lines


def best_skill_warning(run_dir: RunDir, state: RunState, optimizer: str) -> str | None:
    """A warning when the skill the run calls best is not usable as written (raso.optimizer.sanitizers'
    skill_body_problems: runaway empty items, a cut-off ending, repeats, no instructions), naming the optimizer
    model's caveat; None when it reads as a skill (or the run has none yet)."""
    from raso.llm.profiles import profile_for
    from raso.optimizer.sanitizers import skill_body_problems
    from raso.skill import Skill

    if state.current_version is None:
        return None
    path = run_dir.skill_path(state.current_version)
    if not path.is_file():
        path = run_dir.best_skill
    try:
        body = Skill.load(path).body
    except (OSError, ValueError):  # unreadable or not a SKILL.md: the report says what it can
        return None
    problems = skill_body_problems(body)
    if not problems:
        return None
    try:
        caveat = profile_for(optimizer).caveat
    except ValueError:  # a model string no profile resolves: the warning stands without the caveat
        caveat = ""
    label = "s0" if state.current_version == 0 else f"v{state.current_version:03d}"
    return (f"**The best skill ({label}) is not usable as written: {'; '.join(problems)}.** The optimizer model "
            f"`{optimizer}` could not write a usable skill in this run" + (f" ({caveat})" if caveat else "")
            + "; read `SKILL.md` before relying on it.")


__all__ = ["best_skill_warning", "degradation_lines", "val_curve_figure"]
