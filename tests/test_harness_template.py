"""The harness template's own tests (harnesses/_template/test_harness.py, copied into every `raso harness new`
package) run with the suite, so a change that breaks the template fails here, not in a user's new harness."""

from __future__ import annotations

from harnesses._template.test_harness import (  # noqa: F401  (collected from here)
    test_a_scripted_agent_that_reads_then_answers_scores_one,
    test_a_wrong_answer_scores_zero_and_a_bad_command_costs_an_action,
    test_splits_are_disjoint_and_not_empty,
)
