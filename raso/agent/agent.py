"""The execution agent: runs one task under a harness with a skill, through the LLM gateway.

A ReAct-style loop (Thought / Action) with a step budget. The skill reaches the model in one of the four
incorporation modes studied by SRA-Bench:

* ``none``        — no skill;
* ``full``        — every given skill is placed in the system prompt in full;
* ``select``      — one model call picks one skill by name and description (or none), which is then placed
  in full;
* ``progressive`` — the system prompt holds only a catalog (name + description) and the agent may answer
  ``LOAD_SKILL[name]``; the agent itself replies with the skill text as the next observation. Loads do not
  use environment steps but do count toward a hard turn cap.

The conversation sent to the model keeps the system prompt, the task and as many recent turns as fit a
character budget (small local models have an 8k-token context). Any failure — model junk that crashes the
environment, a tool crash, a gateway error, the wall-clock limit — ends the rollout with reward 0 and the
error recorded; `run` never raises an `Exception`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from raso.choices import AgentMode, choices_of
from raso.harness import EnvEnd, Harness, Rollout, Step, Task, TextTasks, clamp_reward, json_safe
from raso.harness.action_grammar import to_gbnf
from raso.harness.base import check_error_fields, failure_fields
from raso.llm.errors import LLMError
from raso.llm.profiles import ModelProfile
from raso.prompts import DEFAULT_PROMPTS, PromptLibrary
from raso.skill import Skill

if TYPE_CHECKING:
    from raso.llm.gateway import ModelGateway

Mode = AgentMode
MODES: tuple[str, ...] = choices_of(AgentMode)

# `LOAD_SKILL[name]` as the action, or alone on a line of the reply (optionally after `Action:`).
_LOAD_ACTION = re.compile(r"^\s*LOAD_SKILL\s*\[\s*([^\]\n]*?)\s*\]\s*$", re.IGNORECASE)
_LOAD_IN_REPLY = re.compile(r"^\s*(?:Action\s*:\s*)?`?LOAD_SKILL\s*\[\s*([^\]\n]*?)\s*\]", re.IGNORECASE | re.MULTILINE)
_SKILL_CLOSE = re.compile(r"</\s*skill", re.IGNORECASE)
_FIRST_INT = re.compile(r"-?\d+")
# A reply's leading one-line thought (the reply grammars' `Thought: ...` line), up to what follows it.
_LEADING_THOUGHT = re.compile(r"\A\s*Thought\s*:[^\n]*\n+(?=\S)", re.IGNORECASE)


class AgentConfig(BaseModel):
    """How raso's own execution agent runs. Defaults suit a small embedded model (8k-token context). An external
    agent program (the config's `program` section) reads role, stage, max_steps, max_tokens (a cap on what it may
    ask per call), max_wall_s and max_observation_chars (tool outputs kept in the trajectory) from here too."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(default="agent", description="gateway role of the execution model M")
    mode: Mode = "full"
    max_steps: int | None = Field(default=None, ge=1, description="environment actions; None = the harness's max_steps")
    max_loads: int = Field(default=10, ge=0, description="progressive mode: most skill loads per rollout")
    max_turns: int | None = Field(
        default=None, ge=1, description="hard cap on model turns in the loop; None = max_steps (+ max_loads in progressive)"
    )
    context_chars: int = Field(
        default=20_000, ge=1_000,
        description="character budget of the conversation sent each turn; older turns are dropped to fit",
    )
    history_turns: int | None = Field(
        default=None, ge=1, description="also keep at most this many recent turns (loaded skills always stay)"
    )
    max_observation_chars: int = Field(default=6_000, ge=200, description="longer observations keep head and tail")
    max_reply_chars: int = Field(default=4_000, ge=200, description="longer replies are cut in the history sent back")
    history_thoughts: bool | None = Field(
        default=None,
        description="send earlier replies back with their leading `Thought:` line: None = not when the replies are "
        "grammar-constrained (a small model copies its previous thought into every later turn, and the "
        "thought, not the page, then chooses the action), True = always, False = never",
    )
    max_tokens: int | None = Field(
        default=None, ge=1, description="reply length limit per model turn; None = the harness's max_reply_tokens"
    )
    temperature: float | None = None
    stop: list[str] | None = Field(
        default_factory=lambda: ["\nObservation:"],
        description="stop sequences; keeps a model from writing the environment's answer itself",
    )
    turn_reminder: bool = Field(
        default=True,
        description="end each user message with a one-line reminder of the reply format (small models otherwise "
        "tend to restate the task instead of acting)",
    )
    max_wall_s: float | None = Field(default=None, gt=0, description="wall-clock limit per rollout, checked between turns")
    constrain_replies: bool | None = Field(
        default=None,
        description="send the harness's action space (Harness.action_space), compiled for the model, with each "
        "turn, so every reply is a valid action: None = for models that support grammars (the embedded ones), "
        "hosted models keep free text; False = never; True = always (the model must accept a `grammar` parameter)",
    )
    repeat_temperature: float = Field(
        default=0.8, ge=0.0, le=2.0,
        description="temperature after the same invalid reply came twice in a row (with a warning), until a valid "
        "action: the agent must change something rather than repeat it until the step budget is gone",
    )
    avoid_cycles: bool = Field(
        default=True,
        description="under a reply grammar, rule out of it the actions already taken in an identical observation: "
        "the agent came back to that state, so repeating them would loop (a small model otherwise goes search -> "
        "back to search until the budget is gone); free-text models are unaffected",
    )
    stage: str = Field(default="rollout", description="gateway stage name of the agent's turns")


class SkillChoice(BaseModel):
    """The answer of the selection call in `select` mode."""

    skill_number: int = Field(description="number of the chosen skill in the list, or 0 if none fits")


@dataclass
class _RepeatGuard:
    """The rule "the same invalid reply twice must change something": after it, the model gets a warning with
    the next observation and samples at a higher temperature until it sends a valid action."""

    last_invalid: str | None = None
    temperature: float | None = None  # None = the configured one

    def after_reply(self, reply: str, valid: bool | None, repeat_temperature: float) -> bool:
        """Note one reply and whether its action was valid; True when it repeats the previous invalid reply."""
        if valid is not False:
            self.last_invalid = None
            self.temperature = None
            return False
        text = reply.strip()
        repeated = text == self.last_invalid
        self.last_invalid = text
        if repeated:
            self.temperature = repeat_temperature
        return repeated


class _CycleGuard:
    """The actions taken from each observation seen so far in a rollout: coming back to an observation after an
    action means that action (in that state) led round in a circle, so the grammar rules it out next time."""

    def __init__(self) -> None:
        self._taken: dict[str, set[str]] = {}

    def avoid(self, observation: str) -> frozenset[str]:
        return frozenset(self._taken.get(observation, ()))

    def note(self, observation: str, action: str) -> None:
        self._taken.setdefault(observation, set()).add(action)


class RolloutTimeout(RuntimeError):
    """The rollout ran past AgentConfig.max_wall_s."""


@dataclass
class _Turn:
    reply: str
    observation: str  # as sent to the model (already cut to size)
    pinned: bool = False  # loaded skills stay in the conversation when older turns are dropped


@dataclass
class _State:
    """What one rollout accumulates; becomes the Rollout even when the loop fails half-way."""

    steps: list[Step] = field(default_factory=list)
    turns: list[_Turn] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    env_steps: int = 0
    reward: float = 0.0
    soft_score: float | None = None
    terminated: bool = False
    truncated: bool = False
    final_output: str | None = None
    failure: dict[str, Any] = field(default_factory=dict)  # the rollout's `error` and `outcome` when it failed
    skills_loaded: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def quote_skill(skill: Skill) -> str:
    """A skill as delimited quoted material; a closing marker inside the text cannot end the quote early."""
    def clean(text: str) -> str:
        return _SKILL_CLOSE.sub("<\\/skill", text)

    name = clean(skill.name).replace('"', "'")
    return f'<skill name="{name}">\ndescription: {clean(skill.description)}\n\n{clean(skill.body).strip()}\n</skill>'


def skill_catalog(skills: Sequence[Skill], *, max_description_chars: int = 300) -> str:
    """Numbered `name: "description"` lines (descriptions collapsed and cut)."""
    lines = []
    for i, skill in enumerate(skills, start=1):
        desc = " ".join(skill.description.split())
        if len(desc) > max_description_chars:
            desc = desc[: max_description_chars - 3] + "..."
        desc = _SKILL_CLOSE.sub("<\\/skill", desc).replace('"', "'")
        lines.append(f'{i}. {skill.name}: "{desc}"')
    return "\n".join(lines)


def cut_middle(text: str, limit: int) -> str:
    """`text` within `limit` characters, keeping its head and tail (errors are often at the end)."""
    if len(text) <= limit:
        return text
    marker = f"\n... [{len(text) - limit} characters omitted] ...\n"
    keep = max(limit - len(marker), 0)
    head = keep * 2 // 3
    return text[:head] + marker + text[len(text) - (keep - head):]


def text_form(harness: Harness) -> TextTasks:
    """The text form of `harness`'s tasks, which raso's own agent runs; ValueError for a harness without one."""
    text = harness.text_form()
    if text is None:
        raise ValueError(f"harness {harness.name!r} has no text form (raso.harness.TextTasks), which raso's own agent "
                         "runs: choose an agent backend that works in the harness's workspace form")
    return text


class ExecutionAgent:
    """Runs tasks for harnesses; satisfies `raso.harness.RolloutRunner`. Thread-safe (no per-run state on self).

    `prompts` is the template library of the agent's prompts (None = the package defaults;
    `PromptLibrary.for_harness(harness)` lets the harness's `prompts/` folder replace any of them).
    """

    def __init__(
        self, gateway: ModelGateway, config: AgentConfig | None = None, *, prompts: PromptLibrary | None = None
    ) -> None:
        self.gateway = gateway
        self.config = config or AgentConfig()
        self.prompts = prompts or DEFAULT_PROMPTS

    # ------------------------------------------------------------------ public
    def run(self, harness: Harness, task: Task, skills: Sequence[Skill] | None = None) -> Rollout:
        """One rollout. Never raises an Exception: failures give reward 0 with `error` set."""
        skills = list(skills or [])
        cfg = self.config
        started = time.perf_counter()
        state = _State()
        env = None
        try:
            max_steps = cfg.max_steps or harness.max_steps
            state.metadata["max_steps"] = max_steps
            text = text_form(harness)
            env = text.make_env(task)
            self._loop(harness, text, task, skills, env, state, max_steps, started)
        except Exception as exc:  # model junk, tool crash, timeout, LLMError: a score of 0, never a crash
            state.failure = failure_fields(exc, trace_limit=6)
            state.reward = 0.0
            state.metadata["stop_reason"] = "error"
        finally:
            if env is not None:
                try:
                    env.close()
                except Exception as exc:  # a failed cleanup does not change the score
                    state.metadata["close_error"] = f"{type(exc).__name__}: {exc}"
        return Rollout(
            task_id=task.id,
            harness=harness.name,
            reward=clamp_reward(state.reward),
            soft_score=state.soft_score,
            trajectory=state.steps,
            final_output=state.final_output,
            **state.failure,
            prompt_tokens=state.prompt_tokens,
            completion_tokens=state.completion_tokens,
            cost_usd=state.cost_usd,
            wall_time_s=time.perf_counter() - started,
            skill_names=[s.name for s in skills],
            metadata=state.metadata,
            terminated=state.terminated,
            truncated=state.truncated,
            env_steps=state.env_steps,
            model_calls=state.model_calls,
            skills_loaded=state.skills_loaded,
            mode=cfg.mode,
        )

    # ------------------------------------------------------------------ the loop
    def _loop(self, harness: Harness, text: TextTasks, task: Task, skills: list[Skill], env: Any, state: _State,
              max_steps: int, started: float) -> None:
        cfg = self.config
        reset = env.reset()
        observation, info = reset if isinstance(reset, tuple) else (reset, {})
        observation = str(observation)
        info = dict(info or {})
        guard = _RepeatGuard()
        cycles = _CycleGuard()
        constrained = self._grammar_supported()

        in_prompt: list[Skill] = []
        catalog: list[Skill] = []
        if cfg.mode == "full":
            in_prompt = skills
        elif cfg.mode == "select" and skills:
            chosen = self._select(harness, task, observation, skills, state)
            in_prompt = [chosen] if chosen is not None else []
        elif cfg.mode == "progressive":
            catalog = skills
        state.metadata["skills_in_prompt"] = [s.name for s in in_prompt]

        system = self.system_prompt(harness, in_prompt, catalog, max_steps)
        reminder = text.turn_reminder  # harnesses may word the reply format their own way
        first = cut_middle(observation, cfg.max_observation_chars)
        loads_allowed = cfg.max_loads if catalog else 0
        max_turns = cfg.max_turns or (max_steps + loads_allowed)

        turn = 0
        terminal_reward = 0.0
        stop_reason = "step_budget"
        while state.env_steps < max_steps:
            if turn >= max_turns:
                stop_reason = "turn_cap"
                break
            if cfg.max_wall_s is not None and time.perf_counter() - started > cfg.max_wall_s:
                raise RolloutTimeout(f"rollout exceeded its wall-clock limit of {cfg.max_wall_s:g} s")
            turn += 1
            messages = self.build_messages(system, first, state.turns, reminder)
            grammar = None
            if constrained:
                avoid = cycles.avoid(observation) if cfg.avoid_cycles else frozenset()
                grammar = to_gbnf(text.action_space(info), avoid)
                if avoid:
                    state.metadata["cycle_avoiding_turns"] = state.metadata.get("cycle_avoiding_turns", 0) + 1
            reply = self._complete(messages, state, self._reply_tokens(text), grammar=grammar,
                                   temperature=guard.temperature)
            if grammar is not None:
                state.metadata["constrained_turns"] = state.metadata.get("constrained_turns", 0) + 1

            load_key = self._load_request(reply) if catalog else None
            action = None
            if load_key is None:
                action = text.parse_action(reply)
                if catalog:
                    match = _LOAD_ACTION.match(action)
                    load_key = match.group(1) if match else None
            if load_key is not None:
                result = self._load(load_key, catalog, state, loads_allowed)
                state.steps.append(Step(observation=observation, action=f"LOAD_SKILL[{load_key}]", reply=reply,
                                        kind="load_skill", result=result))
                state.turns.append(_Turn(reply=self._history_reply(reply, constrained), observation=result,
                                         pinned=result.startswith("<skill")))
                continue

            assert action is not None
            valid = text.action_is_valid(action, info)
            if valid is not None:
                key = "valid_actions" if valid else "invalid_actions"
                state.metadata[key] = state.metadata.get(key, 0) + 1
            warning = guard.after_reply(reply, valid, self.config.repeat_temperature)
            if warning:
                state.metadata["repeat_interventions"] = state.metadata.get("repeat_interventions", 0) + 1
            cycles.note(observation, action)
            result_obs, reward, terminated, truncated, info = env.step(action)
            state.env_steps += 1
            result_obs = str(result_obs)
            info = dict(info or {})
            reward = clamp_reward(reward)
            state.steps.append(Step(observation=observation, action=action, reply=reply, reward=reward,
                                    info=json_safe(info), kind="env", result=result_obs))
            state.final_output = str(info["final_output"]) if info.get("final_output") is not None else action
            if info.get("soft_score") is not None:
                state.soft_score = clamp_reward(info["soft_score"])
            observation = result_obs
            if terminated:
                state.terminated = True
                terminal_reward = reward
                stop_reason = "terminated"
                break
            if truncated:
                stop_reason = "env_truncated"
                break
            left = max_steps - state.env_steps
            message = self._observation_message(result_obs, left)
            if warning:
                message += "\n\n" + self.prompts.render("agent_repeated_invalid.md").strip()
            state.turns.append(_Turn(reply=self._history_reply(reply, constrained), observation=message))
        if not state.terminated:
            state.truncated = True
        # the harness's one scorer turns how its environment ended into the rollout's reward
        score = harness.score(task, EnvEnd(terminated=state.terminated, reward=terminal_reward,
                                           soft_score=state.soft_score, info=json_safe(info)))
        state.reward, state.soft_score = score.reward, score.soft_score
        if score.check_error:  # the check could not judge: an error of the rollout, never a 0 that counts
            state.failure = check_error_fields(score.check_error)
        state.metadata["stop_reason"] = stop_reason
        state.metadata["final_observation"] = cut_middle(observation, 20_000)

    # ------------------------------------------------------------------ prompts and history
    def system_prompt(self, harness: Harness, in_prompt: Sequence[Skill], catalog: Sequence[Skill], max_steps: int) -> str:
        if in_prompt:
            skill_section = self.prompts.render("agent_skills_full.md",
                                                skills="\n\n".join(quote_skill(s) for s in in_prompt))
        elif catalog:
            skill_section = self.prompts.render("agent_skills_catalog.md", catalog=skill_catalog(catalog),
                                                max_loads=self.config.max_loads)
        else:
            skill_section = ""
        return self.prompts.render(
            "agent_system.md",
            task_description=harness.task_description,
            harness_description=harness.harness_description,
            action_instructions=text_form(harness).action_instructions,
            max_steps=max_steps,
            skill_section=skill_section,
        )

    def build_messages(
        self, system: str, first: str, turns: Sequence[_Turn], reminder: str | None = None
    ) -> list[dict[str, str]]:
        """System prompt + task + the most recent turns that fit `context_chars`.

        The newest turn and pinned turns (loaded skills) are always kept; older turns are dropped first and
        the task message says how many were left out.
        """
        budget = self.config.context_chars - len(system) - len(first)
        kept: list[_Turn] = []
        used = 0
        recent = 0  # unpinned turns kept
        full = False
        limit = self.config.history_turns
        for turn in reversed(turns):
            size = len(turn.reply) + len(turn.observation)
            if limit is not None and recent >= limit:
                full = True
            if not kept or turn.pinned or (not full and used + size <= budget):
                kept.append(turn)
                used += size
                recent += 0 if turn.pinned else 1
            else:
                full = True
        kept.reverse()
        omitted = len(turns) - len(kept)
        task_text = first
        if omitted:
            task_text += f"\n\n[{omitted} earlier turn(s) are omitted here to fit the context window.]"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": task_text}]
        for turn in kept:
            messages.append({"role": "assistant", "content": turn.reply})
            messages.append({"role": "user", "content": turn.observation})
        if self.config.turn_reminder:  # only on the newest message, so it is never repeated in the history
            reminder = reminder or self.prompts.render("agent_reminder.md").strip()
            messages[-1] = {"role": "user", "content": f"{messages[-1]['content']}\n\n{reminder}"}
        return messages

    def _observation_message(self, observation: str, actions_left: int) -> str:
        return f"Observation ({actions_left} actions left):\n{cut_middle(observation, self.config.max_observation_chars)}"

    def _history_reply(self, reply: str, constrained: bool) -> str:
        keep_thought = self.config.history_thoughts
        if keep_thought is None:
            keep_thought = not constrained
        if not keep_thought:
            reply = _LEADING_THOUGHT.sub("", reply, count=1)
        return cut_middle(reply, self.config.max_reply_chars)

    # ------------------------------------------------------------------ model calls
    def _reply_tokens(self, text: TextTasks) -> int:
        wanted = self.config.max_tokens or text.max_reply_tokens
        profile = self._profile()
        return (profile.cap_reply_tokens(wanted) or wanted) if profile is not None else wanted

    def _params(self, max_tokens: int, *, grammar: str | None = None, temperature: float | None = None) -> dict[str, Any]:
        cfg = self.config
        params: dict[str, Any] = {"max_tokens": max_tokens}
        temperature = temperature if temperature is not None else cfg.temperature
        if temperature is not None:
            params["temperature"] = temperature
        if cfg.stop:
            params["stop"] = list(cfg.stop)
        if grammar is not None:
            params["grammar"] = grammar
        return params

    # ------------------------------------------------------------------ constrained replies
    def _grammar_supported(self) -> bool:
        """Whether this agent's model takes a reply grammar (forced on or off by AgentConfig.constrain_replies)."""
        if self.config.constrain_replies is not None:
            return self.config.constrain_replies
        profile = self._profile()
        return profile is not None and profile.grammar

    def _profile(self) -> ModelProfile | None:
        """The agent role's model profile; None for a gateway stand-in that has no profiles."""
        try:
            return self.gateway.profile(self.config.role)
        except (AttributeError, LLMError):
            return None

    def _account(self, completion: Any, state: _State) -> None:
        state.model_calls += 1
        state.prompt_tokens += int(getattr(completion, "prompt_tokens", 0) or 0)
        state.completion_tokens += int(getattr(completion, "completion_tokens", 0) or 0)
        state.cost_usd += float(getattr(completion, "cost_usd", 0.0) or 0.0)

    def _complete(self, messages: list[dict[str, str]], state: _State, max_tokens: int, *,
                  grammar: str | None = None, temperature: float | None = None) -> str:
        completion = self.gateway.complete(self.config.role, messages, stage=self.config.stage,
                                           **self._params(max_tokens, grammar=grammar, temperature=temperature))
        self._account(completion, state)
        return completion.text or ""

    # ------------------------------------------------------------------ select mode
    def _select(self, harness: Harness, task: Task, observation: str, skills: list[Skill], state: _State) -> Skill | None:
        """One call: the model names one skill by number (0 = none). Junk means no skill, noted in metadata."""
        from raso.llm.gateway import response_format_for
        from raso.llm.structured import parse_structured, with_instructions

        prompt = self.prompts.render(
            "agent_select.md",
            task_description=harness.task_description,
            task=cut_middle(task.instruction or observation, self.config.max_observation_chars),
            candidates=skill_catalog(skills),
        )
        messages = with_instructions([{"role": "user", "content": prompt}], SkillChoice, prompts=self.prompts)
        _, role_cfg = self.gateway.config.resolve_role(self.config.role)
        params: dict[str, Any] = {"max_tokens": 64}
        if self.config.temperature is not None:
            params["temperature"] = self.config.temperature
        response_format = response_format_for(role_cfg.model, SkillChoice, profile=self._profile())
        if response_format is not None:
            params["response_format"] = response_format
        completion = self.gateway.complete(self.config.role, messages, stage=f"{self.config.stage}.select", **params)
        self._account(completion, state)
        text = completion.text or ""
        state.metadata["select_reply"] = text[:2_000]
        try:
            number: int | None = parse_structured(text, SkillChoice).skill_number
        except ValueError:
            found = _FIRST_INT.search(text)  # SRA-Bench's selection prompt asks for a bare number
            number = int(found.group()) if found else None
        if number is None:
            state.metadata["select_error"] = "the selection reply named no skill number; running without a skill"
            chosen = None
        elif number == 0:
            chosen = None
        elif 1 <= number <= len(skills):
            chosen = skills[number - 1]
        else:
            state.metadata["select_error"] = f"skill number {number} is not in 1..{len(skills)}; running without a skill"
            chosen = None
        state.metadata["selected_skill"] = chosen.name if chosen else None
        return chosen

    # ------------------------------------------------------------------ progressive mode
    @staticmethod
    def _load_request(reply: str) -> str | None:
        match = _LOAD_IN_REPLY.search(reply)
        return match.group(1) if match else None

    @staticmethod
    def resolve_skill(key: str, catalog: Sequence[Skill]) -> Skill | None:
        """A catalog skill by exact name, case-insensitive name, or 1-based number."""
        wanted = key.strip().strip("\"'`").strip()
        for skill in catalog:
            if skill.name == wanted:
                return skill
        for skill in catalog:
            if skill.name.lower() == wanted.lower():
                return skill
        if wanted.isdigit() and 1 <= int(wanted) <= len(catalog):
            return catalog[int(wanted) - 1]
        return None

    def _load(self, key: str, catalog: Sequence[Skill], state: _State, loads_allowed: int) -> str:
        if len(state.skills_loaded) >= loads_allowed:
            return (f"Skill load refused: the limit of {loads_allowed} loads is reached. "
                    "Continue the task with actions in the environment.")
        skill = self.resolve_skill(key, catalog)
        if skill is None:
            names = ", ".join(f"{i}. {s.name}" for i, s in enumerate(catalog, start=1))
            return f"There is no skill named {key!r}. Skills you can load: {names}."
        state.skills_loaded.append(skill.name)
        return quote_skill(skill)


__all__ = ["AgentConfig", "ExecutionAgent", "MODES", "Mode", "RolloutTimeout", "SkillChoice", "cut_middle",
           "quote_skill", "skill_catalog"]
