"""WebShop at scale: a synthetic catalog in the official file format (items_shuffle / items_ins_v2 /
items_human_ins), generated at run time, loaded by the harness; load time, memory and search latency.

The official catalog (`items_shuffle.json`, 1.18 M products) cannot be downloaded here, so the products are made
up: titles, descriptions, bullet points, categories, queries, prices and option groups drawn with a fixed seed from
word lists shaped like the official ones (5 categories, 3-6 category levels, 40-120 word descriptions, 0-2 option
groups). The baseline is the same pipeline on a catalog 10x smaller, measured in the same run, so the table shows
how each cost grows with the catalog.

Each size runs in its own process (so its peak memory is its own):
  generate   write the three JSON files (size on disk, seconds)
  load       Catalog.load -> products and goals (seconds, RSS growth)
  index      BM25 index over the products (seconds, RSS growth)
  search     100 queries made from goal instructions, one at a time: median and p95 latency
  peak       the process's peak RSS (generation included: the JSON text and the parsed lists)

Usage: python benchmarks/bench_webshop_scale.py [--products 100000] [--baseline 10000] [--queries 100]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CATEGORIES = {
    "beauty": ("Beauty & Personal Care", ["shampoo", "lipstick", "serum", "lotion", "mascara", "perfume", "soap"]),
    "food": ("Grocery & Gourmet Food", ["crackers", "tea", "coffee", "chocolate", "snack bars", "nuts", "cookies"]),
    "fashion": ("Clothing, Shoes & Jewelry", ["running shoes", "yoga pants", "t-shirt", "dress", "jacket",
                                              "sandals", "hoodie"]),
    "furniture": ("Home & Kitchen", ["bookshelf", "office chair", "coffee table", "nightstand", "bed frame",
                                     "sofa", "desk"]),
    "electronics": ("Electronics", ["hdmi cable", "charger", "headphones", "keyboard", "mouse", "speaker",
                                    "power bank"]),
}
ADJECTIVES = """lightweight waterproof organic gluten free sulfate free long lasting wireless portable rustic modern
breathable non slip adjustable compact heavy duty natural vegan keto friendly fast charging noise cancelling
machine washable high waist ergonomic solid wood easy assembly travel size""".split()
COLORS = ["black", "white", "navy blue", "heather grey", "rose gold", "olive green", "wine red", "light pink",
          "dark brown", "ivory"]
SIZES = ["small", "medium", "large", "x-large", "xx-large", "8", "9", "10", "11", "12"]
AMOUNTS = ["4 ounce", "8 ounce", "16 fl oz", "12 count", "24 count", "pack of 2", "pack of 6"]


def _filler_words(rng: random.Random, n: int = 3000) -> list[str]:
    """Made-up words with a Zipf-like frequency when sampled with `_zipf_pick` (descriptions look like text)."""
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    return ["".join(rng.choice(letters[: 8 + i % 18]) for _ in range(3 + i % 7)) for i in range(n)]


def _zipf_pick(rng: random.Random, words: list[str]) -> str:
    return words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)]


def generate_catalog(folder: Path, n_products: int, seed: int = 0, goals_per_product: float = 0.1) -> dict:
    """Write items_shuffle_<n>.json, items_ins_v2_<n>.json and items_human_ins.json into `folder`."""
    rng = random.Random(seed)
    filler = _filler_words(rng)
    products, attributes, human = [], {}, {}
    for i in range(n_products):
        category = rng.choice(list(CATEGORIES))
        top_level, kinds = CATEGORIES[category]
        kind = rng.choice(kinds)
        adjs = rng.sample(ADJECTIVES, 3)
        brand = _zipf_pick(rng, filler).capitalize()
        title = f"{brand} {' '.join(a.title() for a in adjs[:2])} {kind.title()}, {adjs[2].title()}"
        options = {}
        if category == "fashion":
            options = {"color": rng.sample(COLORS, rng.randint(2, 5)), "size": rng.sample(SIZES, rng.randint(3, 6))}
        elif rng.random() < 0.5:
            options = {"size": rng.sample(AMOUNTS, rng.randint(2, 4))}
        price = round(rng.uniform(3, 300), 2)
        pricing = f"${price}" if rng.random() < 0.8 else f"${price} - ${round(price * rng.uniform(1.1, 2), 2)}"
        levels = [top_level] + [_zipf_pick(rng, filler).title() for _ in range(rng.randint(2, 5))]
        asin = f"B{i:09d}"
        products.append({
            "asin": asin, "name": title,
            "full_description": " ".join(_zipf_pick(rng, filler) for _ in range(rng.randint(40, 120))),
            "small_description": [" ".join([*rng.sample(adjs, 2), *(_zipf_pick(rng, filler) for _ in range(8))])
                                  for _ in range(rng.randint(2, 5))],
            "pricing": pricing, "images": [f"https://example.invalid/{asin}.jpg"],
            "product_category": " › ".join(levels), "category": category, "query": kind,
            "customization_options": {name: [{"value": v, "image": None} for v in values]
                                      for name, values in options.items()} or None,
        })
        attributes[asin] = {"attributes": adjs}
        if rng.random() < goals_per_product:
            wanted = [v[0] for v in options.values()]
            human[asin] = [{"asin": asin, "instruction": f"i am looking for {adjs[0]} {kind}"
                            + (f" in {', '.join(wanted)}" if wanted else ""),
                            "instruction_attributes": adjs[:2], "instruction_options": wanted}]
    paths = {"products": folder / f"items_shuffle_{n_products}.json",
             "attributes": folder / f"items_ins_v2_{n_products}.json",
             "human_goals": folder / "items_human_ins.json"}
    for key, data in (("products", products), ("attributes", attributes), ("human_goals", human)):
        paths[key].write_text(json.dumps(data), encoding="utf-8")
    return {k: str(v) for k, v in paths.items()}


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def measure(n_products: int, n_queries: int) -> dict:
    from harnesses.webshop.catalog import Catalog
    from harnesses.webshop.search import ProductSearch

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        paths = generate_catalog(Path(tmp), n_products)
        gen_s = time.perf_counter() - t0
        disk_mb = sum(Path(p).stat().st_size for p in paths.values()) / 2**20
        gc.collect()
        rss0 = _rss_mb()
        t0 = time.perf_counter()
        catalog = Catalog.load(paths["products"], paths["attributes"], paths["human_goals"])
        load_s = time.perf_counter() - t0
        gc.collect()
        rss1 = _rss_mb()
        t0 = time.perf_counter()
        search = ProductSearch(catalog.products)
        index_s = time.perf_counter() - t0
        gc.collect()
        rss2 = _rss_mb()
    queries = [g.instruction_text for g in random.Random(1).sample(catalog.goals, min(n_queries, len(catalog.goals)))]
    latencies, hits = [], []
    for q in queries:
        t0 = time.perf_counter()
        found = search.search(q)
        latencies.append(time.perf_counter() - t0)
        hits.append(len(found))
    latencies.sort()
    return {
        "products": len(catalog.products), "goals": len(catalog.goals), "disk_mb": disk_mb, "generate_s": gen_s,
        "load_s": load_s, "load_rss_mb": rss1 - rss0, "index_s": index_s, "index_rss_mb": rss2 - rss1,
        "search_p50_ms": 1000 * statistics.median(latencies),
        "search_p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
        "mean_hits": statistics.mean(hits),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--products", type=int, default=100_000)
    parser.add_argument("--baseline", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: measure one size, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.queries)))
        return
    rows = {}
    for n in (args.baseline, args.products):
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--queries", str(args.queries)],
                             check=True, capture_output=True, text=True).stdout
        rows[n] = json.loads(out.strip().splitlines()[-1])
    base, big = rows[args.baseline], rows[args.products]
    print(f"| measure | {args.baseline:,} products (baseline) | {args.products:,} products | ratio |")
    print("| --- | --- | --- | --- |")
    for key in ("goals", "disk_mb", "generate_s", "load_s", "load_rss_mb", "index_s", "index_rss_mb",
                "peak_rss_mb", "search_p50_ms", "search_p95_ms", "mean_hits"):
        ratio = big[key] / base[key] if base[key] else float("nan")
        print(f"| {key} | {base[key]:,.2f} | {big[key]:,.2f} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
