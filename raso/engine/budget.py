"""Budgets in rollouts and USD. Rollouts are counted as the paper does: train minibatch rollouts + val rollouts.

The rollout budget is never exceeded: it is checked before a batch is launched and a train minibatch is cut to
what is left after reserving the candidate's val evaluation. The USD budget is checked before each batch of work
(model calls are not interruptible mid-flight), so the run stops at the first check at or over the limit.
`test_usd`, when set, is the test evaluation's own USD budget (checked the same way) and `usd` then covers the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The unit tags of the test evaluation's batches (`test_v000`, ...): the gateway admits their calls against
#: `budget.test_usd` when it is set (raso.llm.config.GatewayConfig.unit_budgets_usd).
TEST_UNITS = "test_v"


@dataclass(frozen=True)
class Budget:
    rollouts: int | None = None
    usd: float | None = None
    test_usd: float | None = None  # the test evaluation's own budget; None: `usd` covers it

    def test_exhausted(self, total_spent: float, test_spent: float) -> bool:
        """Whether the test evaluation may make no more calls: its own budget spent, or (without one) the run's."""
        if self.test_usd is not None:
            return test_spent >= self.test_usd
        return self.usd_exhausted(total_spent)

    def test_limit_text(self) -> str:
        return "test USD budget" if self.test_usd is not None else "USD budget"

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
