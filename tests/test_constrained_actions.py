"""Constrained actions (issue 16): each harness declares its action space, the LLM layer compiles it to the grammar
of a valid reply, the agent sends it to models that support grammars, and a repeated invalid reply makes the
agent change something.

The plumbing is tested with the scripted model (it records the parameters of every call); the embedded tests
check that the real 0.5B, under the grammar, writes a reply that parses as a valid action."""

from __future__ import annotations

import re

import pytest

from harnesses.alfworld.action_space import alfworld_action_is_valid, alfworld_action_space
from harnesses.spreadsheet.action_space import SPREADSHEET_ACTION_SPACE, spreadsheet_action_is_valid
from harnesses.spreadsheet.actions import parse_reply
from harnesses.webshop import WebShopHarness
from raso.agent import AgentConfig, ExecutionAgent
from raso.harness import Harness
from raso.harness.action_grammar import choice_rule, gbnf_caseless, gbnf_literal, to_gbnf
from raso.harness.actions import ActionSpace
from raso.testing import scripted_gateway

SPREADSHEET_REPLY_GRAMMAR = to_gbnf(SPREADSHEET_ACTION_SPACE)


def reply_grammar(harness: Harness, info: dict, avoid: frozenset[str] | set[str] = frozenset()) -> str | None:
    """What the agent sends a grammar-following model in the state `info` describes (as ExecutionAgent does)."""
    return to_gbnf(harness.action_space(info), avoid)


def alfworld_reply_grammar(info: dict, *, allow_think: bool = False, avoid: set[str] = frozenset()) -> str | None:
    return to_gbnf(alfworld_action_space(info, allow_think=allow_think), avoid)


def _results_info(harness: WebShopHarness, keywords: str = "yoga pants") -> tuple[dict, dict]:
    env = harness.make_env(harness.tasks("val")[0])
    _, search_info = env.reset()
    _, _, _, _, results_info = env.step(f"search[{keywords}]")
    return search_info, results_info


# ---------------------------------------------------------------- grammar text
def test_literals_escape_what_would_break_the_grammar():
    assert gbnf_literal('say "hi"\\now\n') == '"say \\"hi\\"\\\\now\\n"'
    assert choice_rule(["a", "b", "a", ""]) == '"a" | "b"'
    with pytest.raises(ValueError):
        choice_rule([])
    assert to_gbnf(ActionSpace.choices([])) is None and to_gbnf(None) is None


def test_webshop_grammar_follows_the_page():
    harness = WebShopHarness()
    search_info, results_info = _results_info(harness)
    on_search = reply_grammar(harness, search_info)
    assert '"search[" [^\\[\\]\\n<>]{1,100} "]"' in on_search and "click[" not in on_search
    on_results = reply_grammar(harness, results_info)
    clickables = [a for a in results_info["available_actions"]]
    assert "search[" not in on_results and len(clickables) > 2
    assert all(gbnf_caseless(a[len("click["):-1]) in on_results for a in clickables)


def _click_gbnf(click: str) -> str:
    """The grammar text of one WebShop click (its button in any letter case)."""
    return gbnf_caseless(click[len("click["):-1])


def _sequence_regex(sequence: str) -> re.Pattern[str]:
    """A regex for a GBNF sequence of quoted literals and one-character classes (what gbnf_caseless writes)."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|(\[[^\]]+\])', sequence)
    return re.compile("".join(re.escape(lit.replace('\\"', '"')) if lit else cls for lit, cls in parts))


def test_caseless_literals_match_any_letter_case_and_nothing_else():
    rule = _sequence_regex(gbnf_caseless("buy now"))
    assert all(rule.fullmatch(t) for t in ("buy now", "Buy Now", "BUY NOW"))
    assert not rule.fullmatch("buy later") and not rule.fullmatch("buynow")
    assert _sequence_regex(gbnf_caseless("< Prev 2")).fullmatch("< PREV 2")
    assert gbnf_caseless("Straße") == '[sS] [tT] [rR] [aA] "ß" [eE]'  # no one-letter upper case for ß
    assert gbnf_caseless("") == '""'


def test_webshop_grammar_takes_a_click_in_the_case_the_page_shows():
    # The page shows [Buy Now] and [B0WS000029]; the 1.5B, made to write them in lower case, went Back to Search.
    harness = WebShopHarness()
    _, results_info = _results_info(harness)
    asin = next(a for a in results_info["available_actions"] if a.startswith("click[b0"))
    grammar = reply_grammar(harness, results_info)
    assert _sequence_regex(gbnf_caseless(asin[len("click["):-1])).fullmatch(asin[len("click["):-1].upper())
    assert gbnf_caseless(asin[len("click["):-1]) in grammar
    assert harness.action_is_valid(asin.replace("click[b0", "click[B0").upper().replace("CLICK", "click"),
                                   results_info)


def test_webshop_validity_matches_what_the_env_accepts():
    harness = WebShopHarness()
    search_info, results_info = _results_info(harness)
    assert harness.action_is_valid("search[grey yoga pants]", search_info)
    assert not harness.action_is_valid("search[<keywords>]", search_info)  # the copied placeholder
    assert not harness.action_is_valid("click[<keywords>]", search_info)
    assert not harness.action_is_valid("search[grey yoga pants]", results_info)  # search page only
    asin = results_info["available_actions"][-1]
    assert harness.action_is_valid(asin.upper().replace("CLICK", "click"), results_info)  # case does not matter
    assert not harness.action_is_valid("click[Buy Now]", results_info)
    assert not harness.action_is_valid("I would search for pants.", search_info)


def test_alfworld_grammar_is_the_admissible_commands():
    info = {"admissible_commands": ["go to fridge 1", "look", "take apple 1 from countertop 1"]}
    grammar = alfworld_reply_grammar(info)
    assert '"go to fridge 1" | "look" | "take apple 1 from countertop 1"' in grammar and "think" not in grammar
    assert '"think: "' in alfworld_reply_grammar(info, allow_think=True)
    assert alfworld_reply_grammar({"admissible_commands": []}) is None
    assert alfworld_action_is_valid("`Go to fridge 1.`", info)
    assert not alfworld_action_is_valid("go to fridge 2", info)
    assert alfworld_action_is_valid("think: the apple is cold", info, allow_think=True)
    assert not alfworld_action_is_valid("think: the apple is cold", info)


def test_spreadsheet_grammar_and_validity():
    assert '"RUN" | "SUBMIT"' in SPREADSHEET_REPLY_GRAMMAR and "```python" in SPREADSHEET_REPLY_GRAMMAR
    good = parse_reply("```python\nprint(1)\n```\nAction: RUN").to_action()
    assert spreadsheet_action_is_valid(good)
    assert not spreadsheet_action_is_valid(parse_reply("I will write a program.").to_action())


# ---------------------------------------------------------------- the agent's plumbing
def test_the_agent_sends_the_page_grammar_each_turn_when_constrained():
    harness = WebShopHarness(max_steps=2)
    gw, model = scripted_gateway(["Action: search[yoga pants]", "Action: click[back to search]"])
    rollout = harness.rollout(harness.tasks("val")[0], [],
                              ExecutionAgent(gw, AgentConfig(mode="none", constrain_replies=True)))
    search_info, results_info = _results_info(harness)
    assert [p.get("grammar") for p in model.params] == [reply_grammar(harness, search_info),
                                                       reply_grammar(harness, results_info)]
    assert rollout.metadata["constrained_turns"] == 2 and rollout.metadata["valid_actions"] == 2


def test_models_without_grammar_support_keep_free_text():
    harness = WebShopHarness(max_steps=1)
    gw, model = scripted_gateway(["Action: search[yoga pants]"])
    rollout = harness.rollout(harness.tasks("val")[0], [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert "grammar" not in model.params[0] and "constrained_turns" not in rollout.metadata


def test_a_bare_action_reply_is_a_valid_action():
    harness = WebShopHarness(max_steps=2)
    gw, _ = scripted_gateway(["search[yoga pants]", "click[back to search]"])
    rollout = harness.rollout(harness.tasks("val")[0], [], ExecutionAgent(gw, AgentConfig(mode="none")))
    assert [s.action for s in rollout.trajectory] == ["search[yoga pants]", "click[back to search]"]
    assert "Total results" in rollout.trajectory[0].result
    assert rollout.metadata["valid_actions"] == 2 and "invalid_actions" not in rollout.metadata


def test_the_same_invalid_reply_twice_changes_the_next_turn():
    harness = WebShopHarness(max_steps=4)
    junk = "I am looking for yoga pants that are grey."
    gw, model = scripted_gateway([junk, junk, "Action: search[grey yoga pants]", "Action: click[back to search]"])
    rollout = harness.rollout(harness.tasks("val")[0], [],
                              ExecutionAgent(gw, AgentConfig(mode="none", temperature=0.0)))
    temps = [p.get("temperature") for p in model.params]
    assert temps[:2] == [0.0, 0.0] and temps[2] == 0.8  # changed after the repeat...
    assert temps[3] == 0.0  # ...and back once the reply was valid
    assert "your last two replies were the same" in model.calls[2][-1]["content"]
    assert "your last two replies were the same" not in model.calls[1][-1]["content"]
    assert rollout.metadata["repeat_interventions"] == 1
    assert rollout.metadata["invalid_actions"] == 2 and rollout.metadata["valid_actions"] == 2


# ---------------------------------------------------------------- the embedded model under the grammar
@pytest.mark.embedded
def test_an_embedded_reply_under_the_webshop_grammar_parses_as_a_valid_action():
    from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMGateway, RetryConfig

    harness = WebShopHarness()
    env = harness.make_env(harness.tasks("val")[0])
    observation, search_info = env.reset()
    observation, _, _, _, results_info = env.step("search[pants]")
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, retry=RetryConfig(max_attempts=1)))
    for info, page in ((search_info, "search"), (results_info, observation)):
        messages = [{"role": "system", "content": harness.action_instructions},
                    {"role": "user", "content": f"{page}\n\nReply with your next action."}]
        reply = gw.complete("agent", messages, stage="test", max_tokens=96, temperature=0.0,
                            grammar=reply_grammar(harness, info)).text
        action = harness.parse_action(reply)
        assert harness.action_is_valid(action, info), reply
    # and the env agrees: it is not answered with an "invalid"/"not available" note
    assert "Nothing changed" not in env.step(action)[0]


@pytest.mark.embedded
def test_an_embedded_model_can_click_a_button_as_the_page_writes_it():
    # The item page shows [Buy Now]; told to buy, the model writes the button as shown. A lowercase-only grammar
    # turned that capital B into the closest lowercase alternative instead (measured: Back to Search, < Prev).
    from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMGateway, RetryConfig

    harness = WebShopHarness()
    env = harness.make_env(harness.tasks("val")[0])
    env.reset()
    observation, _, _, _, info = env.step("search[yoga pants]")
    asin = next(a for a in info["available_actions"] if a.startswith("click[b0"))
    observation, _, _, _, info = env.step(asin)
    assert "click[buy now]" in info["available_actions"]
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, retry=RetryConfig(max_attempts=1)))
    messages = [{"role": "user", "content": f"{observation}\n\nThis is the product to buy. Click [Buy Now]."}]
    reply = gw.complete("agent", messages, stage="test", max_tokens=64, temperature=0.0,
                        grammar=reply_grammar(harness, info)).text
    action = harness.parse_action(reply)
    assert harness.action_is_valid(action, info) and action == "click[Buy Now]", reply  # as the page writes it


@pytest.mark.embedded
def test_an_embedded_reply_under_a_command_grammar_is_one_of_the_commands():
    from raso.llm import DEFAULT_LOCAL_MODEL, GatewayConfig, LLMGateway, RetryConfig

    info = {"admissible_commands": ["go to fridge 1", "go to countertop 1", "open drawer 1", "inventory", "look"]}
    gw = LLMGateway(GatewayConfig.for_models(target=DEFAULT_LOCAL_MODEL, retry=RetryConfig(max_attempts=1)))
    prompt = [{"role": "user", "content": "Your task is to: put a cold apple on the countertop. Next action?"}]
    reply = gw.complete("agent", prompt, stage="test", max_tokens=96, temperature=0.0,
                        grammar=alfworld_reply_grammar(info)).text
    assert alfworld_action_is_valid(reply.rsplit("Action: ", 1)[-1], info), reply


# ---------------------------------------------------------------- the measurement script
def test_the_evidence_script_tabulates_reward_and_valid_action_rate(tmp_path, capsys):
    from experiments.offline_evidence import load_cells, main
    from raso.testing import ScriptedModel

    model = ScriptedModel(["Action: search[pants]", "I do not know.", "search[shirt]", "Action: click[back to search]"])
    assert main(["--harness", "webshop", "--model", model.model, "--skill", "none", "--grammar", "on",
                 "--limit", "2", "--max-steps", "2", "--out", str(tmp_path)]) == 0
    [cell] = load_cells(tmp_path)
    assert cell.n == 2 and cell.skill == "none" and cell.grammar and cell.model == model.model
    assert (cell.valid_actions, cell.judged_actions) == (3, 4) and cell.rewards == [0.0, 0.0]
    assert len(cell.cpu_s) == 2 and all("grammar" in p for p in model.params)
    assert "| 75% (3/4) |" in capsys.readouterr().out
    # a finished cell is not run again
    assert main(["--harness", "webshop", "--model", model.model, "--skill", "none", "--grammar", "on",
                 "--limit", "2", "--max-steps", "2", "--out", str(tmp_path)]) == 0
    assert model.remaining == 0 and len(model.calls) == 4


def test_the_evidence_script_passes_harness_options_and_labels_the_cell(tmp_path, capsys):
    from experiments.offline_evidence import load_cells, main
    from raso.testing import ScriptedModel

    model = ScriptedModel(["Action: search[pants]", "Action: click[back to search]"])
    assert main(["--harness", "webshop", "--model", model.model, "--skill", "none", "--grammar", "on",
                 "--harness-arg", "reply_thought=false", "--limit", "1", "--max-steps", "2",
                 "--out", str(tmp_path)]) == 0
    [cell] = load_cells(tmp_path)
    assert cell.harness == "webshop[reply_thought=False]"
    assert all("thought" not in p["grammar"] for p in model.params)  # the option reached the harness
    assert "| webshop[reply_thought=False] |" in capsys.readouterr().out


def test_the_evidence_script_passes_agent_options_and_labels_the_model(tmp_path):
    from experiments.offline_evidence import load_cells, main
    from raso.testing import ScriptedModel

    model = ScriptedModel(["Thought: look for pants\nAction: search[pants]", "Action: click[back to search]"])
    assert main(["--harness", "webshop", "--model", model.model, "--skill", "none", "--grammar", "on",
                 "--agent-arg", "history_thoughts=false", "--limit", "1", "--max-steps", "2",
                 "--out", str(tmp_path)]) == 0
    [cell] = load_cells(tmp_path)
    assert cell.model == f"{model.model}[history_thoughts=False]"
    second_turn = model.calls[1]
    assert [m["content"] for m in second_turn if m["role"] == "assistant"] == ["Action: search[pants]"]


def test_a_path_option_or_skill_file_labels_its_cell_by_a_short_name():
    from experiments.offline_evidence import option_label, skill_label

    # a data_dir such as /work/shared/envdata/alfworld must not turn the cell's folder name into nested folders
    assert option_label("alfworld", {"data_dir": "/data/envdata/alfworld/"}) == "alfworld[data_dir=alfworld]"
    assert option_label("webshop", {"reply_thought": False}) == "webshop[reply_thought=False]"
    assert skill_label("/tmp/variants/short/SKILL.md") == "short" and skill_label("/tmp/v3.md") == "v3"
    assert skill_label("expert") == "expert"


# ---------------------------------------------------------------- the cycle rule
def test_choices_without_drops_the_avoided_but_never_every_choice():
    def choices_without(options, avoid, key=str):
        """The choices the compiled grammar leaves."""
        action_rule = to_gbnf(ActionSpace.choices(options, key=key), avoid).split("action ::= ")[1].strip()
        return [literal[1:-1] for literal in action_rule.split(" | ")]

    assert choices_without(["a", "b", "a", "c"], {"b"}) == ["a", "c"]
    assert choices_without(["a", "b"], {"a", "b"}) == ["a", "b"]  # all tried: keep them rather than allow nothing
    assert choices_without(["Go To X"], {"go to x"}, key=str.lower) == ["Go To X"]
    assert choices_without(["Go To X", "look"], {"go to x"}, key=str.lower) == ["look"]


def test_webshop_grammar_leaves_out_the_clicks_to_avoid():
    harness = WebShopHarness()
    search_info, results_info = _results_info(harness)
    back = "click[back to search]"
    assert back in results_info["available_actions"]
    on_results = reply_grammar(harness, results_info, avoid={back})
    assert _click_gbnf(back) not in on_results
    assert all(_click_gbnf(a) in on_results for a in results_info["available_actions"] if a != back)
    every_click = set(results_info["available_actions"])
    assert all(_click_gbnf(a) in reply_grammar(harness, results_info, avoid=every_click) for a in every_click)
    assert reply_grammar(harness, search_info, avoid={"search[yoga pants]"}) == reply_grammar(harness, search_info)


def test_alfworld_grammar_leaves_out_the_commands_to_avoid():
    info = {"admissible_commands": ["go to fridge 1", "look", "take apple 1 from countertop 1"]}
    grammar = alfworld_reply_grammar(info, avoid={"Go to fridge 1"})
    assert '"go to fridge 1"' not in grammar and '"look" | "take apple 1 from countertop 1"' in grammar


def test_back_in_a_state_the_grammar_rules_out_what_looped_there():
    # The 0.5B's measured loop: search, back to search, the same search, back to search ... The scripted model
    # plays it; the agent must send, on the second visit of the same results page, a grammar without
    # "back to search" (a grammar-following model then has to click something else).
    harness = WebShopHarness(max_steps=4)
    loop = ["Action: search[yoga pants]", "Action: click[back to search]"] * 2
    gw, model = scripted_gateway(loop)
    agent = ExecutionAgent(gw, AgentConfig(mode="none", constrain_replies=True))
    rollout = harness.rollout(harness.tasks("val")[0], [], agent)
    grammars = [p["grammar"] for p in model.params]
    back = _click_gbnf("click[back to search]")
    assert back in grammars[1] and back not in grammars[3]  # first visit of the results page, then the return
    assert grammars[2] == grammars[0]  # the search page: a free search cannot be ruled out
    # the revisited results page (the first search page carries the instruction, so the second one is a new text;
    # on a search page there is nothing to rule out anyway)
    assert rollout.metadata["cycle_avoiding_turns"] == 1

    gw, model = scripted_gateway(loop)
    off = ExecutionAgent(gw, AgentConfig(mode="none", constrain_replies=True, avoid_cycles=False))
    rollout = harness.rollout(harness.tasks("val")[0], [], off)
    assert back in model.params[3]["grammar"] and "cycle_avoiding_turns" not in rollout.metadata


def test_a_harness_without_an_action_space_keeps_free_text_even_when_constrained():
    class FreeShop(WebShopHarness):
        def action_space(self, info):
            return None

    harness = FreeShop(max_steps=2)
    gw, model = scripted_gateway(["Action: search[yoga pants]", "Action: click[back to search]"])
    rollout = harness.rollout(harness.tasks("val")[0], [],
                              ExecutionAgent(gw, AgentConfig(mode="none", constrain_replies=True)))
    assert len(model.params) == 2 and all("grammar" not in p for p in model.params)
    assert "constrained_turns" not in rollout.metadata and rollout.metadata["valid_actions"] == 2


def test_webshop_grammar_without_the_thought_line():
    search_info, results_info = _results_info(WebShopHarness())
    with_thought = reply_grammar(WebShopHarness(), results_info)
    without = reply_grammar(WebShopHarness(reply_thought=False), results_info)
    assert "thought ::=" in with_thought and 'root ::= thought? "Action: " action' in with_thought
    assert "thought" not in without and 'root ::= "Action: " action' in without
    assert with_thought.split("action ::=")[1] == without.split("action ::=")[1]  # the same actions


# ---------------------------------------------------------------- thoughts in the history
@pytest.mark.parametrize(("constrain", "history_thoughts", "thought_kept"), [
    (True, None, False),  # grammar-constrained: the earlier thought is not sent back (it was copied verbatim)
    (False, None, True),  # free text keeps whole replies
    (True, True, True),
    (False, False, False),
])
def test_earlier_thoughts_are_sent_back_as_configured(constrain, history_thoughts, thought_kept):
    harness = WebShopHarness(max_steps=2)
    gw, model = scripted_gateway(["Thought: pants are wanted\nAction: search[yoga pants]",
                                  "Action: click[back to search]"])
    config = AgentConfig(mode="none", constrain_replies=constrain, history_thoughts=history_thoughts)
    harness.rollout(harness.tasks("val")[0], [], ExecutionAgent(gw, config))
    sent_back = [m["content"] for m in model.calls[1] if m["role"] == "assistant"]
    expected = "Thought: pants are wanted\nAction: search[yoga pants]" if thought_kept else "Action: search[yoga pants]"
    assert sent_back == [expected]
