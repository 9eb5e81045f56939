"""WebShop's purchase reward, re-implemented from the rule in the original `engine/goal.py`.

    reward = r_type * (attribute matches + option matches + [price <= budget]) / (#goal attributes + #goal options + 1)

- attribute match: a goal attribute fuzzy-matches (token-set ratio > 85) one of the product's mined attributes,
  or occurs verbatim in its title, bullet points or description;
- option match: for each option the buyer selected, its value equals a goal option (size options, exactly) or
  fuzzy-matches one (other options), or occurs verbatim in the title, bullet points or description;
  colours are first reduced to a base colour name, as the original does;
- r_type: 1.0 when the purchased product matches the target's search query, shares >= 2 category levels, or shares
  more than 20% of the target title's nouns; otherwise 0.5; 0.1 when under 10% of the nouns; 0 when none.

Differences from the original, on purpose (no spaCy, no thefuzz):
- nouns: the original tags the titles with spaCy's `en_core_web_lg` and keeps NOUN/PROPN tokens. We keep the
  title's alphabetic words minus English function words and a list of frequent product-title adjectives
  (`_NOT_NOUNS`). On titles this is close but not identical, so a title score can differ slightly.
- fuzzy matching: `token_set_ratio` below computes the same token-set ratio as thefuzz/rapidfuzz (indel similarity
  of the sorted intersection/difference strings, rounded to an integer), in plain Python.
- the sum can exceed the denominator when the buyer selects more options than the goal names (as in the
  original); the harness clamps the episode reward to 1.0 and keeps the raw value in `info`.
"""

from __future__ import annotations

import re
from typing import Any

from harnesses.webshop.catalog import Goal, Product

FUZZY_THRESHOLD = 85
EXACT_MATCH_OPTIONS = ("size",)

# Base colour names: an option value mentioning one of them is reduced to it (first hit in this order).
_BASE_COLORS = (
    "rose gold", "navy blue", "sky blue", "light blue", "dark blue", "dark grey", "light grey", "wine red",
    "hot pink", "off white", "army green", "olive green", "emerald green",
    "beige", "black", "blue", "bronze", "brown", "burgundy", "camel", "charcoal", "coffee", "copper", "coral",
    "cream", "gold", "gray", "green", "grey", "ivory", "khaki", "lavender", "maroon", "mauve", "mint", "multi",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pink", "plum", "purple", "red", "rose",
    "silver", "tan", "taupe", "teal", "turquoise", "violet", "walnut", "white", "wine", "yellow",
)

_FUNCTION_WORDS = frozenset(
    "a an and are as at be by for from in into is it of on or the to with without your you our x set pack count "
    "inch inches ft oz fl lbs lb ounce ounces w".split()
)
# Words that spaCy tags as adjectives/verbs/adverbs in typical product titles; dropped from the "noun" set.
_NOT_NOUNS = frozenset(
    """adjustable all anti best big black blue breathable brown compact cute dark daily decaf dual easy ergonomic
    extra fast flare folding free fried gentle gluten green grey high hot industrial ionic large leaning light
    lightweight long low mini modern moisturizing narrow natural new non not organic outdoor portable premium
    professional red round rustic sealable slim small soft solid sugar super tall thermal thick thin tufted ultra
    volume warm waterproof white wide winter wireless""".split()
)


def _process(text: str) -> str:
    """thefuzz's default processing: lower case, anything but letters and digits becomes a space."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def _indel_ratio(a: str, b: str) -> float:
    """100 * (1 - indel distance / total length): 200 * LCS(a, b) / (len(a) + len(b))."""
    if not a and not b:
        return 100.0
    if not a or not b:
        return 0.0
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if ch == other else max(previous[j], current[j - 1]))
        previous = current
    return 200.0 * previous[-1] / (len(a) + len(b))


def token_set_ratio(s1: str, s2: str) -> int:
    """Similarity 0-100 of two strings compared as sets of words (the thefuzz/rapidfuzz definition)."""
    tokens1, tokens2 = set(_process(s1).split()), set(_process(s2).split())
    if not tokens1 or not tokens2:
        return 0
    common = " ".join(sorted(tokens1 & tokens2))
    only1 = " ".join(sorted(tokens1 - tokens2))
    only2 = " ".join(sorted(tokens2 - tokens1))
    combined1 = f"{common} {only1}".strip()
    combined2 = f"{common} {only2}".strip()
    best = max(_indel_ratio(common, combined1), _indel_ratio(common, combined2), _indel_ratio(combined1, combined2))
    return int(round(best))


def normalize_color(value: str) -> str:
    """Reduce an option value to the first base colour it mentions; other values are returned unchanged."""
    for color in _BASE_COLORS:
        if color in value:
            return color
    return value


def title_nouns(title: str) -> set[str]:
    """Approximation of spaCy's NOUN/PROPN tokens of a product title (see the module docstring)."""
    words = re.findall(r"[a-z]+", title.lower())
    return {w for w in words if len(w) > 1 and w not in _FUNCTION_WORDS and w not in _NOT_NOUNS}


def _mentioned(text: str, product: Product) -> bool:
    return (
        text in product.title.lower()
        or text in " ".join(product.bullet_points).lower()
        or text in product.description.lower()
    )


def type_reward(product: Product, goal: Goal) -> dict[str, Any]:
    query_match = product.query == goal.query
    bought_levels = {x.strip() for x in product.product_category.split("›")}
    goal_levels = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought_levels & goal_levels) >= 2
    desired = title_nouns(goal.name)
    bought = title_nouns(product.title)
    title_score = 0.2 if not desired else len(bought & desired) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def attribute_matches(product: Product, goal: Goal) -> int:
    matches = 0
    for wanted in goal.attributes:
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes):
            matches += 1
        elif _mentioned(wanted, product):
            matches += 1
    return matches


def option_matches(product: Product, goal: Goal, chosen: dict[str, str]) -> int:
    goal_options = [normalize_color(o) for o in goal.goal_options]
    matches = 0
    for name, value in chosen.items():
        value = normalize_color(value)
        if name.lower() in EXACT_MATCH_OPTIONS:
            matched = value in goal_options
        else:
            matched = any(token_set_ratio(g, value) > FUZZY_THRESHOLD for g in goal_options)
        if matched or _mentioned(value, product):
            matches += 1
    return matches


def purchase_reward(product: Product, goal: Goal, price: float, chosen: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """The reward for buying `product` at `price` with the options `chosen` ({option name: value})."""
    type_info = type_reward(product, goal)
    price_ok = price <= goal.price_upper if goal.price_upper > 0 else None
    n_attr = attribute_matches(product, goal)
    n_opt = option_matches(product, goal, chosen)
    denominator = len(goal.attributes) + len(goal.goal_options) + 1
    raw = (n_attr + n_opt + (1 if price_ok else 0)) / denominator * type_info["r_type"]
    info = {
        **type_info,
        "attribute_matches": n_attr,
        "option_matches": n_opt,
        "price_ok": price_ok,
        "r_att": n_attr / len(goal.attributes) if goal.attributes else None,
        "r_option": n_opt / len(goal.goal_options) if goal.goal_options else None,
        "raw_reward": raw,
    }
    return raw, info
