"""WebShop's upstream text observation mode (`observation="text"`): upstream's `WebAgentTextEnv` page text joined
with " [SEP] ", search from any page, "Next >" always on a results page, no reviews, silent invalid actions."""

from __future__ import annotations

import pytest

from harnesses.webshop import WebShopHarness
from harnesses.webshop.catalog import Catalog
from harnesses.webshop.env import WebShopEnv

SEP = " [SEP] "


@pytest.fixture(scope="module")
def harness() -> WebShopHarness:
    return WebShopHarness(observation="text")


def _env(harness: WebShopHarness, asin: str, catalog: Catalog | None = None) -> WebShopEnv:
    goal = next(g for g in harness.catalog.goals if g.asin == asin)
    env = WebShopEnv(catalog or harness.catalog, harness.search, goal, observation="text")
    env.reset()
    return env


def test_the_option_switches_the_page_format(harness):
    task = harness.tasks("test")[0]
    text_obs, text_info = harness.make_env(task).reset()
    annotated_obs, _ = WebShopHarness().make_env(task).reset()
    instruction = harness.goal(task).instruction_text
    assert text_obs == SEP.join(["WebShop", "Instruction:", instruction, "Search"])
    assert annotated_obs.startswith(f"Instruction: {instruction}\n") and annotated_obs.endswith("\n[Search]")
    assert text_info["available_actions"] == ["search[<keywords>]"]
    assert "[SEP]" in harness.harness_description and "[SEP]" not in WebShopHarness().harness_description
    with pytest.raises(ValueError, match="observation"):
        WebShopHarness(observation="html")


def test_results_page_always_offers_next_and_lists_asin_title_price(harness):
    env = _env(harness, "B0WS000025")
    obs, *_ = env.step("search[trail running shoes waterproof hiking]")
    total = len(env.session.results)
    assert 0 < total <= 10  # one page only, yet "Next >" is shown, as upstream's template does
    first = harness.catalog.by_asin[env.session.results[0]]
    assert obs.startswith(SEP.join(["Instruction:", env.goal.instruction_text, "Back to Search",
                                    f"Page 1 (Total results: {total})", "Next >", first.asin, first.title,
                                    first.price_tag]))
    obs, _, _, _, info = env.step("click[Next >]")
    assert obs.endswith(SEP.join(["Back to Search", f"Page 2 (Total results: {total})", "< Prev", "Next >"]))
    assert "click[< prev]" in info["available_actions"]


def test_search_works_from_any_page_and_invalid_actions_change_nothing_silently(harness):
    env = _env(harness, "B0WS000025")
    env.step("search[running shoes]")
    env.step("click[B0WS000025]")
    item, *_ = env.step("click[Features]")
    obs, reward, terminated, truncated, _ = env.step("click[Buy Now]")  # not on a sub page
    assert obs == item and reward == 0 and not terminated
    obs, *_ = env.step("search[yoga pants]")
    assert env.session.page == "results" and "Page 1 (Total results:" in obs and env.session.asin is None


def test_item_page_lists_option_groups_and_no_selection_marks(harness):
    env = _env(harness, "B0WS000025")
    env.step("search[running shoes]")
    obs, *_ = env.step("click[B0WS000025]")
    product = harness.catalog.by_asin["B0WS000025"]
    assert SEP.join(["< Prev", "color", "black", "grey", "navy", "size", "8", "9", "10", "11", "12",
                     product.title, f"Price: {product.price_tag}", "Rating: N.A.", "Description", "Features",
                     "Reviews", "Buy Now"]) in obs
    selected, *_ = env.step("click[navy]")
    assert selected == obs and env.session.options == {"color": "navy"}  # the page text does not mark it


def test_reviews_page_shows_no_reviews_as_upstreams_loader(harness):
    product = harness.catalog.by_asin["B0WS000025"]
    reviewed = product.model_copy(update={"reviews": [{"title": "great", "score": 5, "body": "fits well"}],
                                          "rating": "4.5"})
    catalog = Catalog([reviewed if p.asin == product.asin else p for p in harness.catalog.products],
                      harness.catalog.goals)
    env = _env(harness, "B0WS000025", catalog)
    env.step("search[running shoes]")
    item, *_ = env.step("click[B0WS000025]")
    obs, *_ = env.step("click[Reviews]")
    assert obs.endswith("Back to Search [SEP] < Prev") and "fits well" not in obs
    assert "Rating: N.A." in item


def test_text_mode_pays_the_same_reward_as_the_annotated_mode(harness):
    annotated = WebShopHarness()
    for task in harness.tasks("val"):
        goal = harness.goal(task)
        rewards = []
        for h in (harness, annotated):
            env = h.make_env(task)
            env.reset()
            env.step(f"search[{h.catalog.by_asin[goal.asin].title}]")
            env.step(f"click[{goal.asin}]")
            for value in goal.goal_options:
                env.step(f"click[{value}]")
            _, reward, terminated, _, _ = env.step("click[Buy Now]")
            assert terminated
            rewards.append(reward)
        assert rewards[0] == rewards[1] == 1.0
