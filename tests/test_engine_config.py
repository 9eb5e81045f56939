"""OptimizeConfig: nested sections from TOML/YAML/JSON files (format 2), dotted overrides,
quick local defaults per field and clear validation errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from raso.engine.budget import Budget
from raso.engine.config import QUICK_LOCAL_DEFAULTS, OptimizeConfig, build_config, load_resolved, parse_assignments
from raso.errors import ConfigError


def test_toml_file_with_cli_overrides(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('harness = "alfworld"\nmodels.target = "openai/gpt-4o-mini"\nschedule.minibatch = 16\n'
                    'schedule.epochs = 3\nbudget.usd = 2.5\n')
    config = build_config(path, {"schedule.minibatch": 8, "schedule.seed": None})
    assert (config.harness, config.models.target, config.schedule.minibatch, config.schedule.epochs,
            config.budget.usd) == ("alfworld", "openai/gpt-4o-mini", 8, 3, 2.5)
    assert config.schedule.seed == 0 and config.quick_defaults_applied == []
    assert config.format_version == 2


def test_yaml_file_under_an_optimize_table(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("optimize:\n  models: {target: anthropic/claude-3-5-haiku}\n  update: {method: rfsu, adapt: false}\n"
                    "  init: {adapt: false}\n  retrieval: {k: 3}\n")
    config = build_config(path)
    assert (config.update.method, config.update.adapt, config.init.adapt, config.retrieval.k,
            config.needs_retriever) == ("rfsu", False, False, 3, True)


def test_nested_file_and_dotted_overrides(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('format_version = 2\nharness = "toy"\n[models]\ntarget = "openai/gpt-4o-mini"\n'
                    '[agent]\nmax_steps = 4\ntemperature = 0.2\n[schedule]\nepochs = 3\n[limits]\nsection_chars = 900\n')
    config = build_config(path, {"agent.max_steps": 8, "schedule": {"minibatch": 5}, "retrieval.kind": "tfidf"})
    assert (config.agent.max_steps, config.agent.temperature) == (8, 0.2)  # the override wins, the rest stays
    assert (config.schedule.epochs, config.schedule.minibatch, config.retrieval.kind) == (3, 5, "tfidf")
    assert config.limits is not None and config.limits.section_chars == 900
    assert config.get("agent.max_steps") == 8


def test_limits_given_in_part_keep_the_optimizer_profiles_other_budgets() -> None:
    from raso.llm.profiles import EMBEDDED_PROMPT_LIMITS
    from raso.optimizer.render import PromptLimits

    embedded = build_config(None, {"limits.section_chars": 900})
    assert embedded.limits is not None and embedded.limits.section_chars == 900
    assert embedded.limits.skill_tokens == EMBEDDED_PROMPT_LIMITS["skill_tokens"] != PromptLimits().skill_tokens
    hosted = build_config(None, {"models.target": "openai/gpt-4o", "limits": {"section_chars": 900}})
    assert hosted.limits == PromptLimits(section_chars=900)
    assert build_config(None, {}).limits is None  # nothing given: the profile's limits, decided at call time


def test_unknown_dotted_key_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        build_config(None, {"agent.max_stepz": 8})
    message = str(err.value)
    assert "\n" not in message and "'agent.max_stepz'" in message and "max_steps" in message
    with pytest.raises(ConfigError, match="'schedul.epochs'.*schedule"):
        parse_assignments(["schedul.epochs=1"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_assignments(["agent.max_steps"])
    with pytest.raises(ConfigError, match="schedule: Input should be a valid dictionary"):
        build_config(None, {"schedule": 3})  # not hidden by the quick schedule's schedule.* values


def test_assignment_values_are_json_or_yaml_scalars() -> None:
    values = parse_assignments(["agent.max_steps=8", "schedule.test=false", "budget.usd=0.5", "run_dir=runs/x",
                                "agent.stop=[a, b]", "harness_options.day=2024-01-02", "models.api_base=null"])
    assert values == {"agent.max_steps": 8, "schedule.test": False, "budget.usd": 0.5, "run_dir": "runs/x",
                      "agent.stop": ["a", "b"], "harness_options.day": "2024-01-02", "models.api_base": None}
    with pytest.raises(ConfigError, match="max_steps"):
        build_config(None, {"agent.max_steps": "eight"})


def test_a_section_given_as_a_word_keeps_the_sections_other_keys() -> None:
    config = build_config(None, {"models.target": "openai/gpt-4o", "init.num_requirements": 3, "init": "rfsi"})
    assert (config.init.method, config.init.num_requirements) == ("rfsi", 3)


def test_unknown_option_is_named_with_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('models.target = "openai/gpt-4o"\nminibach = 8\n')
    with pytest.raises(ConfigError) as err:
        build_config(path)
    message = str(err.value)
    assert str(path) in message and "minibach: unknown option" in message and "schedule.minibatch" in message
    nested = tmp_path / "bad_nested.toml"
    nested.write_text('[schedule]\nminibach = 8\n')
    with pytest.raises(ConfigError) as err:
        build_config(nested)
    assert "schedule.minibach: unknown option" in str(err.value) and "minibatch" in str(err.value)


def test_bad_values_name_the_field_and_the_value(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("models: {target: openai/gpt-4o}\nschedule: {epochs: 0}\nupdate: sgd\nbudget: {rollouts: lots}\n")
    with pytest.raises(ConfigError) as err:
        build_config(path)
    message = str(err.value)
    assert "schedule.epochs: Input should be greater than or equal to 1 (got 0)" in message
    assert "update.method:" in message and "'sgd'" in message
    assert "budget.rollouts:" in message and "'lots'" in message


def test_unparsable_file_and_missing_init_file_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text("model = [unclosed\n")
    with pytest.raises(ConfigError, match="broken.toml is not valid TOML"):
        build_config(bad)
    with pytest.raises(ConfigError, match="neither 'rasi' nor 'rfsi' and no file exists"):
        build_config(None, {"models.target": "openai/gpt-4o", "init": str(tmp_path / "nope.md")})
    with pytest.raises(ConfigError, match="unknown format"):
        (tmp_path / "x.ini").write_text("a=1")
        build_config(tmp_path / "x.ini")


def test_init_file_is_resolved_to_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "start.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    monkeypatch.chdir(tmp_path)
    config = build_config(None, {"models.target": "openai/gpt-4o", "init": "start.md"})
    assert config.init.method == str(tmp_path / "start.md") and config.init_kind == "file"


def test_quick_defaults_apply_only_to_the_local_model_and_fill_each_unset_field() -> None:
    quick = build_config(None, {})
    assert quick.models.target.startswith("local/")
    assert {k: quick.get(k) for k in QUICK_LOCAL_DEFAULTS} == QUICK_LOCAL_DEFAULTS
    assert set(quick.quick_defaults_applied) == set(QUICK_LOCAL_DEFAULTS)
    chosen = build_config(None, {"schedule.minibatch": 10})
    assert chosen.schedule.minibatch == 10 and "schedule.minibatch" not in chosen.quick_defaults_applied
    remote = build_config(None, {"models.target": "openai/gpt-4o-mini"})
    assert remote.schedule.minibatch == 40 and remote.budget.rollouts is None and remote.quick_defaults_applied == []
    partial = build_config(None, {"schedule.val_limit": 5})
    assert partial.schedule.val_limit == 5 and partial.schedule.minibatch == QUICK_LOCAL_DEFAULTS["schedule.minibatch"]


def test_setting_only_epochs_keeps_every_other_quick_default() -> None:
    config = build_config(None, {"schedule.epochs": 4})
    assert config.schedule.epochs == 4
    others = {k: v for k, v in QUICK_LOCAL_DEFAULTS.items() if k != "schedule.epochs"}
    assert {k: config.get(k) for k in others} == others
    assert set(config.quick_defaults_applied) == set(others)
    budget_given = build_config(None, {"budget.rollouts": 30})  # a budget no longer drops agent.max_steps
    assert budget_given.budget.rollouts == 30
    assert budget_given.agent.max_steps == QUICK_LOCAL_DEFAULTS["agent.max_steps"]


def test_a_harness_replaces_the_quick_defaults_it_names() -> None:
    from harnesses.webshop import WebShopHarness

    shop = build_config(None, {"harness": "webshop"})
    needs = WebShopHarness.task_needs
    assert needs.agent_steps > QUICK_LOCAL_DEFAULTS["agent.max_steps"]
    assert (shop.agent.max_steps, shop.agent.max_tokens) == (needs.agent_steps, needs.reply_tokens)
    assert (shop.schedule.minibatch == QUICK_LOCAL_DEFAULTS["schedule.minibatch"]
            and "agent.max_steps" in shop.quick_defaults_applied)
    assert build_config(None, {"harness": "webshop", "agent.max_steps": 5}).agent.max_steps == 5  # the user's wins
    assert build_config(None, {"harness": "spreadsheet"}).agent.max_steps == QUICK_LOCAL_DEFAULTS["agent.max_steps"]
    # a harness that cannot be loaded gets the generic ones (building it reports the error later)
    assert (build_config(None, {"harness": "no.such.module:Harness"}).agent.max_steps
            == QUICK_LOCAL_DEFAULTS["agent.max_steps"])


def test_resolved_config_round_trips(tmp_path: Path) -> None:
    config = OptimizeConfig(models={"target": "openai/gpt-4o"}, budget={"rollouts": 100}, run_dir=tmp_path / "r",
                            agent={"temperature": 0.3, "history_turns": 4}, limits={"section_chars": 700})
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


def test_an_unknown_prompt_limit_is_an_error_not_ignored() -> None:
    with pytest.raises(ConfigError, match="trajectory_chars"):
        build_config(overrides={"harness": "toy", "limits": {"trajectory_chars": 100}})
