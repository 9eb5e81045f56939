"""GBNF reply grammars: what a harness declares as a valid agent reply (llama.cpp's grammar format).

A model that supports grammars (the embedded llama.cpp models) can then only write a reply that parses as a
valid action: a small model can no longer restate the task, copy a `<placeholder>` or invent a button. The
grammar is the whole reply: an optional one-line thought, then `Action: <action>`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

# A thought is one bounded line, so a model cannot spend its token budget before it reaches the action. 320
# characters (~75 tokens) leave room for the action within a 128-token reply; a tighter bound cuts thoughts
# mid-sentence and forces an action the thought had not reached (docs/model-profiles.md).
THOUGHT_MAX_CHARS = 320


def gbnf_literal(text: str) -> str:
    """`text` as a quoted GBNF terminal (backslash, quote and control characters escaped)."""
    out = []
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def gbnf_caseless(text: str) -> str:
    """`text` as a GBNF sequence that matches it in any letter case: each cased letter becomes a class such as
    `[bB]`, the rest stays quoted. For environments that read their actions case-insensitively and show them
    in another case than they list them: a model under the grammar copies what it sees on the page (WebShop's
    `[B0WS000029]`, `[Buy Now]`); a lowercase-only literal turns its first letter into whatever lowercase
    alternative comes closest (`b` -> `back to search`)."""
    parts: list[str] = []
    run: list[str] = []
    for char in text:
        lower, upper = char.lower(), char.upper()
        if lower != upper and len(lower) == len(upper) == 1:
            if run:
                parts.append(gbnf_literal("".join(run)))
                run = []
            parts.append(f"[{gbnf_class_char(lower)}{gbnf_class_char(upper)}]")
        else:
            run.append(char)
    if run:
        parts.append(gbnf_literal("".join(run)))
    return " ".join(parts) if parts else '""'


def gbnf_class_char(char: str) -> str:
    """One character as written inside a GBNF character class."""
    return "\\" + char if char in "]\\^-[" else char


def choice_rule(options: Iterable[str]) -> str:
    """An alternation of literal options (duplicates dropped, order kept); ValueError when there are none."""
    unique = list(dict.fromkeys(o for o in options if o))
    if not unique:
        raise ValueError("a choice needs at least one option")
    return " | ".join(gbnf_literal(o) for o in unique)


def choices_without(options: Iterable[str], avoid: Collection[str], *, key: Callable[[str], str] = str) -> list[str]:
    """`options` (duplicates dropped, order kept) minus those in `avoid` (compared through `key`), unless that
    would leave none: a state whose every action was tried keeps them all rather than allowing nothing."""
    unique = list(dict.fromkeys(o for o in options if o))
    avoided = {key(a) for a in avoid}
    kept = [o for o in unique if key(o) not in avoided]
    return kept or unique


def free_argument_rule(max_chars: int = 100) -> str:
    """Text for a bracketed argument: 1..max_chars characters, no bracket or newline."""
    return f"[^\\[\\]\\n]{{1,{max_chars}}}"


def action_reply_grammar(action_rule: str, *, extra_rules: dict[str, str] | None = None,
                         thought: bool = True) -> str:
    """A whole-reply grammar: `[Thought: <one line>\\n]Action: <action>`, where `action_rule` is the GBNF
    right-hand side of a valid action and `extra_rules` are further named rules it refers to."""
    lines = []
    if thought:
        lines.append('root ::= thought? "Action: " action')
        lines.append(f'thought ::= "Thought: " [^\\n]{{1,{THOUGHT_MAX_CHARS}}} "\\n"')
    else:
        lines.append('root ::= "Action: " action')
    lines.append(f"action ::= {action_rule}")
    for name, rule in (extra_rules or {}).items():
        lines.append(f"{name} ::= {rule}")
    return "\n".join(lines) + "\n"


def command_choice_grammar(commands: Iterable[str], *, thought: bool = True) -> str | None:
    """A reply whose action is one of `commands` exactly; None when there are no commands to choose from."""
    commands = [c for c in commands if c]
    if not commands:
        return None
    return action_reply_grammar(choice_rule(commands), thought=thought)


__all__ = ["THOUGHT_MAX_CHARS", "action_reply_grammar", "choice_rule", "choices_without", "command_choice_grammar",
           "free_argument_rule", "gbnf_literal"]
