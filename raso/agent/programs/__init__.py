"""Agent programs: the programs a skill can be run inside (Claude Code, Codex CLI, Qwen Code, mini-swe-agent, a
user's command; or raso's builtin loop), chosen by `program.name` and registered by entry point
(raso.agent.programs.registry)."""
