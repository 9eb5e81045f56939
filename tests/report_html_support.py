"""A scripted RASO run for the report.html tests: the real RASI/RASU steps over the starter corpus, the real
execution agent on the toy harness, scripted models that write hostile markup into a lesson, the skill and a
trajectory (and a hostile corpus section planted into the recorded proposal), and an HTML parser that lists
what in a page could run or navigate."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from test_engine_support import named_scripted_model, toy_agent_reply

#: Markup that must stay text: a script, an event handler, javascript: links (markdown and HTML).
HOSTILE = ('<script>alert("pwned")</script><img src=x onerror="alert(1)">'
           '[click me](javascript:alert(2)) <a href="javascript:alert(3)">go</a>')
TOY = "test_engine_support:ToyHarness"
_LEVEL = re.compile(r"LEVEL=(\d+)")


def hostile_optimizer(messages: list[dict[str, Any]]) -> str:
    """One JSON object for every optimizer role (extra keys are ignored): each skill raises the LEVEL of the
    skill in the prompt by one, and the lesson and the skill body carry HOSTILE."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    levels = [int(x) for x in _LEVEL.findall(text)]
    level = max(levels) + 1 if levels else 1
    return json.dumps({
        "requirements": [{"requirement": "answer format rule", "query": "answer format output"},
                         {"requirement": "checking the result", "query": "verify result check"}],
        "lesson": f"Reply with the exact answer format and check it. {HOSTILE}",
        "gradients": [{"failure_mode": "harder tasks answered 'no' because the level is too low", "evidence": "t4",
                       "query": "answer format check level"}],
        "name": "toy-skill", "description": "Answers toy tasks.",
        "body": (f"Answer every toy task in the exact answer format.\n{HOSTILE}\n"
                 + "".join(f"Rule {n}: reply with the exact format, then check it.\n" for n in range(1, level + 1))
                 + f"LEVEL={level}"),
    })


def hostile_agent(messages: list[dict[str, Any]]) -> str:
    """The toy harness's scripted policy, with HOSTILE in its thought (so in every trajectory)."""
    return toy_agent_reply(messages).replace("Thought: ", f"Thought: {HOSTILE} ", 1)


def make_run(run_dir: Path, *, budget_rollouts: int | None = None) -> Path:
    """A finished scripted run (RASI + RASU, one epoch of minibatch 3, test on) in `run_dir`."""
    import argparse

    from raso.cli import runs

    agent = named_scripted_model("html-report-agent", hostile_agent)
    optimizer = named_scripted_model("html-report-optimizer", hostile_optimizer)
    parser = argparse.ArgumentParser(prog="raso")
    runs.register(parser.add_subparsers(dest="command"))
    argv = ["optimize", "--harness", TOY, "--model", agent, "--optimizer-model", optimizer, "--init", "rasi",
            "--update", "rasu", "--epochs", "1", "--minibatch", "3", "--workers", "1", "-k", "2",
            "--num-requirements", "2", "--run-dir", str(run_dir), "--no-progress"]
    if budget_rollouts is not None:
        argv += ["--budget-rollouts", str(budget_rollouts)]
    args = parser.parse_args(argv)
    code = args.func(args)
    assert code == 0, f"the scripted run failed with exit code {code}"
    return run_dir


def make_gate_run(run_dir: Path) -> Path:
    """A finished scripted run with the `significant` gate (level 0.1, 2 rollouts per val task) on the toy harness,
    whose val score is the share of its 4 val tasks the skill's LEVEL covers: s0 LEVEL=0; iteration 1 proposes
    LEVEL=1 (one task better: p 0.5, rejected), iteration 2 LEVEL=4 (all four better: p 1/16, accepted). The agent
    is priced ($1000 per million tokens), so every candidate has a cost."""
    from test_engine_support import ToyHarness, toy_initializer, toy_proposer

    from raso.api import optimize
    from raso.engine import OptimizeConfig
    from raso.llm.scripted import ScriptedModel

    agent = ScriptedModel(toy_agent_reply, name="gate-html-agent")
    optimizer = ScriptedModel(["LEVEL=0", "LEVEL=1", "LEVEL=4"], name="gate-html-optimizer")
    config = OptimizeConfig(harness="toy", **{"models.target": agent.model,
                                              "models.optimizer": optimizer.model, "schedule.epochs": 1,
                                              "schedule.minibatch": 2, "schedule.workers": 1,
                                              "schedule.seed": 3, "schedule.test": False,
                                              "schedule.max_iterations": 2,
                                              "models.prices": {agent.model: "1000,1000", optimizer.model: "0,0"}}, init="rfsi",
                            update="rfsu", run_dir=run_dir,
                            gate={"mode": "significant", "level": 0.1, "rollouts_per_task": 2})
    optimize(ToyHarness(), config, initializer=toy_initializer, proposer=toy_proposer)
    return run_dir


def plant_hostile_corpus_section(run_dir: Path) -> str:
    """Put HOSTILE into the first retrieved corpus section of proposals/init.json (its text and heading path)
    and return that section's id: a corpus skill is third-party text like a model's reply."""
    path = run_dir / "proposals" / "init.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    section = next(s for sections in data["retrieved"] for s in sections)
    section["text"] = f"{section['text']}\n{HOSTILE}"
    section["ref"]["heading_path"] = f"{section['ref']['heading_path']} {HOSTILE}"
    path.write_text(json.dumps(data), encoding="utf-8")
    return section["ref"]["section_id"]


class PageAudit(HTMLParser):
    """Everything in a page that could run code or navigate: script elements (with their text), on*
    attributes, javascript: URLs in any attribute, and embedding elements; plus all text, unescaped."""

    URL_ATTRS = ("href", "src", "xlink:href", "action", "formaction", "data", "srcdoc")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.handlers: list[tuple[str, str]] = []
        self.javascript_urls: list[tuple[str, str]] = []
        self.embeds: list[str] = []
        self.text: list[str] = []
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        if tag in ("img", "iframe", "object", "embed", "frame", "base", "form", "meta") and not (
                tag == "meta" and dict(attrs).get("http-equiv") in (None, "Content-Security-Policy")):
            self.embeds.append(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append((tag, name))
            if name == "id" and value:
                self.ids.add(value)
            if name == "href" and value:
                self.hrefs.append(value)
            if name in self.URL_ATTRS and value and "javascript:" in re.sub(r"[\s\x00-\x1f]", "", value).lower():
                self.javascript_urls.append((tag, value))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def audit(page: str) -> PageAudit:
    parser = PageAudit()
    parser.feed(page)
    parser.close()
    return parser
