"""WebShop harness: catalog, splits, page flow, and the fidelity of the purchase reward (hand-computed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harnesses.webshop import WebShopHarness
from harnesses.webshop.catalog import Catalog, CatalogError
from harnesses.webshop.env import PRODUCTS_PER_PAGE, WebShopEnv
from harnesses.webshop.reward import normalize_color, token_set_ratio, word_list_nouns
from harnesses.webshop.search import SEARCH_RETURN_N
from raso.harness import get_harness


@pytest.fixture(scope="module")
def harness() -> WebShopHarness:
    return WebShopHarness()


def _goal_env(harness: WebShopHarness, asin: str, **goal_changes) -> WebShopEnv:
    goal = next(g for g in harness.catalog.goals if g.asin == asin)
    if goal_changes:
        goal = goal.model_copy(update=goal_changes)
    env = WebShopEnv(harness.catalog, harness.search, goal, max_steps=harness.max_steps)
    env.reset()
    return env


def _open_product(env: WebShopEnv, keywords: str, asin: str) -> None:
    """Search, page forward until `asin` is listed, and open it."""
    obs, *_ = env.step(f"search[{keywords}]")
    while f"[{asin}]" not in obs:
        assert "click[next >]" in obs, f"{asin} not found for search[{keywords}]"
        obs, *_ = env.step("click[Next >]")
    obs, *_ = env.step(f"click[{asin}]")
    assert obs.count(env.catalog.by_asin[asin].title) == 1


def _buy(env: WebShopEnv, options: list[str]) -> tuple[float, dict]:
    for value in options:
        obs, reward, terminated, _, _ = env.step(f"click[{value}]")
        assert f"[{value}] (selected)" in obs and not terminated
    _, reward, terminated, truncated, info = env.step("click[Buy Now]")
    assert terminated and not truncated
    return reward, info


# ---- catalog and splits ---------------------------------------------------------------------------------

def test_small_catalog_has_the_official_shape(harness):
    catalog = harness.catalog
    assert len(catalog.products) >= 50
    assert len({p.category for p in catalog.products}) >= 5
    assert len(catalog.goals) == 60
    for goal in catalog.goals:
        target = catalog.by_asin[goal.asin]
        values = {v for vs in target.options.values() for v in vs}
        assert set(goal.goal_options) <= values
        assert set(goal.attributes) <= set(target.attributes)
        assert goal.price_upper > target.price
        assert goal.instruction_text.endswith(f"price lower than {goal.price_upper:.2f} dollars")


def test_budget_follows_the_original_rule(harness):
    # the budget is one of the first four multiples of 10 above the price, never the lowest of them
    for goal in harness.catalog.goals:
        price = harness.catalog.by_asin[goal.asin].price
        steps = [10.0 * i for i in range(1, 100) if 10.0 * i > price][:4]
        assert goal.price_upper in steps[1:]


def test_splits_are_disjoint_deterministic_and_sized(harness):
    splits = harness.splits()
    assert {k: len(v) for k, v in splits.items()} == {"train": 20, "val": 10, "test": 30}
    ids = [t.id for tasks in splits.values() for t in tasks]
    assert len(ids) == len(set(ids)) == 60
    again = WebShopHarness().splits()
    assert [t.id for t in again["test"]] == [t.id for t in splits["test"]]
    other_seed = WebShopHarness(seed=7).splits()
    assert [t.id for t in other_seed["test"]] != [t.id for t in splits["test"]]
    task = splits["train"][0]
    assert task.metadata["category"] and task.metadata["attributes"]


def test_registered_entry_point_builds_the_harness():
    h = get_harness("webshop")
    assert isinstance(h, WebShopHarness) and h.name == "webshop"
    assert "search[" in h.action_instructions and "Buy Now" in h.harness_description


def test_harness_description_matches_the_environment(harness):
    text = harness.harness_description
    assert f"At most {harness.max_steps} actions" in text
    assert f"up to {PRODUCTS_PER_PAGE} products per page" in text
    assert f"at most {SEARCH_RETURN_N} results" in text


def test_parse_action_takes_the_last_action_line(harness):
    reply = "Thought: the shoes look right.\nAction: click[navy]\nAction: click[Buy Now]"
    assert harness.parse_action(reply) == "click[Buy Now]"
    # a reply cut off by the token limit ends in a bare "Action:"; the last complete action counts
    assert harness.parse_action("Action: click[navy]\nThought: then buy.\nAction:") == "click[navy]"
    assert harness.parse_action("Action:\nThought: hmm") == "Action:\nThought: hmm"  # no action: the reply


# ---- page flow ------------------------------------------------------------------------------------------

def test_page_flow_paging_options_and_sub_pages(harness):
    env = _goal_env(harness, "B0WS000025")  # men's running shoes
    obs, info = env.reset()
    assert info["available_actions"] == ["search[<keywords>]"] and "Instruction:" in obs
    obs, *_ = env.step("search[shoes lightweight running sneakers men]")
    total = int(re.search(r"Total results: (\d+)", obs).group(1))
    assert total >= 3 and obs.count("[B0WS") == min(total, PRODUCTS_PER_PAGE)

    broad = _goal_env(harness, "B0WS000025")
    obs, *_ = broad.step("search[black white grey free]")  # common words: more than one page
    assert "[Next >]" in obs and "[< Prev]" not in obs
    first_page = re.findall(r"\[(B0WS\d+)\]", obs)
    obs, *_ = broad.step("click[Next >]")
    second_page = re.findall(r"\[(B0WS\d+)\]", obs)
    assert "Page 2" in obs and "[< Prev]" in obs and not set(first_page) & set(second_page)
    obs, *_ = broad.step("click[< Prev]")
    assert re.findall(r"\[(B0WS\d+)\]", obs) == first_page

    obs, *_ = env.step("click[B0WS000025]")
    assert "color: [black] [grey] [navy]" in obs
    obs, *_ = env.step("click[navy]")
    obs, *_ = env.step("click[Features]")
    assert "- Breathable knit mesh upper" in obs
    obs, *_ = env.step("click[< Prev]")
    assert "[navy] (selected)" in obs  # options survive a sub page
    obs, *_ = env.step("click[< Prev]")
    assert "Total results" in obs
    obs, *_ = env.step("click[B0WS000025]")
    assert "(selected)" not in obs  # leaving the item page clears the options


def test_invalid_actions_change_nothing_but_cost_a_step(harness):
    env = _goal_env(harness, "B0WS000001")
    start, _ = env.reset()
    obs, reward, terminated, truncated, info = env.step("buy the shampoo")
    assert obs.startswith("Invalid action") and obs.endswith(start.split("\n\n", 1)[1])  # the page, unchanged
    obs, *_ = env.step("click[Buy Now]")
    assert "not an available button" in obs and info["page"] == "search"
    env.step("search[shampoo]")
    obs, *_ = env.step("search[lipstick]")
    assert obs.startswith("Searching works from the search page only")
    assert env.steps == 4 and reward == 0 and not terminated and not truncated


def test_step_budget_truncates_with_zero_reward(harness):
    goal = harness.catalog.goals[0]
    env = WebShopEnv(harness.catalog, harness.search, goal, max_steps=3)
    env.reset()
    env.step("search[shampoo]")
    env.step("click[Back to Search]")
    obs, reward, terminated, truncated, _ = env.step("search[shampoo]")
    assert truncated and not terminated and reward == 0 and "step budget" in obs
    with pytest.raises(RuntimeError):
        env.step("click[Back to Search]")


# ---- reward fidelity ------------------------------------------------------------------------------------

def test_oracle_buying_the_target_with_its_options_scores_one_on_every_goal(harness):
    for task in [t for tasks in harness.splits().values() for t in tasks]:
        goal = harness.goal(task)
        env = harness.make_env(task)
        env.reset()
        _open_product(env, goal.instruction_text, goal.asin)
        reward, info = _buy(env, goal.goal_options)
        assert reward == 1.0, (goal.id, info["reward_info"])
        assert info["won"] and info["soft_score"] == 1.0


def test_wrong_option_gets_the_partial_reward(harness):
    # goal B0WS000025: attributes [lightweight, rubber sole], options [navy, 10], price 45.99 < budget.
    env = _goal_env(harness, "B0WS000025")
    _open_product(env, "lightweight running shoes", "B0WS000025")
    reward, info = _buy(env, ["black", "10"])
    # attributes 2/2; goal option "navy" is matched by no chosen value, "10" by the chosen "10";
    # price within budget: (2 + 1 + 1) / (2 + 2 + 1), same product so r_type = 1.
    assert info["reward_info"]["option_matches"] == 1
    assert reward == pytest.approx(4 / 5)


def test_missing_option_selection_gets_the_partial_reward(harness):
    env = _goal_env(harness, "B0WS000025")
    _open_product(env, "lightweight running shoes", "B0WS000025")
    reward, _ = _buy(env, ["navy"])  # the size is never chosen
    assert reward == pytest.approx((2 + 1 + 1) / 5)


def test_wrong_product_of_the_same_kind_gets_the_partial_reward(harness):
    # goal B0WS000004 (matte lipstick, attributes [long lasting, waterproof], option [mauve], price 9.99,
    # budget >= 20); bought instead: B0WS000006, the lip stain duo at $19.00 in "plum".
    env = _goal_env(harness, "B0WS000004")
    _open_product(env, "long lasting lip stain", "B0WS000006")
    reward, info = _buy(env, ["plum"])
    details = info["reward_info"]
    # r_type: same search query group -> match; the titles share "long" and "lip", 2 of the target's 10 words
    # (matte liquid lipstick long lasting waterproof lip color hour wear) -> title score 0.2 >= 0.1: r_type stays 1.
    target_nouns = word_list_nouns(harness.catalog.by_asin["B0WS000004"].title)
    assert target_nouns == ("matte", "liquid", "lipstick", "long", "lasting", "waterproof", "lip", "color", "hour",
                            "wear")
    assert details["query_match"] and details["title_score"] == pytest.approx(2 / 10) and details["r_type"] == 1.0
    # attributes: "long lasting" is in its attribute list, "waterproof" appears nowhere -> 1;
    # option "plum" vs goal "mauve" -> 0; price 19.00 <= budget -> 1.  (1 + 0 + 1) / (2 + 1 + 1) = 0.5
    assert (details["attribute_matches"], details["option_matches"], details["price_ok"]) == (1, 0, True)
    assert reward == pytest.approx(0.5)


def test_unrelated_product_scores_zero(harness):
    env = _goal_env(harness, "B0WS000004")  # a lipstick goal
    _open_product(env, "hdmi cable", "B0WS000052")  # an 8K HDMI cable
    reward, info = _buy(env, ["10 ft"])
    # no shared query, category level or title noun: title score 0 -> r_type 0 -> reward 0
    assert info["reward_info"]["title_score"] == 0 and info["reward_info"]["r_type"] == 0.0
    assert reward == 0.0


def test_over_budget_price_loses_the_price_share(harness):
    # target B0WS000001 (price 18.99), with a budget of 10 dollars: attributes 3/3, option 16 fl oz matches,
    # price fails: (3 + 1 + 0) / (3 + 1 + 1) = 0.8
    env = _goal_env(harness, "B0WS000001", price_upper=10.0)
    _open_product(env, "argan oil sulfate free shampoo", "B0WS000001")
    reward, info = _buy(env, ["16 fl oz"])
    assert info["reward_info"]["price_ok"] is False
    assert reward == pytest.approx(4 / 5)


def test_token_set_ratio_and_colour_normalisation():
    assert token_set_ratio("16 fl oz", "oz fl 16") == 100
    assert token_set_ratio("sulfate free", "Sulfate-Free shampoo") == 100  # subset of the other's words
    assert token_set_ratio("black", "block") == 80  # 2 * LCS(4) / (5 + 5)
    assert token_set_ratio("navy", "") == 0
    assert normalize_color("heather grey") == "grey" and normalize_color("16 fl oz") == "16 fl oz"


# ---- official data files --------------------------------------------------------------------------------

def _write_official(folder: Path) -> None:
    products = [
        {"asin": "B000000001", "name": "Red Running Shoe", "full_description": "A shoe.", "small_description":
         "lightweight", "pricing": "$10.00 - $20.00", "images": ["x"], "product_category": "A › B › C",
         "category": "fashion", "query": "Running Shoe ",
         "customization_options": {"Color": [{"value": "Red/Black", "image": None}], "Size": None}},
        {"asin": "B000000001", "name": "duplicate", "pricing": "$1.00", "query": "x"},
        {"asin": "TOO-LONG-ASIN-1", "name": "skipped", "pricing": "$1.00", "query": "x"},
        {"asin": "B000000002", "name": "Blue Hat", "full_description": "", "small_description": ["warm"],
         "pricing": "", "images": ["x"], "product_category": "A › D", "category": "fashion", "query": "hat",
         "customization_options": None},
    ]
    (folder / "items_shuffle_1000.json").write_text(json.dumps(products))
    (folder / "items_ins_v2_1000.json").write_text(json.dumps({"B000000001": {"attributes": ["lightweight"]}}))
    (folder / "items_human_ins.json").write_text(json.dumps({
        "B000000001": [{"instruction": "i want a light red shoe.", "instruction_attributes": ["lightweight"],
                        "instruction_options": {"color": "red | black"}},
                       {"instruction": "no attributes", "instruction_attributes": [], "instruction_options": []}],
        "B000000002": [{"instruction": "a warm hat", "instruction_attributes": ["warm"], "instruction_options": []}],
    }))


def test_reads_the_official_file_format(tmp_path):
    _write_official(tmp_path)
    h = WebShopHarness(tmp_path)
    shoe = h.catalog.by_asin["B000000001"]
    assert [p.asin for p in h.catalog.products] == ["B000000001", "B000000002"]
    assert shoe.options == {"color": ["red | black"]} and shoe.query == "running shoe"
    assert shoe.price_tag == "$10.0 to $20.0" and 10.0 <= shoe.price <= 20.0
    assert WebShopHarness(tmp_path).catalog.by_asin["B000000001"].price == shoe.price  # seeded, reproducible
    assert h.catalog.by_asin["B000000002"].price == 100.0 and h.catalog.by_asin["B000000002"].attributes == [
        "DUMMY_ATTR"]
    assert [g.id for g in h.catalog.goals] == ["B000000001-0", "B000000002-0"]  # no-attribute goal skipped
    goal = h.catalog.goals[0]
    assert goal.goal_options == ["red | black"] and goal.instruction_text.startswith("i want a light red shoe, and")
    env = WebShopEnv(h.catalog, h.search, goal)
    env.reset()
    _open_product(env, "red shoe", "B000000001")
    reward, _ = _buy(env, ["red | black"])
    assert reward == 1.0


def test_bad_data_gives_clear_errors(tmp_path):
    with pytest.raises(CatalogError, match="not found"):
        WebShopHarness(tmp_path / "missing")
    with pytest.raises(CatalogError, match="no items_shuffle"):
        WebShopHarness(tmp_path)
    _write_official(tmp_path)
    (tmp_path / "items_ins_v2_1000.json").write_text("{not json")
    with pytest.raises(CatalogError, match="not valid JSON"):
        WebShopHarness(tmp_path)
    with pytest.raises(CatalogError, match="all three"):
        WebShopHarness(products_path=tmp_path / "items_shuffle_1000.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"asin": "B1"}]))
    with pytest.raises(CatalogError, match="malformed"):
        Catalog.load(bad, tmp_path / "items_human_ins.json", tmp_path / "items_human_ins.json")


def test_loading_pauses_the_cyclic_gc_and_always_restores_it(tmp_path):
    import gc

    assert gc.isenabled()
    _write_official(tmp_path)
    assert len(WebShopHarness(tmp_path).catalog.products) == 2 and gc.isenabled()
    (tmp_path / "items_human_ins.json").write_text("{not json")
    with pytest.raises(CatalogError):
        WebShopHarness(tmp_path)
    assert gc.isenabled()  # a failed load does not leave the collector off
    gc.disable()
    try:
        Catalog.small()
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()
