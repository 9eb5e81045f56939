"""Leakage control: drop every repository whose files name an evaluation benchmark.

For each benchmark a keyword list names the benchmark and its source datasets. A match anywhere in
any file of a repository (SKILL.md text, reference files, path, name, description) excludes the
*whole repository*, not just the file, because a repository that discusses a benchmark may hold
tuned solutions in files that do not name it. Matching is case-insensitive except for the all-caps
dataset name ALFRED (an ordinary first name and an app name otherwise). The report lists every
excluded repository with the benchmark, keyword, file and a snippet around the first matches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from corpus_tools.ingest import SkillRecord, iter_documents

# benchmark name -> (keyword label, regex); regexes are compiled case-insensitively.
BENCHMARK_KEYWORDS: dict[str, tuple[tuple[str, str], ...]] = {
    "spreadsheet": (("SpreadsheetBench", r"spreadsheet[\s_-]*bench"),),
    "alfworld": (("ALFWorld", r"alf[\s_-]*world"), ("ALFRED", r"(?-i:\bALFRED\b)"),
                 ("TextWorld", r"\btext[_-]?world\b")),
    "webshop": (("WebShop", r"\bweb[_-]?shop\b"),),
    "officeqa": (("OfficeQA", r"office[\s_-]*qa\b"),),
}
# Literal substrings (lower-case) one of which every match contains: a cheap test before the regex.
_ANCHORS: dict[str, tuple[str, ...]] = {"spreadsheet": ("bench",), "alfworld": ("world", "alfred"),
                                        "webshop": ("shop",), "officeqa": ("office",)}
ALIASES = {"spreadsheetbench": "spreadsheet", "shop": "webshop", "office": "officeqa", "office_qa": "officeqa"}
MAX_EXAMPLES_PER_REPO = 5
SNIPPET_CHARS = 60


def resolve_benchmarks(names: Iterable[str]) -> list[str]:
    """Canonical benchmark names; "all" means every benchmark. Unknown names raise ValueError."""
    out: list[str] = []
    for raw in names:
        name = ALIASES.get(raw.strip().lower(), raw.strip().lower())
        if name == "all":
            candidates = list(BENCHMARK_KEYWORDS)
        elif name in BENCHMARK_KEYWORDS:
            candidates = [name]
        else:
            raise ValueError(f"unknown blocklist {raw!r}; choose from {', '.join([*BENCHMARK_KEYWORDS, 'all'])}")
        out.extend(c for c in candidates if c not in out)
    return out


def _pattern(benchmark: str) -> re.Pattern[str]:
    parts = [f"(?P<k{i}>{regex})" for i, (_, regex) in enumerate(BENCHMARK_KEYWORDS[benchmark])]
    return re.compile("|".join(parts), re.IGNORECASE)


@dataclass(slots=True)
class LeakMatch:
    benchmark: str
    keyword: str
    skill_id: str
    path: str
    snippet: str


@dataclass
class BlocklistReport:
    benchmarks: list[str]
    keywords: dict[str, list[str]]
    repos_scanned: int = 0
    skills_scanned: int = 0
    excluded: dict[str, dict[str, Any]] = field(default_factory=dict)  # repo -> details

    @property
    def excluded_repos(self) -> list[str]:
        return sorted(self.excluded)

    @property
    def excluded_skill_count(self) -> int:
        return sum(v["skills"] for v in self.excluded.values())

    def to_dict(self) -> dict[str, Any]:
        return {"benchmarks": self.benchmarks, "keywords": self.keywords, "repos_scanned": self.repos_scanned,
                "skills_scanned": self.skills_scanned, "excluded_repos": self.excluded_repos,
                "excluded_skills": self.excluded_skill_count, "excluded": self.excluded}

    def to_markdown(self) -> str:
        lines = ["# Leakage blocklist report", "",
                 f"Benchmarks: {', '.join(self.benchmarks) or '(none)'}. Scanned {self.skills_scanned} skills "
                 f"in {self.repos_scanned} repositories; excluded {len(self.excluded)} repositories "
                 f"({self.excluded_skill_count} skills).", ""]
        for bench in self.benchmarks:
            lines.append(f"- {bench}: keywords {', '.join(self.keywords[bench])}")
        for repo in self.excluded_repos:
            info = self.excluded[repo]
            lines += ["", f"## {repo}", "",
                      f"{info['skills']} skills excluded; {info['matches']} matching file(s) for "
                      f"{', '.join(info['benchmarks'])}.", ""]
            for ex in info["examples"]:
                lines.append(f"- `{ex['path']}` ({ex['benchmark']}, {ex['keyword']}): \"{ex['snippet']}\"")
        return "\n".join(lines) + "\n"

    def summary(self, first: int = 3) -> str:
        """One line: the blocklists, how many repositories and skills they excluded, and the first matches."""
        line = (f"blocklist {', '.join(self.benchmarks)}: excluded {len(self.excluded)} repositories "
                f"({self.excluded_skill_count} of {self.skills_scanned} skills)")
        examples = [(repo, ex) for repo in self.excluded_repos for ex in self.excluded[repo]["examples"][:1]][:first]
        if examples:
            line += "; first matches: " + "; ".join(f"{repo}: {ex['keyword']} in {ex['path']} (\"{ex['snippet']}\")"
                                                   for repo, ex in examples)
        return line

    def save(self, directory: str | Path) -> None:
        """Write blocklist_report.json and blocklist_report.md into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "blocklist_report.json").write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False)
                                                         + "\n", encoding="utf-8")
        (directory / "blocklist_report.md").write_text(self.to_markdown(), encoding="utf-8")


def find_leaks(records: Iterable[SkillRecord], benchmarks: Iterable[str]) -> BlocklistReport:
    """Scan `records` (any iterable, read once, so a stream from corpus_tools.ingest.iter_corpus
    works) and report which repositories name any of `benchmarks`."""
    names = resolve_benchmarks(benchmarks)
    patterns = {b: _pattern(b) for b in names}
    labels = {b: [label for label, _ in BENCHMARK_KEYWORDS[b]] for b in names}
    matches: dict[str, list[LeakMatch]] = {}
    skills_per_repo: dict[str, int] = {}
    for record in records:
        skills_per_repo[record.repo] = skills_per_repo.get(record.repo, 0) + 1
        head = f"{record.repo}/{record.path}\n{record.name}\n{record.description}"
        for path, text in [(record.path, head), *iter_documents(record)]:
            lower = text.lower()
            for bench, pattern in patterns.items():
                if not any(anchor in lower for anchor in _ANCHORS[bench]):
                    continue
                m = pattern.search(text)
                if m is None:
                    continue
                label = labels[bench][int(m.lastgroup[1:])] if m.lastgroup else bench
                lo, hi = max(0, m.start() - SNIPPET_CHARS), m.end() + SNIPPET_CHARS
                snippet = " ".join(text[lo:hi].split())
                matches.setdefault(record.repo, []).append(LeakMatch(bench, label, record.id, path, snippet))
    report = BlocklistReport(benchmarks=names, keywords=labels, skills_scanned=sum(skills_per_repo.values()),
                             repos_scanned=len(skills_per_repo))
    for repo, found in sorted(matches.items()):
        report.excluded[repo] = {
            "skills": skills_per_repo[repo],
            "matches": len(found),
            "benchmarks": sorted({m.benchmark for m in found}),
            "keywords": sorted({m.keyword for m in found}),
            "examples": [asdict(m) for m in found[:MAX_EXAMPLES_PER_REPO]],
        }
    return report


def apply_blocklist(records: Sequence[SkillRecord], benchmarks: Iterable[str]
                    ) -> tuple[list[SkillRecord], BlocklistReport]:
    """Records of the repositories that name none of `benchmarks`, and the report."""
    report = find_leaks(records, benchmarks)
    excluded = set(report.excluded)
    return [r for r in records if r.repo not in excluded], report


def benchmark_for(harness_name: str) -> str | None:
    """The benchmark whose blocklist a harness of this name needs (None: not an evaluation benchmark)."""
    name = ALIASES.get(harness_name.strip().lower(), harness_name.strip().lower())
    return name if name in BENCHMARK_KEYWORDS else None


def index_blocklists(directory: str | Path) -> list[str]:
    """The blocklists a saved section index was built with, from its meta.json (a sharded index: every shard's
    must agree, so the first one's is read). An index built before blocklists were recorded has none."""
    directory = Path(directory)
    meta_file = directory / "meta.json"
    if not meta_file.is_file():
        shards = sorted(directory.glob("shard-*/meta.json"))
        if not shards:
            raise ValueError(f"{directory} is not a section index (no meta.json)")
        meta_file = shards[0]
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    return resolve_benchmarks(meta.get("blocklists") or [])
