"""WebShop reward parity: our `purchase_reward` against an independent re-statement of upstream's rules
(princeton-nlp/WebShop `web_agent_site/engine/goal.py` and `normalize.py`, restated here from their text, with
the token-set ratio computed by hand instead of with rapidfuzz), on every (goal, purchase) pair of the shipped
catalog: each goal x each product x each choice of one value or none per option group (21,060 pairs)."""

from __future__ import annotations

import functools
import itertools
import os

import pytest

from harnesses.webshop import WebShopHarness
from harnesses.webshop.catalog import Goal, Product
from harnesses.webshop.reward import purchase_reward, spacy_nouns, word_list_nouns

# upstream normalize.py's COLOR_SET, in its order
UPSTREAM_COLOURS = """alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown
burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee cognac copper coral
cranberry cream crystal dark denim eggplant elephant espresso fuchsia gold granite grape graphite grass gray green grey
heather indigo ivory ivy khaki lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha
multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple rainbow red rose royal rust
sand sapphire seashell silver skull slate steel stone stonewash sunflower tan taupe teal tiger turquoise violet walnut
wheat white wine yellow""".split()


def upstream_colour(text: str) -> str:
    return next((c for c in UPSTREAM_COLOURS if c in text), text)


def _thefuzz_words(text: str) -> list[str]:
    """thefuzz: drop chars 128-255, anything not alphanumeric becomes a space, lower case, split."""
    kept = "".join(ch if ch.isalnum() else " " for ch in text if not 128 <= ord(ch) <= 255)
    return kept.lower().split()


def _lcs_ratio(a: str, b: str) -> float:
    if not a and not b:
        return 100.0
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return 200.0 * table[-1][-1] / (len(a) + len(b))


@functools.cache
def upstream_token_set_ratio(s1: str, s2: str) -> int:
    w1, w2 = set(_thefuzz_words(s1)), set(_thefuzz_words(s2))
    if not w1 or not w2:
        return 0
    both = " ".join(sorted(w1 & w2))
    first = (both + " " + " ".join(sorted(w1 - w2))).strip()
    second = (both + " " + " ".join(sorted(w2 - w1))).strip()
    if both and (first == both or second == both):
        return 100
    return round(max(_lcs_ratio(both, first), _lcs_ratio(both, second), _lcs_ratio(first, second)))


def upstream_reward(product: Product, goal: Goal, price: float, options: dict[str, str], nouns) -> float:
    # get_type_reward
    query_match = product.query == goal.query
    categories = [set(x.strip() for x in c.split("›")) for c in (product.product_category, goal.product_category)]
    category_match = len(categories[0] & categories[1]) >= 2
    bought, desired = list(nouns(product.title)), list(nouns(goal.name))
    title_score = len(set(bought) & set(desired)) / len(desired) if desired else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    # get_attribute_reward
    attr_hits = 0
    for g_attr in goal.attributes:
        if any(upstream_token_set_ratio(p_attr, g_attr) > 85 for p_attr in product.attributes):
            attr_hits += 1
        elif (g_attr in product.title.lower() or g_attr in " ".join(product.bullet_points).lower()
              or g_attr in product.description.lower()):
            attr_hits += 1
    # get_option_reward
    chosen = [upstream_colour(o) for o in options.values()]
    option_hits = 0
    for g_option in (upstream_colour(o) for o in goal.goal_options):
        for p_option in chosen:
            if upstream_token_set_ratio(p_option, g_option) > 85:
                option_hits += 1
                break
    r_price = price <= goal.price_upper
    total = (attr_hits + option_hits + r_price) / (len(goal.attributes) + len(goal.goal_options) + 1)
    return total * r_type


def _purchases(product: Product):
    groups = list(product.options.items())
    for choice in itertools.product(*[[None, *values] for _, values in groups]):
        yield {name: value for (name, _), value in zip(groups, choice) if value is not None}


def _mismatches(nouns) -> tuple[int, int, list]:
    catalog = WebShopHarness().catalog
    pairs, wrong = 0, []
    for goal in catalog.goals:
        for product in catalog.products:
            for options in _purchases(product):
                ours, _ = purchase_reward(product, goal, product.price, options, nouns)
                theirs = upstream_reward(product, goal, product.price, options, nouns)
                pairs += 1
                if ours != pytest.approx(theirs, abs=1e-12):
                    wrong.append((goal.id, product.asin, options, ours, theirs))
    return pairs, len(wrong), wrong[:5]


def test_reward_matches_upstream_rules_on_every_goal_purchase_pair():
    pairs, n_wrong, examples = _mismatches(word_list_nouns)
    assert pairs == 21060
    assert n_wrong == 0, examples


@pytest.mark.spacy_model
def test_reward_matches_upstream_with_spacy_nouns():
    try:
        nouns = spacy_nouns(os.environ.get("RASO_WEBSHOP_SPACY_MODEL", "en_core_web_sm"))
    except ImportError as exc:
        pytest.fail(f"the spacy_model test needs the webshop-spacy extra and its model: {exc}", pytrace=False)
    pairs, n_wrong, examples = _mismatches(nouns)
    assert pairs == 21060 and n_wrong == 0, examples


def test_restated_ratio_agrees_with_known_values():
    # the independent ratio itself: values worked out by hand
    assert upstream_token_set_ratio("16 fl oz", "oz FL 16") == 100
    assert upstream_token_set_ratio("black", "block") == 80  # LCS 4 of 5 + 5
    assert upstream_token_set_ratio("navy blue", "blue") == 100  # one side's words within the other's
    assert upstream_token_set_ratio("x-large", "large") == 100
    assert upstream_token_set_ratio("", "red") == 0
    assert upstream_colour("heather grey") == "grey" and upstream_colour("light pink") == "light"
