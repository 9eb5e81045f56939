"""Keyword search over the catalog: BM25 (bm25s) over each product's title, description, first bullet point and
option values, returning up to 50 hits, as the original shop does with a Lucene index."""

from __future__ import annotations

import re
import threading

from harnesses.webshop.catalog import Product

SEARCH_RETURN_N = 50
_STOPWORDS = frozenset(
    "a an and are as at be but by for from i i'm im in into is it its me my need of on or looking please "
    "that the their them this to want was were will with would you".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-case words minus stop words, with a light plural stemmer (shoes -> shoe, glasses -> glass)."""
    tokens = []
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
            word = word[:-2]
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        tokens.append(word)
    return tokens


def product_search_text(product: Product) -> str:
    options = " ".join(v for values in product.options.values() for v in values)
    first_bullet = product.bullet_points[0] if product.bullet_points else ""
    return " ".join([product.title, product.description, first_bullet, options])


class ProductSearch:
    """BM25 ranking of products for a keyword query; thread-safe for concurrent rollouts."""

    def __init__(self, products: list[Product]):
        import bm25s  # imported here so that importing the harness stays cheap

        self._asins = [p.asin for p in products]
        corpus = [tokenize(product_search_text(p)) or ["<empty>"] for p in products]
        self._vocab = {token for doc in corpus for token in doc}
        self._retriever = bm25s.BM25()
        self._retriever.index(corpus, show_progress=False)
        self._lock = threading.Lock()

    def search(self, keywords: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """Asins of the best matches, best first; only products sharing at least one keyword are returned."""
        query = [t for t in tokenize(keywords) if t in self._vocab]
        if not query or not self._asins:
            return []
        k = min(k, len(self._asins))
        with self._lock:
            docs, scores = self._retriever.retrieve([query], k=k, show_progress=False, n_threads=1)
        return [self._asins[int(d)] for d, s in zip(docs[0], scores[0]) if s > 0]
