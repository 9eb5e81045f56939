"""Agent backends: the programs a skill can be run inside (raso's builtin loop, Claude Code, Codex CLI, Qwen Code,
mini-swe-agent, a user's command), chosen by `agent.backend`."""
