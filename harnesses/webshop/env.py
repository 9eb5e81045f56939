"""The text-mode shop: a search page, paged results, item pages with options, item sub-pages, and Buy Now.

Page flow and button names follow the original WebShop text environment: `search[keywords]` on the search page;
`click[...]` on a result asin, `Next >` / `< Prev` on results, an option value, `Description` / `Features` /
`Reviews`, `< Prev` (back one page), `Back to Search`, and `Buy Now`, which ends the episode with the purchase reward.

Two observation modes (`observation=`):
- "annotated" (default): the page as lines, every available action shown once as a [bracketed] button (or product
  ASIN, or option value) on the page, selected options marked; the instruction only on the first page (it stays in
  the agent's first message, so each turn adds only the new page); `search[...]` only on the search page (as
  ReAct's WebShop setup); an unavailable action is answered with a note.
- "text": upstream's `WebAgentTextEnv(observation_mode="text")`: the page's visible text joined with " [SEP] "
  (rendered from the same page structure as upstream's templates), `search[...]` accepted on any page, "Next >"
  always on a results page, no reviews and rating N.A. (upstream's loader leaves reviews out), no action list, and
  an unavailable action silently leaves the page as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from harnesses.webshop.catalog import Catalog, Goal, Product
from harnesses.webshop.reward import NounTagger, purchase_reward, word_list_nouns
from harnesses.webshop.search import ProductSearch
from raso.harness import TextEnv

PRODUCTS_PER_PAGE = 10
BACK_TO_SEARCH = "back to search"
NEXT_PAGE = "next >"
PREV_PAGE = "< prev"
BUY_NOW = "buy now"
SUB_PAGES = ("description", "features", "reviews")
OBSERVATION_MODES = ("annotated", "text")
SEP = " [SEP] "
_ACTION = re.compile(r"^\s*(\w+)\s*\[(.*)\]\s*\.?\s*$", re.DOTALL)


@dataclass
class _Session:
    page: str = "search"  # search | results | item | sub | done
    keywords: str = ""
    results: list[str] = field(default_factory=list)
    result_page: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    sub_page: str | None = None
    visited: list[str] = field(default_factory=list)


def parse_shop_action(action: str) -> tuple[str, str] | None:
    """'search[red shoes]' -> ('search', 'red shoes'); None when it is not of the form name[argument]."""
    match = _ACTION.match(action or "")
    if match is None:
        return None
    return match.group(1).lower(), match.group(2).strip()


class WebShopEnv(TextEnv):
    """One shopping episode for one goal."""

    def __init__(self, catalog: Catalog, search: ProductSearch, goal: Goal, max_steps: int = 15, *,
                 observation: str = "annotated", nouns: NounTagger = word_list_nouns):
        super().__init__()
        if observation not in OBSERVATION_MODES:
            raise ValueError(f"observation must be one of {OBSERVATION_MODES}, not {observation!r}")
        self.catalog = catalog
        self.engine = search
        self.goal = goal
        self.max_steps = max_steps
        self.observation_mode = observation
        self.nouns = nouns
        self.session = _Session()
        self.steps = 0
        self.done = False

    # ---- gymnasium API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.session = _Session()
        self.steps = 0
        self.done = False
        return self._render(with_instruction=True), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            raise RuntimeError("the episode is over (Buy Now was clicked or the step budget is spent); call reset()")
        self.steps += 1
        reward, terminated, extra = 0.0, False, {}
        note = self._apply(action)
        if isinstance(note, tuple):  # a purchase
            reward, extra = note
            terminated = True
            note = None
        truncated = not terminated and self.steps >= self.max_steps
        self.done = terminated or truncated
        observation = self._render()
        if note and self.observation_mode == "annotated":
            observation = f"{note}\n\n{observation}"
        if truncated:
            observation += f"\n\nThe step budget ({self.max_steps} actions) is spent; nothing was bought."
        info = self._info()
        info.update(extra)
        if terminated:
            info["soft_score"] = reward
            info["won"] = reward >= 1.0
        return observation, reward, terminated, truncated, info

    # ---- actions -------------------------------------------------------------------------------------
    def available_actions(self) -> list[str]:
        if self.observation_mode == "text":
            if self.session.page == "done":
                return []
            return ["search[<keywords>]"] + [f"click[{c}]" for c in self._text_clickables()]
        s = self.session
        if s.page == "search":
            return ["search[<keywords>]"]
        if s.page == "results":
            actions = [BACK_TO_SEARCH]
            if s.result_page > 1:
                actions.append(PREV_PAGE)
            if s.result_page * PRODUCTS_PER_PAGE < len(s.results):
                actions.append(NEXT_PAGE)
            actions += [asin.lower() for asin in self._page_results()]
            return [f"click[{a}]" for a in actions]
        if s.page == "item":
            product = self._product()
            values = [v for vs in product.options.values() for v in vs]
            return [f"click[{a}]" for a in [BACK_TO_SEARCH, PREV_PAGE, *values, *SUB_PAGES, BUY_NOW]]
        if s.page == "sub":
            return [f"click[{BACK_TO_SEARCH}]", f"click[{PREV_PAGE}]"]
        return []

    def _apply(self, action: str):
        s = self.session
        parsed = parse_shop_action(action)
        if parsed is None:
            return (f"Invalid action {action!r}: write search[keywords] or click[button text], "
                    "e.g. click[Buy Now]. Nothing changed.")
        name, arg = parsed
        if name == "search":
            if s.page != "search" and self.observation_mode == "annotated":
                return "Searching works from the search page only: click[Back to Search] first. Nothing changed."
            if not arg:
                return "search[] needs keywords. Nothing changed."
            s.keywords = arg.lower()
            s.results = self.engine.search(s.keywords)
            s.result_page, s.asin, s.options, s.page, s.sub_page = 1, None, {}, "results", None
            return None
        if name != "click":
            return f"Unknown action {name!r}: use search[...] or click[...]. Nothing changed."
        target = arg.lower()
        if f"click[{target}]" not in self.available_actions():
            return f"click[{arg}] is not an available button on this page. Nothing changed."
        if target == BACK_TO_SEARCH:
            visited = s.visited
            self.session = _Session(visited=visited)
        elif target == NEXT_PAGE:
            s.result_page += 1
        elif target == PREV_PAGE and s.page == "results":
            s.result_page -= 1
        elif target == PREV_PAGE and s.page == "sub":
            s.page, s.sub_page = "item", None
        elif target == PREV_PAGE and s.page == "item":
            s.page, s.asin, s.options = "results", None, {}
        elif target in SUB_PAGES and s.page == "item":
            s.page, s.sub_page = "sub", target
        elif target == BUY_NOW:
            product = self._product()
            reward, info = purchase_reward(product, self.goal, product.price, dict(s.options), self.nouns)
            s.page = "done"
            info.update(purchased_asin=product.asin, purchased_options=dict(s.options), price=product.price)
            return reward, {"reward_info": info}
        elif s.page == "results":
            s.asin = target.upper()
            s.options = {}
            s.page = "item"
            s.visited.append(s.asin)
        elif s.page == "item":
            groups = [name for name, values in self._product().options.items() if target in values]
            # a value shared by two groups: upstream's page maps it to the last group's radio button
            s.options[groups[-1] if self.observation_mode == "text" else groups[0]] = target
        return None

    # ---- rendering -----------------------------------------------------------------------------------
    def _product(self) -> Product:
        assert self.session.asin is not None
        return self.catalog.by_asin[self.session.asin]

    def _page_results(self) -> list[str]:
        start = (self.session.result_page - 1) * PRODUCTS_PER_PAGE
        return self.session.results[start:start + PRODUCTS_PER_PAGE]

    def _render(self, *, with_instruction: bool = False) -> str:
        """The page. Annotated mode shows the instruction on the first page only and no separate action list: the
        page's [bracketed] buttons, ASINs and option values are exactly `available_actions()`, and repeating
        either on every turn only made each turn's prompt longer (text mode keeps upstream's page text)."""
        if self.observation_mode == "text":
            return SEP.join(self._text_segments())
        s = self.session
        lines = [f"Instruction: {self.goal.instruction_text}", ""] if with_instruction else []
        if s.page == "search":
            lines += ["WebShop search page", "[Search]"]
        elif s.page == "results":
            lines += ["[Back to Search]",
                      f"Page {s.result_page} (Total results: {len(s.results)}) for search[{s.keywords}]"]
            if s.result_page > 1:
                lines.append("[< Prev]")
            if s.result_page * PRODUCTS_PER_PAGE < len(s.results):
                lines.append("[Next >]")
            for asin in self._page_results():
                product = self.catalog.by_asin[asin]
                lines += [f"[{asin}] {product.title}", f"  {product.price_tag}"]
            if not s.results:
                lines.append("No products match these keywords.")
        elif s.page == "item":
            product = self._product()
            lines += ["[Back to Search] [< Prev]"]
            for option_name, values in product.options.items():
                shown = [f"[{v}]" + (" (selected)" if s.options.get(option_name) == v else "") for v in values]
                lines.append(f"{option_name}: " + " ".join(shown))
            lines += [product.title, f"Price: {product.price_tag}", f"Rating: {product.rating}",
                      "[Description] [Features] [Reviews] [Buy Now]"]
        elif s.page == "sub":
            product = self._product()
            lines += ["[Back to Search] [< Prev]", f"{(s.sub_page or '').capitalize()} of {product.title}:"]
            if s.sub_page == "description":
                lines.append(product.description or "(no description)")
            elif s.sub_page == "features":
                lines += [f"- {b}" for b in product.bullet_points] or ["(no features listed)"]
            else:
                reviews = [f"- {r.get('title', '')} ({r.get('score', '?')}/5) {r.get('body', '')}".strip()
                           for r in product.reviews]
                lines += reviews or ["(no reviews)"]
        else:
            product = self._product()
            chosen = ", ".join(f"{k}: {v}" for k, v in self.session.options.items()) or "no options"
            lines += [f"Thank you for shopping with us! You bought [{product.asin}] {product.title} "
                      f"({chosen}) for ${product.price:.2f}."]
        return "\n".join(lines)

    # ---- upstream's text mode ---------------------------------------------------------------------------
    def _text_clickables(self) -> list[str]:
        """Upstream's clickables: the page's buttons and product links (lower-cased) and option values."""
        s = self.session
        if s.page == "results":
            buttons = [BACK_TO_SEARCH] + ([PREV_PAGE] if s.result_page > 1 else []) + [NEXT_PAGE]
            return buttons + [asin.lower() for asin in self._page_results()]
        if s.page == "item":
            values = [v for vs in self._product().options.values() for v in vs]
            return [BACK_TO_SEARCH, PREV_PAGE, *SUB_PAGES, BUY_NOW, *dict.fromkeys(values)]
        if s.page == "sub":
            return [BACK_TO_SEARCH, PREV_PAGE]
        return []

    def _text_segments(self) -> list[str]:
        """The visible text of upstream's page templates, in page order, each piece stripped, none empty."""
        s = self.session
        head = ["Instruction:", self.goal.instruction_text]
        if s.page == "search":
            return ["WebShop", *head, "Search"]
        if s.page == "done":
            return ["Thank you for shopping with us!"]
        segments = [*head, "Back to Search"]
        if s.page == "results":
            segments += [f"Page {s.result_page} (Total results: {len(s.results)})"]
            segments += (["< Prev"] if s.result_page > 1 else []) + ["Next >"]
            for asin in self._page_results():
                product = self.catalog.by_asin[asin]
                segments += [asin, product.title, product.price_tag]
        elif s.page == "item":
            product = self._product()
            segments.append("< Prev")
            for option_name, values in product.options.items():
                segments += [option_name, *values]
            segments += [product.title, f"Price: {product.price_tag}", "Rating: N.A.",
                         "Description", "Features", "Reviews", "Buy Now"]
        elif s.page == "sub":
            product = self._product()
            segments.append("< Prev")
            if s.sub_page == "description":
                segments.append(product.description)
            elif s.sub_page == "features":
                segments += product.bullet_points
        return [x.strip() for x in segments if x.strip()]

    def _info(self) -> dict[str, Any]:
        s = self.session
        return {"page": s.page, "available_actions": self.available_actions(), "asin": s.asin,
                "options": dict(s.options), "steps": self.steps, "won": False}
