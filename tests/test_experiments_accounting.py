"""Rollout accounting: the paper's Table 10 counts, and which convention reproduces each."""

from __future__ import annotations

import pytest

from experiments.accounting import (
    PAPER_TABLE10,
    engine_budget,
    matching_conventions,
    reported_rollouts,
    schedule_rollouts,
)


@pytest.mark.parametrize(("benchmark", "convention"), [
    ("officeqa", "candidates"), ("spreadsheetbench", "candidates"), ("alfworld", "candidates"),
    ("webshop", "candidates+s0"),
])
def test_table10_counts_come_from_exactly_one_convention(benchmark: str, convention: str) -> None:
    n_train, n_val, total = PAPER_TABLE10[benchmark]
    # 2 epochs, minibatch 40: the paper's schedule
    assert matching_conventions(n_train, n_val, total) == [convention]
    assert schedule_rollouts(n_train, n_val, convention=convention).total == total


def test_schedule_counts_iterations_train_and_val() -> None:
    count = schedule_rollouts(50, 24)  # OfficeQA: minibatches 40 + 10 per epoch
    assert (count.iterations, count.train, count.val, count.total) == (4, 100, 96, 196)
    with_s0 = schedule_rollouts(50, 24, convention="candidates+s0")
    assert with_s0.total == count.total + 24
    assert schedule_rollouts(39, 18).iterations == 2  # ALFWorld: one minibatch per epoch


def test_engine_budget_covers_the_s0_evaluation_the_engine_always_runs() -> None:
    assert engine_budget(50, 24, convention="candidates") == 196 + 24
    assert engine_budget(80, 40, convention="candidates+s0") == 360
    # reported back under the convention, a full run's engine count is the paper's number again
    assert reported_rollouts(220, 24, s0_evaluated=True, convention="candidates") == 196
    assert reported_rollouts(360, 40, s0_evaluated=True, convention="candidates+s0") == 360


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        schedule_rollouts(0, 10)
    with pytest.raises(ValueError, match="unknown rollout convention"):
        schedule_rollouts(10, 10, convention="everything")  # type: ignore[arg-type]
