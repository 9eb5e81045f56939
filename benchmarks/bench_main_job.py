"""The README's main job (`raso optimize --harness webshop` on the embedded model), today's main against this tree,
in one run on the same cached model: CPU s, wall, where the embedded model's time went, and tokens per role and
phase.

Each side runs in its own process (a `git archive` of `--baseline-ref`, default `main`, and this checkout), one
after the other so they do not share the cores; CPU s is that process's rusage (user + sys, children included).
A probe in the child process times llama-cpp-python's own methods, so both sides are measured the same way
whatever raso code they run:

* prompt eval: `Llama.eval` of more than one token (the part of a prompt the KV cache did not already hold);
* generation: `Llama.eval` of one token plus `Llama.sample` (sampling, with the reply grammar when there is one);
* KV cache: `save_state` / `load_state` of the RAM state cache, and how much of each prompt was reused
  (prompt tokens minus the tokens evaluated for it).

Times inside the probe are wall seconds of the locked model call (one call at a time per model); prompt eval
uses `n_threads_batch` cores, so its CPU share is up to that many times its wall.

    python benchmarks/bench_main_job.py [--baseline-ref main] [--job "optimize --harness webshop --seed 0"]
                                        [--sides baseline,new] [--nice 10] [--json OUT.json]

A smaller piece for iterating: `--job "eval --harness webshop --split val --limit 1 --skill none"`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JOB = "optimize --harness webshop --seed 0 --no-progress"


# ---------------------------------------------------------------------------------------------- child (probe)
class _Probe:
    """Counters filled by wrappers around llama_cpp.Llama methods (installed before raso loads the model)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.totals: dict[str, float] = defaultdict(float)
        self.calls: list[dict[str, Any]] = []
        self.current: dict[str, float] | None = None

    def add(self, key: str, value: float) -> None:
        with self.lock:
            self.totals[key] += value
            if self.current is not None:
                self.current[key] = self.current.get(key, 0.0) + value


def _install_probe(probe: _Probe) -> None:
    import llama_cpp

    llama = llama_cpp.Llama

    def timed(name: str, on_done: Any = None) -> None:
        original = getattr(llama, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                if on_done is not None:
                    on_done(elapsed, args, kwargs)
                else:
                    probe.add(f"{name}_s", elapsed)
                    probe.add(f"{name}_n", 1)

        setattr(llama, name, wrapper)

    def on_eval(elapsed: float, args: tuple, kwargs: dict) -> None:
        tokens = args[0] if args else kwargs.get("tokens", [])
        kind = "prompt" if len(tokens) > 1 else "decode"
        probe.add(f"{kind}_eval_s", elapsed)
        probe.add(f"{kind}_eval_tokens", len(tokens))

    timed("eval", on_eval)
    timed("sample")
    timed("save_state")
    timed("load_state")

    original_chat = llama.create_chat_completion

    def chat(self: Any, *args: Any, **kwargs: Any) -> Any:
        probe.current = {}
        started = time.perf_counter()
        out = original_chat(self, *args, **kwargs)
        record = dict(probe.current or {})
        probe.current = None
        usage = out.get("usage") or {}
        record.update(wall_s=time.perf_counter() - started, grammar=kwargs.get("grammar") is not None,
                      prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0))
        with probe.lock:
            probe.calls.append(record)
        return out

    llama.create_chat_completion = chat


def _child(code_root: Path, out_json: Path, job: list[str]) -> int:
    """Run `raso JOB` with the raso code of `code_root`, the probe installed; write what was measured."""
    sys.path.insert(0, str(code_root))
    probe = _Probe()
    _install_probe(probe)
    import raso

    if Path(raso.__file__).resolve().parent.parent != code_root.resolve():
        raise SystemExit(f"imported raso from {raso.__file__}, not from {code_root}")
    from raso.cli.main import main as raso_main

    started = time.perf_counter()
    rc = raso_main(job)
    wall = time.perf_counter() - started
    out_json.write_text(json.dumps({"rc": rc, "wall_in_job_s": wall, "totals": probe.totals,
                                    "calls": probe.calls}, indent=1))
    return int(rc or 0)


# ---------------------------------------------------------------------------------------------- parent
def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _ledger_rows(run_dir: Path) -> dict[tuple[str, str], list[int]]:
    """(role, phase) -> [calls, prompt tokens, completion tokens] from the run's call ledger."""
    rows: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    calls: list[dict[str, Any]] = []
    if (run_dir / "ledger.calls.jsonl").is_file():  # optimize's run directory
        calls = [json.loads(line) for line in (run_dir / "ledger.calls.jsonl").read_text().splitlines() if line.strip()]
    elif (run_dir / "ledger.json").is_file():  # eval's output folder
        calls = json.loads((run_dir / "ledger.json").read_text()).get("calls", [])
    for call in calls:
        phase = str(call.get("unit") or call.get("stage") or "?").split("/")[0]
        row = rows[(str(call.get("role")), phase)]
        row[0] += 1
        row[1] += int(call.get("prompt_tokens") or 0)
        row[2] += int(call.get("completion_tokens") or 0)
    return rows


def _run_side(name: str, stem: str, code_root: Path, job: str, work: Path, nice: int) -> dict[str, Any]:
    run_dir = work / f"{stem}-run"
    probe_json = work / f"{stem}-probe.json"
    argv = shlex.split(job)
    if argv and argv[0] == "optimize" and "--run-dir" not in argv:
        argv += ["--run-dir", str(run_dir)]
    elif argv and argv[0] == "eval" and "--out" not in argv:
        argv += ["--out", str(run_dir)]
    cmd = ["nice", "-n", str(nice), sys.executable, str(Path(__file__).resolve()), "--child", str(code_root),
           str(probe_json), "--", *argv]
    env = dict(os.environ, PYTHONPATH=str(code_root))
    print(f"[{name}] {code_root}: raso {' '.join(argv)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    log = open(work / f"{stem}.log", "w")
    proc = subprocess.Popen(cmd, cwd=code_root, env=env, stdout=log, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    log.close()
    wall = time.perf_counter() - started
    probe = json.loads(probe_json.read_text()) if probe_json.is_file() else {"totals": {}, "calls": []}
    side = {"name": name, "code": str(code_root), "rc": proc.returncode, "wall_s": wall,
            "user_s": usage.ru_utime, "sys_s": usage.ru_stime, "cpu_s": usage.ru_utime + usage.ru_stime,
            "max_rss_mb": usage.ru_maxrss / 1024, "probe": probe, "run_dir": str(run_dir),
            "ledger": {f"{role}/{phase}": row for (role, phase), row in sorted(_ledger_rows(run_dir).items())}}
    summary = run_dir / "summary.json"
    if summary.is_file():
        side["summary"] = json.loads(summary.read_text())
    print(f"[{name}] rc {proc.returncode}, {side['cpu_s']:.0f} CPU s, {wall:.0f} s wall", file=sys.stderr, flush=True)
    return side


def _probe_line(side: dict[str, Any]) -> dict[str, str]:
    totals = side["probe"].get("totals", {})
    calls = side["probe"].get("calls", [])
    prompt = sum(c.get("prompt_tokens", 0) for c in calls)
    evaluated = totals.get("prompt_eval_tokens", 0) + totals.get("decode_eval_tokens", 0) - sum(
        c.get("completion_tokens", 0) for c in calls)
    generated = sum(c.get("completion_tokens", 0) for c in calls)
    gen_s = totals.get("decode_eval_s", 0) + totals.get("sample_s", 0)
    return {
        "model calls": f"{len(calls)}",
        "prompt tokens (ledger of the model)": f"{prompt:,}",
        "prompt tokens evaluated (KV cache missed)": f"{max(0, int(evaluated)):,}",
        "prompt reuse from the KV cache": f"{(1 - evaluated / prompt) * 100:.0f}%" if prompt else "-",
        "prompt eval, wall s": f"{totals.get('prompt_eval_s', 0):.0f}",
        "completion tokens": f"{generated:,}",
        "generation, wall s (decode + sample)": f"{gen_s:.0f}",
        "of which sampling (grammar), wall s": f"{totals.get('sample_s', 0):.0f}",
        "generation ms per token": f"{gen_s / generated * 1000:.0f}" if generated else "-",
        "KV state save + load, wall s": f"{totals.get('save_state_s', 0) + totals.get('load_state_s', 0):.0f}",
        "model calls, wall s": f"{sum(c.get('wall_s', 0) for c in calls):.0f}",
    }


def _table(sides: list[dict[str, Any]]) -> str:
    names = [s["name"] for s in sides]
    rows: list[tuple[str, list[str]]] = [
        ("exit status", [str(s["rc"]) for s in sides]),
        ("CPU s (user + sys)", [f"{s['cpu_s']:.0f} ({s['user_s']:.0f} + {s['sys_s']:.0f})" for s in sides]),
        ("wall", [f"{int(s['wall_s'] // 60)}:{int(s['wall_s'] % 60):02d}" for s in sides]),
        ("peak RSS, MB", [f"{s['max_rss_mb']:.0f}" for s in sides]),
    ]
    probe_lines = [_probe_line(s) for s in sides]
    for key in probe_lines[0]:
        rows.append((key, [line[key] for line in probe_lines]))
    keys = sorted({k for s in sides for k in s["ledger"]})
    for key in keys:
        cells = []
        for s in sides:
            row = s["ledger"].get(key)
            cells.append(f"{row[0]} calls, {row[1]:,} + {row[2]:,}" if row else "-")
        rows.append((f"tokens {key} (prompt + completion)", cells))
    for s in sides:  # the quality the job reports, where it wrote one
        summary = s.get("summary") or {}
        s["_score"] = ", ".join(f"{k} {summary[k]}" for k in ("best_skill", "best_val", "s0_val", "s0_test", "best_test",
                                                       "mean_reward", "model_calls", "env_steps")
                                if k in summary) or "-"
    rows.append(("result (summary.json)", [s["_score"] for s in sides]))
    width = max(len(r[0]) for r in rows)
    cols = [max(len(names[i]), *(len(r[1][i]) for r in rows)) for i in range(len(sides))]
    lines = [f"| {'':<{width}} | " + " | ".join(f"{n:<{cols[i]}}" for i, n in enumerate(names)) + " |",
             f"|{'-' * (width + 2)}|" + "|".join("-" * (c + 2) for c in cols) + "|"]
    for label, cells in rows:
        lines.append(f"| {label:<{width}} | " + " | ".join(f"{c:<{cols[i]}}" for i, c in enumerate(cells)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--child":
        code_root, out_json = Path(argv[1]), Path(argv[2])
        return _child(code_root, out_json, argv[4:] if argv[3:4] == ["--"] else argv[3:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-ref", default="main", help="git ref measured as today's code (default: main)")
    parser.add_argument("--job", default=DEFAULT_JOB, help=f"the raso command line (default: {DEFAULT_JOB!r})")
    parser.add_argument("--sides", default="baseline,new", help="which sides to run, in order (baseline,new)")
    parser.add_argument("--parallel", action="store_true",
                        help="run the sides at the same time (CPU s stays each process's own; wall grows with the load)")
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--work-dir", type=Path, default=None, help="keep runs and logs here (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write every measurement as JSON")
    args = parser.parse_args(argv)
    from raso.llm.local import ensure_ready

    ensure_ready("local/qwen2.5-coder-0.5b")  # both sides then load the same cached GGUF
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-main-job-"))
    work.mkdir(parents=True, exist_ok=True)
    baseline_tree = work / "baseline-tree"
    jobs: list[tuple[str, str, Path]] = []
    for name in [s.strip() for s in args.sides.split(",") if s.strip()]:
        if name == "baseline":
            commit = _git("rev-parse", args.baseline_ref)
            if not baseline_tree.exists():  # an export, not a worktree: the repository's metadata stays as it is
                baseline_tree.mkdir()
                archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True)
                subprocess.run(["tar", "-x", "-C", str(baseline_tree)], input=archive.stdout, check=True)
            jobs.append((f"{args.baseline_ref} ({commit[:7]})", "baseline", baseline_tree))
        elif name == "new":
            head = _git("rev-parse", "--short", "HEAD")
            dirty = " + uncommitted" if _git("status", "--porcelain", "--untracked-files=no") else ""
            jobs.append((f"new ({head}{dirty})", "new", ROOT))
        else:
            parser.error(f"unknown side {name!r}: use baseline and/or new")
    if args.parallel:
        results: dict[str, dict[str, Any]] = {}
        threads = [threading.Thread(target=lambda j=j: results.__setitem__(j[1], _run_side(*j, args.job, work, args.nice)))
                   for j in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        sides = [results[stem] for _, stem, _ in jobs]
    else:
        sides = [_run_side(*job, args.job, work, args.nice) for job in jobs]
    print(f"raso {args.job}  (embedded local/qwen2.5-coder-0.5b; {os.cpu_count()} cores; work dir {work})")
    print(_table(sides))
    if args.json:
        args.json.write_text(json.dumps(sides, indent=1))
    return 0 if all(s["rc"] == 0 for s in sides) else 1


if __name__ == "__main__":
    sys.exit(main())
