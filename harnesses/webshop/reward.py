"""WebShop's purchase reward: the rule of upstream's `web_agent_site/engine/goal.py`, restated for raso.

    reward = r_type * (attribute matches + option matches + [price <= budget]) / (#goal attributes + #goal options + 1)

- attribute match: a goal attribute fuzzy-matches (token-set ratio > 85) one of the product's mined attributes,
  or occurs verbatim in its lower-cased title, bullet points or description;
- option match: a goal option counts when some option the buyer selected fuzzy-matches it (token-set ratio > 85),
  both first reduced to the first colour of upstream's colour list they contain. Each goal option counts at most
  once, so the reward never exceeds 1;
- r_type: 1.0 when the purchased product matches the target's search query, shares >= 2 category levels, or more
  than 20% of the target title's nouns; otherwise 0.5; 0.1 under 10% of the nouns; 0 when none. The title's nouns
  are a list (a repeated noun counts twice in the denominator), as upstream.

Nouns come from a `NounTagger`: `spacy_nouns` (upstream's rule: spaCy's `en_core_web_sm` NOUN/PROPN tokens; needs
the `webshop-spacy` extra and the model) or `word_list_nouns` (no dependency; an approximation whose measured
disagreement is stated in the harness README).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from harnesses.webshop.catalog import Goal, Product

FUZZY_THRESHOLD = 85
NounTagger = Callable[[str], Sequence[str]]

# Upstream's colour list, in its order (normalize.py): an option value is reduced to the first entry it contains.
COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass",
    "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light",
    "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow",
    "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone",
    "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut", "wheat", "white",
    "wine", "yellow",
)

# thefuzz drops the characters 128-255 before its default processing (force_ascii=True); so do we.
_LATIN1_DROP = {i: None for i in range(128, 256)}


def _fuzz_process(text: str) -> str:
    return default_process(str(text).translate(_LATIN1_DROP))


def token_set_ratio(s1: str, s2: str) -> int:
    """thefuzz's `fuzz.token_set_ratio` (what upstream calls): rapidfuzz's token-set ratio, rounded."""
    return int(round(fuzz.token_set_ratio(s1, s2, processor=_fuzz_process)))


def normalize_color(value: str) -> str:
    """Upstream's colour normalisation: the first colour of COLOR_SET that `value` contains, else `value`."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


# ---- product-type nouns ------------------------------------------------------------------------------------------
_FUNCTION_WORDS = frozenset(
    "a an and are as at be by for from in into is it of on or the to with without your you our x set pack count "
    "inch inches ft oz fl lbs lb ounce ounces w".split()
)


@functools.lru_cache(maxsize=65536)
def word_list_nouns(title: str) -> tuple[str, ...]:
    """The dependency-free approximation of spaCy's nouns: the title's words minus function words and units, in
    title order with repeats. Adjectives are kept: in Title Case product titles spaCy tags most of them PROPN
    (a list of adjectives to drop doubled the disagreement with spaCy on the shipped catalog)."""
    words = re.findall(r"[a-z]+", title.lower())
    return tuple(w for w in words if len(w) > 1 and w not in _FUNCTION_WORDS)


class SpacyUnavailable(ImportError):
    """spaCy or its English model is not installed (the `webshop-spacy` extra plus the model)."""


@functools.lru_cache(maxsize=4)
def _load_spacy(model: str):
    try:
        import spacy
    except ImportError as exc:
        raise SpacyUnavailable(
            "type_match='spacy' needs spaCy: pip install 'raso[webshop-spacy]' and then "
            f"python -m spacy download {model}") from exc
    try:
        return spacy.load(model)
    except OSError as exc:
        raise SpacyUnavailable(
            f"spaCy is installed but its model {model!r} is not: python -m spacy download {model}") from exc


def spacy_nouns(model: str = "en_core_web_sm") -> NounTagger:
    """Upstream's noun rule: the lower-cased text of the tokens spaCy tags NOUN or PROPN, with repeats."""
    nlp = _load_spacy(model)

    @functools.lru_cache(maxsize=65536)
    def nouns(title: str) -> tuple[str, ...]:
        return tuple(t.text.lower() for t in nlp(title) if t.pos_ in ("NOUN", "PROPN"))

    return nouns


def noun_tagger(type_match: str, spacy_model: str = "en_core_web_sm") -> NounTagger:
    """The tagger for a harness's `type_match` option: 'words' (default, no dependency) or 'spacy' (upstream)."""
    if type_match == "words":
        return word_list_nouns
    if type_match == "spacy":
        return spacy_nouns(spacy_model)
    raise ValueError(f"type_match must be 'words' or 'spacy', not {type_match!r}")


# ---- the reward --------------------------------------------------------------------------------------------------
def type_reward(product: Product, goal: Goal, nouns: NounTagger = word_list_nouns) -> dict[str, Any]:
    query_match = product.query == goal.query
    bought_levels = {x.strip() for x in product.product_category.split("›")}
    goal_levels = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought_levels & goal_levels) >= 2
    desired = list(nouns(goal.name))
    shared = set(nouns(product.title)) & set(desired)
    title_score = 0.2 if not desired else len(shared) / len(desired)
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
    title = product.title.lower()
    bullets = " ".join(product.bullet_points).lower()
    description = product.description.lower()
    matches = 0
    for wanted in goal.attributes:
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes):
            matches += 1
        elif wanted in title or wanted in bullets or wanted in description:
            matches += 1
    return matches


def option_matches(goal_options: Sequence[str], chosen: Sequence[str]) -> int:
    """How many goal options some chosen option value fuzzy-matches (after colour normalisation)."""
    chosen_norm = [normalize_color(v) for v in chosen]
    return sum(
        any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in chosen_norm)
        for wanted in (normalize_color(g) for g in goal_options)
    )


def purchase_reward(
    product: Product, goal: Goal, price: float, chosen: dict[str, str], nouns: NounTagger = word_list_nouns,
) -> tuple[float, dict[str, Any]]:
    """The reward for buying `product` at `price` with the options `chosen` ({option name: value})."""
    type_info = type_reward(product, goal, nouns)
    price_ok = price <= goal.price_upper if goal.price_upper > 0 else None
    n_attr = attribute_matches(product, goal)
    n_opt = option_matches(goal.goal_options, list(chosen.values()))
    denominator = len(goal.attributes) + len(goal.goal_options) + 1
    reward = (n_attr + n_opt + (1 if price_ok else 0)) / denominator * type_info["r_type"]
    info = {
        **type_info,
        "attribute_matches": n_attr,
        "option_matches": n_opt,
        "price_ok": price_ok,
        "r_att": n_attr / len(goal.attributes) if goal.attributes else None,
        "r_option": n_opt / len(goal.goal_options) if goal.goal_options else None,
    }
    return reward, info
