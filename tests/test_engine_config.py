"""OptimizeConfig: TOML/YAML files, CLI overrides, quick local defaults and clear validation errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from raso.engine.budget import Budget
from raso.engine.config import QUICK_LOCAL_DEFAULTS, ConfigError, OptimizeConfig, build_config, load_resolved


def test_toml_file_with_cli_overrides(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('harness = "alfworld"\nmodel = "openai/gpt-4o-mini"\nminibatch = 16\nepochs = 3\n'
                    'budget_usd = 2.5\n')
    config = build_config(path, {"minibatch": 8, "seed": None})
    assert (config.harness, config.model, config.minibatch, config.epochs, config.budget_usd) == (
        "alfworld", "openai/gpt-4o-mini", 8, 3, 2.5)
    assert config.seed == 0 and config.quick_defaults_applied == []


def test_yaml_file_under_an_optimize_table(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("optimize:\n  model: anthropic/claude-3-5-haiku\n  update: rfsu\n  adapt: false\n  k: 3\n")
    config = build_config(path)
    assert (config.update, config.adapt, config.k, config.needs_retriever) == ("rfsu", False, 3, True)


def test_unknown_option_is_named_with_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('model = "openai/gpt-4o"\nminibach = 8\n')
    with pytest.raises(ConfigError) as err:
        build_config(path)
    message = str(err.value)
    assert str(path) in message and "minibach: unknown option" in message and "minibatch" in message


def test_bad_values_name_the_field_and_the_value(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("model: openai/gpt-4o\nepochs: 0\nupdate: sgd\nbudget_rollouts: lots\n")
    with pytest.raises(ConfigError) as err:
        build_config(path)
    message = str(err.value)
    assert "epochs: Input should be greater than or equal to 1 (got 0)" in message
    assert "update:" in message and "'sgd'" in message
    assert "budget_rollouts:" in message and "'lots'" in message


def test_unparsable_file_and_missing_init_file_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text("model = [unclosed\n")
    with pytest.raises(ConfigError, match="broken.toml is not valid TOML"):
        build_config(bad)
    with pytest.raises(ConfigError, match="neither 'rasi' nor 'rfsi' and no file exists"):
        build_config(None, {"model": "openai/gpt-4o", "init": str(tmp_path / "nope.md")})
    with pytest.raises(ConfigError, match="unknown format"):
        (tmp_path / "x.ini").write_text("a=1")
        build_config(tmp_path / "x.ini")


def test_init_file_is_resolved_to_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "start.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    monkeypatch.chdir(tmp_path)
    config = build_config(None, {"model": "openai/gpt-4o", "init": "start.md"})
    assert config.init == str(tmp_path / "start.md") and config.init_kind == "file"


def test_quick_defaults_apply_only_to_the_local_model_without_a_schedule() -> None:
    quick = build_config(None, {})
    assert quick.model.startswith("local/")
    assert {k: getattr(quick, k) for k in QUICK_LOCAL_DEFAULTS} == QUICK_LOCAL_DEFAULTS
    assert set(quick.quick_defaults_applied) == set(QUICK_LOCAL_DEFAULTS)
    chosen = build_config(None, {"minibatch": 10})
    assert chosen.minibatch == 10 and chosen.epochs == 2 and chosen.quick_defaults_applied == []
    remote = build_config(None, {"model": "openai/gpt-4o-mini"})
    assert remote.minibatch == 40 and remote.budget_rollouts is None
    partial = build_config(None, {"val_limit": 5})  # a non-schedule option keeps the rest quick
    assert partial.val_limit == 5 and partial.minibatch == QUICK_LOCAL_DEFAULTS["minibatch"]


def test_a_harness_replaces_the_quick_defaults_it_names() -> None:
    from harnesses.webshop import WebShopHarness

    shop = build_config(None, {"harness": "webshop"})
    assert WebShopHarness.task_needs.agent_steps > QUICK_LOCAL_DEFAULTS["agent_max_steps"]
    assert (shop.agent_max_steps, shop.agent_max_tokens) == (WebShopHarness.task_needs.agent_steps,
                                                             WebShopHarness.task_needs.reply_tokens)
    assert shop.minibatch == QUICK_LOCAL_DEFAULTS["minibatch"] and "agent_max_steps" in shop.quick_defaults_applied
    assert build_config(None, {"harness": "webshop", "agent_max_steps": 5}).agent_max_steps == 5  # the user's wins
    assert build_config(None, {"harness": "spreadsheet"}).agent_max_steps == QUICK_LOCAL_DEFAULTS["agent_max_steps"]
    # a harness that cannot be loaded gets the generic ones (building it reports the error later)
    assert (build_config(None, {"harness": "no.such.module:Harness"}).agent_max_steps
            == QUICK_LOCAL_DEFAULTS["agent_max_steps"])


def test_resolved_config_round_trips(tmp_path: Path) -> None:
    config = OptimizeConfig(model="openai/gpt-4o", budget_rollouts=100, run_dir=tmp_path / "r")
    path = tmp_path / "config.resolved.json"
    path.write_text(config.model_dump_json())
    assert load_resolved(path) == config


def test_budget_arithmetic() -> None:
    budget = Budget(rollouts=15)
    assert budget.train_batch_size(used=4, wanted=2, n_val=4) == 2
    assert budget.train_batch_size(used=10, wanted=2, n_val=4) == 1
    assert budget.train_batch_size(used=11, wanted=2, n_val=4) == 0
    assert budget.allows_val(11, 4) and not budget.allows_val(12, 4)
    assert Budget().train_batch_size(used=10**6, wanted=40, n_val=40) == 40
    assert Budget(usd=1.0).stop_reason(0, 1.0) == "USD budget reached ($1.0000 of $1.0000)"
    assert Budget(usd=1.0).stop_reason(0, 0.99) is None
