"""A harness's action space (raso.harness.actions) compiled to what a backend constrains decoding with.

* `to_gbnf`: llama.cpp's GBNF grammar of the whole reply, for backends that take a `grammar` (the embedded
  models). A model under it can only write a reply that parses as a valid action: a small model can no longer
  restate the task, copy a `<placeholder>` or invent a button.
* `to_json_schema`: a JSON schema of the reply as an object (`thought`, `program`, `action`), for backends
  that constrain to a schema; `reply_from_json` writes such an object back as the reply text the harness
  parses.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from .actions import THOUGHT_MAX_CHARS, Action, ActionSpace, CodeBlock, FreeText, Text


# ---------------------------------------------------------------- GBNF building blocks
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
    `[bB]`, the rest stays quoted. A model under the grammar copies what it sees on the page; a lowercase-only
    literal turns its first capital into whatever lowercase alternative comes closest."""
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
    if char == "\n":
        return "\\n"
    return "\\" + char if char in "]\\^-[" else char


def choice_rule(options: Iterable[str]) -> str:
    """An alternation of literal options (duplicates and empty ones dropped, order kept); ValueError when there
    are none."""
    unique = list(dict.fromkeys(o for o in options if o))
    if not unique:
        raise ValueError("a choice needs at least one option")
    return " | ".join(gbnf_literal(o) for o in unique)


def _free_text(piece: FreeText) -> str:
    chars = "".join(gbnf_class_char(c) for c in dict.fromkeys(piece.excludes + "\n"))  # one line at most
    return f"[^{chars}]{{{piece.min_chars},{piece.max_chars}}}"


def _piece(piece: Text | FreeText) -> str:
    if isinstance(piece, FreeText):
        return _free_text(piece)
    return gbnf_caseless(piece.value) if piece.caseless else gbnf_literal(piece.value)


def _alternative(action: Action) -> str:
    return " ".join(_piece(p) for p in action.pieces)


def _action_rules(space: ActionSpace) -> tuple[list[str], dict[str, str]]:
    """The action alternatives (duplicates and empty choices dropped, order kept) and the named rules."""
    alternatives: list[str] = []
    named: dict[str, str] = {}
    for action in space.actions:
        if action.text == "":
            continue
        rule = _alternative(action)
        if action.name:
            named[action.name] = rule
            rule = action.name
        if rule not in alternatives:
            alternatives.append(rule)
    return alternatives, named


def _thought_rule(excludes: str = "") -> str:
    chars = "".join(gbnf_class_char(c) for c in "\n" + excludes)
    return f'thought ::= "Thought: " [^{chars}]{{1,{THOUGHT_MAX_CHARS}}} "\\n"'


def to_gbnf(space: ActionSpace | None, avoid: Collection[str] = ()) -> str | None:
    """The GBNF of a whole valid reply in `space` (less the choices in `avoid`, see ActionSpace.without): an
    optional one-line thought, an optional code block, then `Action: <action>`. None for free text (no space,
    or a space without actions)."""
    if space is None:
        return None
    space = space.without(avoid)
    alternatives, named = _action_rules(space)
    if not alternatives:
        return None
    start = "thought? " if space.thought else ""
    if space.code_block is not None:
        lines = [f"root ::= {start}{_with_code_block(space.code_block, space, alternatives)}"]
        if space.thought:
            lines.append(_thought_rule("`"))  # a backtick in the thought could open a code block early
        lines += _code_block_rules(space.code_block)
    else:
        lines = [f'root ::= {start}"Action: " action']
        if space.thought:
            lines.append(_thought_rule())
        lines.append(f"action ::= {' | '.join(alternatives)}")
    lines += [f"{name} ::= {rule}" for name, rule in named.items()]
    return "\n".join(lines) + "\n"


def _with_code_block(block: CodeBlock, space: ActionSpace, alternatives: list[str]) -> str:
    with_program = f'program "Action: " ({" | ".join(alternatives)})'
    bare = [gbnf_literal(f"Action: {a.text}") for a in space.actions if a.text and a.text in block.optional_for]
    return f"({' | '.join([with_program, *bare])})" if bare else with_program


def _code_block_rules(block: CodeBlock) -> list[str]:
    # program lines may not contain a backtick, so the block cannot end early
    fence_open, fence_close = gbnf_literal("```" + block.language + "\n"), gbnf_literal("```\n")
    return [f"program ::= {fence_open} line+ {fence_close}", 'line ::= [^`\\n]* "\\n"']


# ---------------------------------------------------------------- JSON schema
_REGEX_SPECIAL = set("\\^$.|?*+()[]{}/")


def _regex_literal(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIAL else ("\\n" if c == "\n" else c) for c in text)


def _regex_class_char(char: str) -> str:
    return "\\n" if char == "\n" else ("\\" + char if char in "]\\^-[" else char)


def _regex_piece(piece: Text | FreeText) -> str:
    if isinstance(piece, FreeText):
        excluded = "".join(_regex_class_char(c) for c in dict.fromkeys(piece.excludes + "\n"))
        return f"[^{excluded}]{{{piece.min_chars},{piece.max_chars}}}"
    if not piece.caseless:
        return _regex_literal(piece.value)
    return "".join(f"[{_regex_class_char(c.lower())}{_regex_class_char(c.upper())}]"
                   if c.lower() != c.upper() and len(c.lower()) == len(c.upper()) == 1 else _regex_literal(c)
                   for c in piece.value)


def _action_schema(action: Action) -> dict[str, Any]:
    text = action.text
    if text is not None and not any(isinstance(p, Text) and p.caseless for p in action.pieces):
        return {"const": text}
    return {"type": "string", "pattern": "^" + "".join(_regex_piece(p) for p in action.pieces) + "$"}


def to_json_schema(space: ActionSpace | None, avoid: Collection[str] = ()) -> dict[str, Any] | None:
    """A JSON schema of a valid reply in `space` as an object: `action` (required), `thought` where the space
    allows one, `program` where it has a code block (required unless the action may go without one). None
    for free text."""
    if space is None:
        return None
    space = space.without(avoid)
    choices: list[dict[str, Any]] = []
    for action in space.actions:
        action_schema = _action_schema(action)
        if action.text != "" and action_schema not in choices:
            choices.append(action_schema)
    if not choices:
        return None
    properties: dict[str, Any] = {}
    if space.thought:
        properties["thought"] = {"type": "string", "maxLength": THOUGHT_MAX_CHARS, "pattern": "^[^\\n]*$"}
    required = ["action"]
    if space.code_block is not None:
        properties["program"] = {"type": "string", "pattern": "^[^`]*$"}
        required = ["program", "action"]
    properties["action"] = choices[0] if len(choices) == 1 else {"anyOf": choices}
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required,
                              "additionalProperties": False}
    block = space.code_block
    if block is not None and block.optional_for:
        # the block may be left out only with one of the actions that allow it
        schema = {"anyOf": [schema, {**schema, "required": ["action"],
                                     "properties": {**{k: v for k, v in properties.items() if k != "program"},
                                                    "action": {"enum": list(block.optional_for)}}}]}
    return schema


def reply_from_json(reply: dict[str, Any], space: ActionSpace) -> str:
    """A reply object (as `to_json_schema` describes) written as the reply text the harness parses."""
    lines = []
    thought = str(reply.get("thought") or "").strip()
    if thought and space.thought:
        lines.append(f"Thought: {' '.join(thought.split())}")
    program = reply.get("program")
    if program and space.code_block is not None:
        lines.append(f"```{space.code_block.language}\n{str(program).rstrip()}\n```")
    lines.append(f"Action: {reply.get('action', '')}")
    return "\n".join(lines)


__all__ = ["THOUGHT_MAX_CHARS", "choice_rule", "gbnf_caseless", "gbnf_literal", "reply_from_json", "to_gbnf",
           "to_json_schema"]
