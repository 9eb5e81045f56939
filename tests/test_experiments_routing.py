"""SkillRouter per task, as the paper: each test task's rollout runs with the whole corpus skill routed from that
task's own instruction; the routes are recorded in result.json, kept across a resume, and made only from an index
the leakage guard accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_experiments_support import MARKER, SMALL_OPTIONS, _text, corpus_section, overrides, scripted_models

from experiments.results import CellResult, read_results
from experiments.runner import run_experiment

CONFIGS = Path(__file__).resolve().parent.parent / "experiments" / "configs"
TOPICS = {"name": "test_experiments_support:TopicHarness", "options": {"n_tasks": 4}}
SHOP = {"name": "test_experiments_support:ShopNamedTopicHarness", "options": {"n_tasks": 4}}
APPLES, STARS = "Count the apples in the orchard basket", "Count the stars of the night sky"


def _topic_index(path: Path, *, with_apples: bool = True) -> Path:
    from corpus_tools.index import SectionIndex

    sections = [
        corpus_section("sky/telescope", "star-gazing",
                       "Stars of the night sky through a telescope: name each constellation you see."),
        corpus_section("docs/pdf", "pdf-tables", "Extract the tables of a PDF file with a parser."),
    ]
    if with_apples:
        sections.append(corpus_section("fruit/orchard", "orchard-apples",
                                       f"Apples in the orchard basket: {MARKER}, say 1, then 2, one number per "
                                       "action."))
    return SectionIndex.build(sections).save(path)


def _skillrouter(tmp_path: Path, results: str, harness: dict[str, Any], agent: Any, optimizer: Any,
                 **optimize: Any) -> Any:
    values = overrides(tmp_path, agent, optimizer, harnesses=[harness], seeds=[0], methods=["skillrouter"],
                       results_dir=str(tmp_path / results), optimize={**SMALL_OPTIONS, **optimize})
    return run_experiment(CONFIGS / "init_table.yaml", values)


def _skill_sent(call: list[dict[str, Any]]) -> set[str]:
    text = _text(call)
    return {name for name in ("orchard-apples", "star-gazing", "pdf-tables", "apple-solver")
            if f'<skill name="{name}">' in text}


def test_each_task_runs_with_the_skill_routed_from_its_own_instruction(tmp_path: Path) -> None:
    index = _topic_index(tmp_path / "index")
    agent, optimizer = scripted_models()
    summary = _skillrouter(tmp_path, "results", TOPICS, agent, optimizer, **{"retrieval.index": str(index)})
    assert summary.failed == []
    [result] = read_results(Path(summary.results_dir))
    # what the scripted agent was sent: the apple tasks' prompts hold the apple skill alone, the star tasks' the star
    # skill alone
    sent: dict[str, set[str]] = {"apples": set(), "stars": set()}
    for call in agent.calls:
        topic = "apples" if APPLES in _text(call) else "stars" if STARS in _text(call) else None
        assert topic is not None
        sent[topic] |= _skill_sent(call)
    assert sent == {"apples": {"orchard-apples"}, "stars": {"star-gazing"}}
    # only the apple skill carries the counting marker: each rollout was scored with its own skill
    assert {t.task_id: t.reward for t in result.test_per_task} == {
        "count-0": 1.0, "count-1": 0.0, "count-2": 1.0, "count-3": 0.0}
    assert optimizer.calls == []  # SkillRouter makes no model call of its own
    # and result.json says which skill each task got
    routed = {r.task_id: (r.name, r.repo, r.path) for r in result.routing}
    apples = ("orchard-apples", "fruit/orchard", "orchard-apples/SKILL.md")
    stars = ("star-gazing", "sky/telescope", "star-gazing/SKILL.md")
    assert routed == {"count-0": apples, "count-1": stars, "count-2": apples, "count-3": stars}
    assert [r.task_id for r in result.routing] == [t.task_id for t in result.test_per_task]


def test_routes_are_recorded_and_kept_across_a_resume(tmp_path: Path) -> None:
    index = _topic_index(tmp_path / "index")
    agent, optimizer = scripted_models()
    first = _skillrouter(tmp_path, "results", TOPICS, agent, optimizer, **{"retrieval.index": str(index)})
    [result] = read_results(Path(first.results_dir))
    cell = Path(first.results_dir) / "cells" / result.cell
    on_disk = json.loads((cell / "result.json").read_text())["routing"]
    assert [(r["task_id"], r["skill_id"]) for r in on_disk] == [
        ("count-0", "fruit/orchard/orchard-apples/SKILL.md"), ("count-1", "sky/telescope/star-gazing/SKILL.md"),
        ("count-2", "fruit/orchard/orchard-apples/SKILL.md"), ("count-3", "sky/telescope/star-gazing/SKILL.md")]
    assert all(r["method"] == "bm25" and r["score"] > 0 for r in on_disk)

    # the cell is unfinished again, and its index changed under it: routing again now would send the apple tasks
    # elsewhere, but the resumed cell keeps every task's route (and so replays its cached agent replies)
    (cell / "result.json").unlink()
    _topic_index(tmp_path / "index", with_apples=False)
    calls = len(agent.calls)
    again = _skillrouter(tmp_path, "results", TOPICS, agent, optimizer, **{"retrieval.index": str(index)})
    assert (again.ran, again.failed) == (1, [])
    [resumed] = read_results(Path(again.results_dir))
    assert resumed.routing == result.routing
    assert resumed.test_per_task == result.test_per_task
    assert len(agent.calls) == calls


def _corpus_with_a_leak(path: Path) -> Path:
    """A corpus (jsonl) whose best match for the apple tasks is a skill from a repository that names WebShop."""
    rows = [
        {"repo": "leak/tuned", "path": "apple-solver/SKILL.md", "name": "apple-solver",
         "description": "Count the apples in the orchard basket, tuned on WebShop episodes.",
         "body": "# Apples\nCount the apples in the orchard basket from 1, one number per action (WebShop)."},
        {"repo": "fruit/orchard", "path": "orchard-apples/SKILL.md", "name": "orchard-apples",
         "description": "Apples in an orchard.", "body": f"# Apples\nApples in the orchard: {MARKER}, say 1, then 2."},
        {"repo": "sky/telescope", "path": "star-gazing/SKILL.md", "name": "star-gazing",
         "description": "Stars of the night sky.", "body": "# Stars\nStars of the night sky through a telescope."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_router_uses_only_an_index_the_leakage_guard_accepts(tmp_path: Path) -> None:
    from corpus_tools.build import build_corpus_index

    corpus = _corpus_with_a_leak(tmp_path / "corpus.jsonl")
    unfiltered, blocklisted = tmp_path / "index-all", tmp_path / "index-webshop"
    build_corpus_index([corpus], unfiltered, scan=False, keep_all_sections=True)
    build_corpus_index([corpus], blocklisted, blocklists=["webshop"], scan=False, keep_all_sections=True)
    agent, optimizer = scripted_models()

    def apple_routes(result: CellResult) -> set[tuple[str, str]]:
        return {(r.name, r.repo) for r in result.routing if r.task_id in ("count-0", "count-2")}

    # an index built without the webshop blocklist is refused before anything is routed or run
    refused = _skillrouter(tmp_path, "refused", SHOP, agent, optimizer, **{"retrieval.index": str(unfiltered)})
    assert len(refused.failed) == 1 and "not the 'webshop' blocklist" in refused.failed[0]
    assert agent.calls == [] and not list((tmp_path / "refused").glob("**/routes.json"))
    # the blocklisted index never holds the leaking repository: the apple tasks get the clean apple skill
    clean = _skillrouter(tmp_path, "clean", SHOP, agent, optimizer, **{"retrieval.index": str(blocklisted)})
    assert clean.failed == []
    [result] = read_results(Path(clean.results_dir))
    assert apple_routes(result) == {("orchard-apples", "fruit/orchard")}
    assert all(r.repo != "leak/tuned" for r in result.routing) and len(result.routing) == 4
    # (without the blocklist, when explicitly allowed, the leaking skill is what the apple tasks would get)
    leaky = _skillrouter(tmp_path, "leaky", SHOP, agent, optimizer, **{"retrieval.index": str(unfiltered),
                                                                           "retrieval.allow_unfiltered_index": True})
    assert leaky.failed == []
    assert apple_routes(read_results(Path(leaky.results_dir))[0]) == {("apple-solver", "leak/tuned")}
