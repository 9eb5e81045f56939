"""The WebShop harness: shopping goals as RASO tasks, one text shop per task."""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from harnesses.paper_splits import PAPER_SIZES, check_split_option, data_label, demo_refusal, sample_split
from harnesses.webshop.action_space import webshop_action_is_valid, webshop_action_space
from harnesses.webshop.catalog import SMALL_CATALOG, Catalog, CatalogError, Goal
from harnesses.webshop.env import OBSERVATION_MODES, WebShopEnv
from harnesses.webshop.reward import noun_tagger
from harnesses.webshop.search import ProductSearch
from raso.harness import Harness, Task, TextEnv, TextTasks
from raso.harness.actions import ActionSpace, TaskNeeds

RESOURCE_DIR = Path(__file__).resolve().parent
# The standard WebShop split of the (shuffled) human goals: test 0-499, val 500-1499, train the rest.
OFFICIAL_TEST, OFFICIAL_VAL_END = 500, 1500


def _find_one(data_dir: Path, pattern: str, required: bool = True) -> Path | None:
    matches = sorted(data_dir.glob(pattern))
    if len(matches) > 1:
        raise CatalogError(f"several files match {pattern} in {data_dir}: {[m.name for m in matches]}; "
                           "pass the paths explicitly")
    if not matches:
        if required:
            raise CatalogError(f"no {pattern} in {data_dir} (the official WebShop data folder holds "
                               "items_shuffle_*.json, items_ins_v2_*.json and items_human_ins.json)")
        return None
    return matches[0]


def split_goals(goals: list[Goal], seed: int = 233) -> dict[str, list[Goal]]:
    """Shuffle the goals with `seed` (as the original server does) and cut them into splits.

    With the official data (more than 1,500 goals) the cut is WebShop's: test = first 500, val = next 1,000,
    train = the rest. A smaller goal set is cut in the same order by proportion: test = first half,
    val = the next sixth, train = the remaining third (the shipped 60-goal catalog: 30 / 10 / 20).
    """
    shuffled = list(goals)
    random.Random(seed).shuffle(shuffled)
    if len(shuffled) > OFFICIAL_VAL_END:
        test_end, val_end = OFFICIAL_TEST, OFFICIAL_VAL_END
    else:
        test_end = len(shuffled) // 2
        val_end = test_end + len(shuffled) // 6
    return {"train": shuffled[val_end:], "val": shuffled[test_end:val_end], "test": shuffled[:test_end]}


class WebShopHarness(Harness, TextTasks):
    """Text-mode WebShop. Without arguments it uses the small catalog shipped with raso (60 products, 60 goals);
    pass `data_dir` (a folder with the official files) or the file paths for real runs.

    `observation`: "annotated" (default: lines, selected options marked, an action list) or "text" (upstream's
    " [SEP] "-joined page text; see env.py). `type_match`: "words" (default, no dependency) or "spacy"
    (upstream's POS-tag nouns; needs the `webshop-spacy` extra and `spacy_model`, default en_core_web_sm).
    `reply_thought`: whether the reply grammar (embedded models) allows a one-line thought before the action
    (default True; a small model's thought may restate the task every turn and pull it back to searching).
    """

    name: ClassVar[str] = "webshop"
    resource_dir: ClassVar[Path] = RESOURCE_DIR
    # A purchase takes search, a product, its options and Buy Now; short replies keep 8 steps of the embedded
    # model within the main job's time.
    task_needs: ClassVar[TaskNeeds] = TaskNeeds(agent_steps=8, reply_tokens=128)

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        products_path: str | Path | None = None,
        attributes_path: str | Path | None = None,
        human_goals_path: str | Path | None = None,
        reviews_path: str | Path | None = None,
        num_products: int | None = None,
        max_steps: int = 15,
        seed: int = 233,
        observation: str = "annotated",
        type_match: str = "words",
        spacy_model: str = "en_core_web_sm",
        reply_thought: bool = True,
        split: str = "default",
    ):
        self.split = check_split_option(split)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        if self.split == "paper" and data_dir is None and human_goals_path is None:
            raise demo_refusal("webshop", "WebShop's official data (items_shuffle.json, items_ins_v2.json, "
                                          "items_human_ins.json from princeton-nlp/WebShop's setup)")
        if observation not in OBSERVATION_MODES:
            raise ValueError(f"observation must be one of {OBSERVATION_MODES}, not {observation!r}")
        self.max_steps = max_steps
        self.seed = seed
        self.observation = observation
        self.reply_thought = reply_thought
        self.type_match = type_match
        self.nouns = noun_tagger(type_match, spacy_model)  # fails here, not mid-run, when spaCy is missing
        if data_dir is not None:
            folder = Path(data_dir)
            if not folder.is_dir():
                raise CatalogError(f"WebShop data folder not found: {folder}")
            products_path = products_path or _find_one(folder, "items_shuffle*.json")
            attributes_path = attributes_path or _find_one(folder, "items_ins_v2*.json")
            human_goals_path = human_goals_path or _find_one(folder, "items_human_ins*.json")
            reviews_path = reviews_path or _find_one(folder, "reviews*.json", required=False)
        # the goal file, resolved: whether it is the small one shipped with raso decides the demo label
        self.goals_file = Path(human_goals_path or SMALL_CATALOG["human_goals"]).expanduser().resolve()
        if products_path is None and attributes_path is None and human_goals_path is None:
            self.catalog = Catalog.small(seed=seed)
        elif products_path and attributes_path and human_goals_path:
            self.catalog = Catalog.load(products_path, attributes_path, human_goals_path, reviews_path,
                                        num_products=num_products, seed=seed)
        else:
            raise CatalogError("give all three of products_path, attributes_path and human_goals_path "
                               "(or a data_dir holding them)")
        if not self.catalog.goals:
            raise CatalogError("the WebShop data holds no usable goals (human goals need attributes)")
        self._goals = {g.id: g for g in self.catalog.goals}
        if self.split == "paper" and len(self.catalog.goals) <= OFFICIAL_VAL_END:
            raise demo_refusal("webshop", f"WebShop's official human goals (more than {OFFICIAL_VAL_END}; this data "
                                          f"has {len(self.catalog.goals)})")
        self._search: ProductSearch | None = None
        self._splits: dict[str, list[Task]] | None = None

    def action_space(self, info: Mapping[str, Any]) -> ActionSpace | None:
        return webshop_action_space(info, thought=self.reply_thought)

    def action_is_valid(self, action: str, info: Mapping[str, Any]) -> bool | None:
        return webshop_action_is_valid(action, info)

    def _resource(self, filename: str) -> str:
        """The text mode has its own page and action descriptions (`<name>_text.md`)."""
        if self.observation == "text" and filename in ("harness_description.md", "action_format.md"):
            filename = filename.replace(".md", "_text.md")
        return super()._resource(filename)

    @property
    def search(self) -> ProductSearch:
        if self._search is None:
            self._search = ProductSearch(self.catalog.products)
        return self._search

    def splits(self) -> dict[str, list[Task]]:
        if self._splits is None:
            official = split_goals(self.catalog.goals, self.seed)
            if self.split == "paper":
                ids = sample_split({name: [g.id for g in goals] for name, goals in official.items()},
                                   PAPER_SIZES["webshop"])
                official = {name: [self._goals[i] for i in members] for name, members in ids.items()}
            self._splits = {split: [self._task(goal) for goal in goals] for split, goals in official.items()}
        return self._splits

    def data_label(self) -> str:
        """The shipped small catalog (however its path was given) is demo data. WebShop has no published
        paper manifest: its "paper" split is the paper's sizes drawn by a seeded rule, and says so."""
        if self.goals_file == SMALL_CATALOG["human_goals"].resolve():
            return "demo data (the small WebShop catalog shipped with raso)"
        where = self.data_dir.expanduser().resolve() if self.data_dir is not None else self.goals_file.parent
        if self.split == "paper":
            return f"paper-size seeded split of {where} (the paper's sizes, not its task ids)"
        return data_label(self.split, where)

    @staticmethod
    def _task(goal: Goal) -> Task:
        return Task(id=goal.id, instruction=goal.instruction_text, metadata={
            "asin": goal.asin, "category": goal.category, "query": goal.query,
            "attributes": goal.attributes, "goal_options": goal.goal_options, "price_upper": goal.price_upper,
        })

    def goal(self, task: Task) -> Goal:
        try:
            return self._goals[task.id]
        except KeyError:
            raise ValueError(f"task {task.id!r} is not a goal of this WebShop catalog") from None

    def make_env(self, task: Task) -> TextEnv:
        return WebShopEnv(self.catalog, self.search, self.goal(task), max_steps=self.max_steps,
                          observation=self.observation, nouns=self.nouns)
