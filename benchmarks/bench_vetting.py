"""The vetting scan over every section of the shared corpus: how many sections each pattern family flags,
examples of what was flagged, the scan's CPU cost per section, and near-duplicate groups among sections.

    python benchmarks/bench_vetting.py [--corpus DIR] [--examples 5]

The shared corpus is treated as clean (public skills, no planted attacks): every flag is either a
false positive or a real instance of the pattern (e.g. an installer piped into a shell), and the
examples say which.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from corpus_tools.index import index_text  # noqa: E402
from corpus_tools.ingest import iter_corpus  # noqa: E402
from corpus_tools.sections import retrievable_sections, split_sections  # noqa: E402
from corpus_tools.vetting import FAMILIES, scan  # noqa: E402


def main() -> int:
    default_corpus = Path(os.environ.get("RASO_SHARED_DIR", REPO.parent / "shared")) / "corpus"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=default_corpus)
    parser.add_argument("--examples", type=int, default=5)
    args = parser.parse_args()
    sections = 0
    flagged = 0
    per_family: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    cpu = 0.0
    for record in iter_corpus([args.corpus]):
        for section in retrievable_sections(split_sections(record)):
            text = index_text(section)
            c = time.process_time()
            findings = scan(text)
            cpu += time.process_time() - c
            sections += 1
            flagged += bool(findings)
            for finding in findings:
                per_family[finding.family] += 1
                if len(examples[finding.family]) < args.examples:
                    examples[finding.family].append(f"`{section.repo}/{section.path}` ({section.heading_path}): "
                                                    f"`{finding.excerpt}`")
    print(f"{sections} sections, {flagged} flagged ({100 * flagged / max(sections, 1):.2f} %); scan "
          f"{1e6 * cpu / max(sections, 1):.0f} CPU us per section\n")
    print("| family | sections | % |\n|---|---:|---:|")
    for family in FAMILIES:
        print(f"| {family} | {per_family[family]} | {100 * per_family[family] / max(sections, 1):.3f} |")
    for family in FAMILIES:
        if examples[family]:
            print(f"\n{family}:")
            for line in examples[family]:
                print(f"- {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
