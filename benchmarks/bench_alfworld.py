"""ALFWorld harness speed: reset cost, step cost, steps per second, and the speed-up of playing games in
parallel processes (joblib, 2 workers) against one process, measured in the same run.

Each game is played by the expert (stored walkthrough) through `AlfworldEnv`, i.e. the real alfworld/TextWorld
engine behind the harness. The baseline is the same games played sequentially in one worker.

    python benchmarks/bench_alfworld.py --data-dir ../shared/envdata/alfworld [--games 12] [--split test]
"""

from __future__ import annotations

import argparse
import statistics
import time

from joblib import Parallel, delayed

from harnesses.alfworld import AlfworldHarness
from harnesses.alfworld.expert import EpisodeResult, play_walkthrough


def play_all(gamefiles: list[str], workers: int) -> tuple[list[EpisodeResult], float]:
    t0 = time.perf_counter()
    results = Parallel(n_jobs=workers)(delayed(play_walkthrough)(g, 50) for g in gamefiles)
    return results, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="ALFWorld data folder (default: the shipped demo games)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--games", type=int, default=12)
    args = parser.parse_args()

    harness = AlfworldHarness(args.data_dir)
    gamefiles = [harness.gamefile(t) for t in harness.tasks(args.split)][: args.games]
    play_all(gamefiles[:2], 2)  # warm the worker pool and the import caches

    seq, seq_s = play_all(gamefiles, 1)
    par, par_s = play_all(gamefiles, 2)
    steps = sum(r.steps for r in seq)
    reset_ms = [r.reset_s * 1000 for r in seq]
    step_ms = [r.play_s * 1000 / r.steps for r in seq if r.steps]
    won = sum(r.won for r in seq)

    print(f"ALFWorld benchmark: {len(gamefiles)} {args.split} games, expert walkthroughs, {steps} steps, "
          f"{won}/{len(gamefiles)} won")
    print(f"{'measure':<38}{'value':>12}")
    print(f"{'reset (load + first obs), median ms':<38}{statistics.median(reset_ms):>12.1f}")
    print(f"{'step, median ms':<38}{statistics.median(step_ms):>12.2f}")
    print(f"{'games/s, 1 worker (baseline)':<38}{len(gamefiles) / seq_s:>12.2f}")
    print(f"{'steps/s incl. resets, 1 worker':<38}{steps / seq_s:>12.1f}")
    print(f"{'steps/s excl. resets, 1 worker':<38}{steps / sum(r.play_s for r in seq):>12.1f}")
    print(f"{'games/s, 2 workers':<38}{len(gamefiles) / par_s:>12.2f}")
    print(f"{'speed-up 2 workers vs 1':<38}{seq_s / par_s:>12.2f}x")
    assert [r.won for r in par] == [r.won for r in seq], "parallel and sequential runs disagree"


if __name__ == "__main__":
    main()
