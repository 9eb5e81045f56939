"""The WebShop product catalog and shopping goals, read from files in the official WebShop data format.

The official files (from the WebShop project's setup script) are
  items_shuffle_*.json   a list of scraped products (asin, name, pricing, customization_options, ...)
  items_ins_v2_*.json    {asin: {"attributes": [...], ...}}: the product's mined attributes
  items_human_ins.json   {asin: [{"instruction", "instruction_attributes", "instruction_options"}, ...]}: human goals
  reviews.json           (optional) [{"asin", "reviews", "average_rating"}, ...]
The small catalog shipped in ``harnesses/webshop/data`` uses the same format, so the loader is the same.
"""

from __future__ import annotations

import contextlib
import gc
import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

DATA_DIR = Path(__file__).resolve().parent / "data"
SMALL_CATALOG = {
    "products": DATA_DIR / "items_shuffle_small.json",
    "attributes": DATA_DIR / "items_ins_v2_small.json",
    "human_goals": DATA_DIR / "items_human_ins_small.json",
}
# Budgets are multiples of 10 dollars, as in the original goal generator.
PRICE_STEPS = [10.0 * i for i in range(1, 100)]
NO_BUDGET = 1_000_000.0


class CatalogError(ValueError):
    """A catalog or goal file is missing or not in the WebShop format."""


class Product(BaseModel):
    """One product as the shop shows it (field names follow the original engine's product dicts)."""

    asin: str
    title: str
    description: str = ""
    bullet_points: list[str] = Field(default_factory=list)
    category: str = ""
    query: str = ""
    product_category: str = ""
    price_tag: str = "$100.0"
    pricing: list[float] = Field(default_factory=lambda: [100.0])
    price: float = 100.0  # the single price charged in a session (see `_session_price`)
    options: dict[str, list[str]] = Field(default_factory=dict)
    attributes: list[str] = Field(default_factory=list)
    reviews: list[dict[str, Any]] = Field(default_factory=list)
    rating: str = "N.A."


class Goal(BaseModel):
    """A shopping goal: the instruction shown to the agent and what the reward compares the purchase with."""

    id: str
    asin: str
    instruction_text: str
    attributes: list[str]
    goal_options: list[str]
    price_upper: float
    query: str
    name: str  # the target product's title; the reward's title match compares against it
    product_category: str
    category: str


def _read_json(path: Path, what: str) -> Any:
    path = Path(path)
    if not path.is_file():
        raise CatalogError(f"WebShop {what} file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CatalogError(f"WebShop {what} file {path} is not valid JSON: {exc}") from exc


def _parse_pricing(raw: Any) -> tuple[list[float], str]:
    """'$12.99' -> ([12.99], '$12.99'); '$10.00 - $20.00' -> ([10.0, 20.0], '$10.0 to $20.0'); empty -> $100."""
    if not raw:
        return [100.0], "$100.0"
    values = []
    for part in str(raw).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        if digits:
            values.append(float(Decimal(digits)))
    if not values:
        return [100.0], "$100.0"
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def _session_price(asin: str, pricing: list[float], seed: int) -> float:
    """One price per product. The original draws uniformly in a price range at load time; we do the same but
    seeded by the asin, so every run (and every worker process) sees the same price."""
    if len(pricing) == 1:
        return pricing[0]
    rng = random.Random(f"{seed}:{asin}")
    return round(rng.uniform(pricing[0], pricing[1]), 2)


class Catalog:
    """Products, their search text and the goals defined over them."""

    def __init__(self, products: list[Product], goals: list[Goal]):
        self.products = products
        self.by_asin = {p.asin: p for p in products}
        self.goals = goals

    @classmethod
    def load(
        cls,
        products_path: Path | str,
        attributes_path: Path | str,
        human_goals_path: Path | str,
        reviews_path: Path | str | None = None,
        num_products: int | None = None,
        seed: int = 233,
    ) -> "Catalog":
        with _cyclic_gc_paused():
            return cls._load(products_path, attributes_path, human_goals_path, reviews_path, num_products, seed)

    @classmethod
    def _load(cls, products_path, attributes_path, human_goals_path, reviews_path, num_products, seed) -> "Catalog":
        raw_products = _read_json(Path(products_path), "products (items_shuffle_*.json)")
        attributes = _read_json(Path(attributes_path), "attributes (items_ins_v2_*.json)")
        human = _read_json(Path(human_goals_path), "human goals (items_human_ins.json)")
        if not isinstance(raw_products, list) or not isinstance(attributes, dict) or not isinstance(human, dict):
            raise CatalogError("WebShop files have the wrong shape: products must be a list, attributes and "
                               "human goals dicts keyed by asin")
        reviews: dict[str, tuple[list, str]] = {}
        if reviews_path is not None:
            for entry in _read_json(Path(reviews_path), "reviews (reviews.json)"):
                reviews[entry["asin"]] = (entry.get("reviews", []), str(entry.get("average_rating", "N.A.")))
        if num_products is not None:
            raw_products = raw_products[:num_products]

        products: list[Product] = []
        seen: set[str] = set()
        for index, raw in enumerate(raw_products):
            try:
                asin = str(raw["asin"])
                if asin == "nan" or len(asin) > 10 or asin in seen:
                    continue  # the original engine drops these too
                seen.add(asin)
                pricing, price_tag = _parse_pricing(raw.get("pricing"))
                options: dict[str, list[str]] = {}
                for opt_name, contents in (raw.get("customization_options") or {}).items():
                    if contents is None:
                        continue
                    options[opt_name.lower()] = [
                        str(c["value"]).strip().replace("/", " | ").lower() for c in contents
                    ]
                bullets = raw.get("small_description") or []
                product_reviews, rating = reviews.get(asin, ([], "N.A."))
                products.append(Product(
                    asin=asin,
                    title=str(raw["name"]),
                    description=str(raw.get("full_description") or ""),
                    bullet_points=bullets if isinstance(bullets, list) else [str(bullets)],
                    category=str(raw.get("category", "")),
                    query=str(raw.get("query", "")).lower().strip(),
                    product_category=str(raw.get("product_category", "")),
                    price_tag=price_tag,
                    pricing=pricing,
                    price=_session_price(asin, pricing, seed),
                    options=options,
                    attributes=list(attributes.get(asin, {}).get("attributes") or ["DUMMY_ATTR"]),
                    reviews=product_reviews,
                    rating=rating,
                ))
            except (KeyError, TypeError, AttributeError) as exc:
                raise CatalogError(f"product #{index} in {products_path} is malformed: {exc!r}") from exc

        goals: list[Goal] = []
        for product in products:  # product file order, as the original, so its seeded shuffle applies
            asin = product.asin
            for k, entry in enumerate(human.get(asin) or []):
                goal_attrs = list(entry.get("instruction_attributes") or [])
                if not goal_attrs:
                    continue  # the original skips goals without attributes
                wanted = entry.get("instruction_options") or []
                goal_options = list(wanted.values()) if isinstance(wanted, dict) else list(wanted)
                goal_id = f"{asin}-{k}"
                price_upper, price_text = _budget(product.price, random.Random(f"{seed}:{goal_id}"))
                goals.append(Goal(
                    id=goal_id,
                    asin=asin,
                    instruction_text=str(entry["instruction"]).strip().strip(".") + price_text,
                    attributes=goal_attrs,
                    goal_options=goal_options,
                    price_upper=price_upper,
                    query=product.query,
                    name=product.title,
                    product_category=product.product_category,
                    category=product.category,
                ))
        return cls(products, goals)

    @classmethod
    def small(cls, seed: int = 233) -> "Catalog":
        """The 60-product catalog shipped with raso (for tests and demos; real runs need the official files)."""
        return cls.load(SMALL_CATALOG["products"], SMALL_CATALOG["attributes"], SMALL_CATALOG["human_goals"], seed=seed)


@contextlib.contextmanager
def _cyclic_gc_paused():
    """Loading creates millions of small objects, which start the cyclic collector over and over (at 100,000
    products: 50-65 s with it, 25 s without); they form no cycles, so the collector waits until the load is done."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _budget(price: float, rng: random.Random) -> tuple[float, str]:
    """The original budget rule: of the first four multiples of 10 above the price, draw two and keep the
    larger as the upper bound; with fewer than two such steps there is no budget."""
    steps = [p for p in PRICE_STEPS if p > price][:4]
    if len(steps) < 2:
        return NO_BUDGET, ""
    upper = max(rng.sample(steps, 2))
    return upper, f", and price lower than {upper:.2f} dollars"
