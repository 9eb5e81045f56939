"""The execution agent (a ReAct loop over a harness's text environment) and parallel evaluation of a skill."""

from .agent import MODES, AgentConfig, ExecutionAgent, RolloutTimeout, cut_middle, quote_skill, skill_catalog

__all__ = ["MODES", "AgentConfig", "ExecutionAgent", "RolloutTimeout", "cut_middle", "quote_skill", "skill_catalog"]
