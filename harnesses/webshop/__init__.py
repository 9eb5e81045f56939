"""WebShop: a text-mode web shop where the agent searches, picks a product and its options, and buys it."""

from harnesses.webshop.harness import WebShopHarness

__all__ = ["WebShopHarness"]
