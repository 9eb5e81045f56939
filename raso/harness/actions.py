"""What a harness accepts as an action in one state (its action space) and what one of its tasks needs.

A harness declares, for the state its environment's latest `info` describes, the valid actions: fixed choices
(exact text, or parts of it in any letter case) and patterns (fixed text around bounded free text); whether a
reply may start with a one-line `Thought:`; and, for harnesses whose actions carry a program, a fenced code
block before the action line. This is a declaration only: the LLM layer turns it into what a backend
constrains decoding with (raso.harness.action_grammar: llama.cpp's GBNF, a JSON schema).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace

# A reply's thought is one bounded line, so a model cannot spend its token budget before it reaches the action:
# 320 characters (~75 tokens) leave room for the action within a 128-token reply; a tighter bound cuts thoughts
# mid-sentence and forces an action the thought had not reached (docs/model-profiles.md).
THOUGHT_MAX_CHARS = 320


@dataclass(frozen=True)
class Text:
    """Fixed text; `caseless`: in any letter case (for environments that read actions case-insensitively and
    show them in another case than they list them)."""

    value: str
    caseless: bool = False


@dataclass(frozen=True)
class FreeText:
    """`min_chars`..`max_chars` characters of free text on one line, none of them in `excludes`."""

    max_chars: int
    excludes: str = ""
    min_chars: int = 1


Piece = Text | FreeText


@dataclass(frozen=True)
class Action:
    """One alternative of an action space: its pieces in order.

    `name`: compile it as a rule of its own with this name (readable grammars). `leaves_state`: whether taking
    it can lead out of the current state; a note to self (ALFWorld's `think: ...`) cannot, so ruling out the
    choices that looped keeps them when only such notes would be left."""

    pieces: tuple[Piece, ...]
    name: str | None = None
    leaves_state: bool = True

    @classmethod
    def exact(cls, text: str) -> "Action":
        return cls((Text(text),))

    @classmethod
    def of(cls, *pieces: str | Piece, name: str | None = None, leaves_state: bool = True) -> "Action":
        """An action from pieces; a plain string is exact text."""
        return cls(tuple(Text(p) if isinstance(p, str) else p for p in pieces), name=name, leaves_state=leaves_state)

    @property
    def text(self) -> str | None:
        """The action's text when it is a fixed choice (no free text), else None."""
        if any(isinstance(p, FreeText) for p in self.pieces):
            return None
        return "".join(p.value for p in self.pieces if isinstance(p, Text))


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block (```<language>) the reply carries before its action line; the actions in
    `optional_for` may also be taken without one."""

    language: str
    optional_for: tuple[str, ...] = ()


def _same_text(action: str) -> str:
    return action


@dataclass(frozen=True)
class ActionSpace:
    """The valid replies in one state: `[Thought: <one line>\\n][<code block>]Action: <one of actions>`.

    `key` says when two actions are the same for the environment (e.g. `str.lower` where it ignores letter
    case); it is how `without` compares. `key=None`: an action is more than the choice it starts with (it
    carries a program), so one taken before is never ruled out."""

    actions: tuple[Action, ...]
    thought: bool = True
    key: Callable[[str], str] | None = field(default=_same_text, compare=False)
    code_block: CodeBlock | None = None

    @classmethod
    def choices(cls, options: Iterable[str], *, thought: bool = True, key: Callable[[str], str] | None = _same_text,
                code_block: CodeBlock | None = None) -> "ActionSpace":
        """A space of fixed choices, each exact."""
        return cls(tuple(Action.exact(o) for o in options), thought=thought, key=key, code_block=code_block)

    def without(self, avoid: Collection[str]) -> "ActionSpace":
        """This space less the fixed choices in `avoid` (actions the agent took before in this very state and
        came back to it), unless that would leave no way out of the state: then nothing is ruled out."""
        if not avoid or self.key is None:
            return self
        key = self.key
        avoided = {key(a) for a in avoid}
        kept = tuple(a for a in self.actions if a.text is None or key(a.text) not in avoided)
        if not any(a.leaves_state for a in kept):
            return self
        return replace(self, actions=kept)


@dataclass(frozen=True)
class TaskNeeds:
    """What one task of a harness needs: the agent steps (environment actions) that can reach its end, and the
    reply tokens one turn takes. A quick schedule gives the agent these instead of its generic values (too few
    steps end most episodes before they can succeed; longer replies than needed cost time). None: the generic
    value suits."""

    agent_steps: int | None = None
    reply_tokens: int | None = None


__all__ = ["THOUGHT_MAX_CHARS", "Action", "ActionSpace", "CodeBlock", "FreeText", "Piece", "TaskNeeds", "Text"]
