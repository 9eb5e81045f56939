"""Budgets in rollouts and USD. Rollouts are counted as the paper does: train minibatch rollouts + val rollouts.

The rollout budget is never exceeded: it is checked before a batch is launched and a train minibatch is cut to
what is left after reserving the candidate's val evaluation. The USD budget is checked before each batch of work
(model calls are not interruptible mid-flight), so the run stops at the first check at or over the limit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    rollouts: int | None = None
    usd: float | None = None

    def rollouts_left(self, used: int) -> int | None:
        return None if self.rollouts is None else max(self.rollouts - used, 0)

    def usd_exhausted(self, spent: float) -> bool:
        return self.usd is not None and spent >= self.usd

    def allows_val(self, used: int, n_val: int) -> bool:
        left = self.rollouts_left(used)
        return left is None or left >= n_val

    def train_batch_size(self, used: int, wanted: int, n_val: int) -> int:
        """How many of `wanted` train rollouts fit while leaving room for one val evaluation (0: none fit)."""
        left = self.rollouts_left(used)
        if left is None:
            return wanted
        return max(min(wanted, left - n_val), 0)

    def stop_reason(self, used: int, spent: float) -> str | None:
        if self.rollouts is not None and used >= self.rollouts:
            return f"rollout budget reached ({used}/{self.rollouts})"
        if self.usd_exhausted(spent):
            return f"USD budget reached (${spent:.4f} of ${self.usd:.4f})"
        return None
