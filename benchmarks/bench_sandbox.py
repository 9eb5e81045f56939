"""Sandbox start-up cost: wall time per run of small programs behind the OS layer (bubblewrap) against the
in-process guard alone (the baseline), measured in the same run, alternating so machine load hits both alike.

    python benchmarks/bench_sandbox.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics

from raso.harness.sandbox import IsolationSupport, Sandbox, isolation_support

PROGRAMS = {
    "print": "print('hi')\n",
    "import openpyxl": "import openpyxl\nprint(openpyxl.__version__)\n",
    "import pandas": "import pandas\nprint(pandas.__version__)\n",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    support = isolation_support()
    if support.level != "os":
        raise SystemExit(f"no OS layer here ({'; '.join(support.notes)}): nothing to compare")
    isolated = Sandbox()
    baseline = Sandbox()
    baseline.support = IsolationSupport(notes=["benchmark baseline: in-process guard only"])
    print(f"OS layer: bwrap as {support.run_as}; {args.runs} runs each, median wall seconds per run")
    print(f"{'program':18} {'guard only':>11} {'bwrap+guard':>12} {'ratio':>6}")
    for name, code in PROGRAMS.items():
        times: dict[str, list[float]] = {"base": [], "os": []}
        for _ in range(args.runs):
            for key, box in (("base", baseline), ("os", isolated)):
                res = box.run(code)
                if not res.ok:
                    raise SystemExit(f"{name} failed ({key}): {res.error_summary()}")
                times[key].append(res.wall_time_s)
        base, iso = statistics.median(times["base"]), statistics.median(times["os"])
        print(f"{name:18} {base:11.3f} {iso:12.3f} {iso / base:6.2f}")


if __name__ == "__main__":
    main()
