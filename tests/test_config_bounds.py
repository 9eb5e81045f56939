"""A config file's bad value is refused even where a flag overrides it, and counts past any real run's size are
typos refused in one line (raso.engine.config)."""

from __future__ import annotations

import pytest

from raso.engine.config import build_config
from raso.errors import ConfigError


def test_a_config_files_bad_value_is_refused_even_when_a_flag_overrides_it(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('harness = "toy"\n[schedule]\nepochs = "two"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"invalid configuration in .*run\.toml:\n  - schedule\.epochs: Input "
                                          r"should be a valid integer"):
        build_config(config, {"schedule.epochs": 1})


def test_a_good_config_file_with_overrides_still_resolves(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('harness = "toy"\n[schedule]\nepochs = 3\nminibatch = 2\n', encoding="utf-8")
    resolved = build_config(config, {"schedule.epochs": 1}, quick_local_defaults=False)
    assert (resolved.schedule.epochs, resolved.schedule.minibatch, resolved.harness) == (1, 2, "toy")


@pytest.mark.parametrize("key, value", [("schedule.epochs", 10**20), ("schedule.minibatch", 10**12),
                                        ("budget.rollouts", 10**15), ("schedule.seed", 2**40),
                                        ("schedule.workers", 100_000)])
def test_a_count_past_any_real_run_is_refused_as_a_typo(key, value):
    with pytest.raises(ConfigError, match=rf"{key}: Input should be less than or equal to"):
        build_config(None, {key: value})
