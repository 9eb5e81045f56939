"""Structured output helpers: schema prompts, tolerant JSON extraction, validation."""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from raso.prompts import DEFAULT_PROMPTS, PromptLibrary

T = TypeVar("T", bound=BaseModel)

INSTRUCTIONS_TEMPLATE = "structured_instructions.md"
REPAIR_TEMPLATE = "structured_repair.md"
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a model is shown and constrained by, without pydantic's `title` annotations: they
    constrain nothing, and the embedded 0.5B model wrote the schema's title ("AdaptationOutput") as the value
    of every lesson it was asked for."""
    return _without_titles(model.model_json_schema())


_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "contains")


def _without_titles(node: Any) -> Any:
    """A copy of the schema `node` with every schema's string `title` dropped (a property named "title" stays)."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _without_titles(sub) for name, sub in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_without_titles(sub) for sub in out[key]]
    for key in _SUBSCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = _without_titles(out[key])
    return out


def schema_instructions(model: type[BaseModel], *, prompts: PromptLibrary | None = None) -> str:
    return (prompts or DEFAULT_PROMPTS).render(INSTRUCTIONS_TEMPLATE, schema=json.dumps(schema_of(model), indent=1))


def repair_prompt(model: type[BaseModel], error: str, *, prompts: PromptLibrary | None = None) -> str:
    return (prompts or DEFAULT_PROMPTS).render(REPAIR_TEMPLATE, schema=json.dumps(schema_of(model), indent=1),
                                               error=error)


def with_instructions(
    messages: list[dict[str, Any]], model: type[BaseModel], *, prompts: PromptLibrary | None = None
) -> list[dict[str, Any]]:
    """Append the schema instructions to the last user message (or add one). `prompts` None = the defaults."""
    instructions = schema_instructions(model, prompts=prompts)
    out = [dict(m) for m in messages]
    for msg in reversed(out):
        if msg.get("role") == "user" and isinstance(msg.get("content"), str):
            msg["content"] = f"{msg['content']}\n\n{instructions}"
            return out
    out.append({"role": "user", "content": instructions})
    return out


def _json_candidates(text: str) -> list[Any]:
    """Parsed JSON values found in `text`: whole text, fenced blocks, then the first object/array in prose."""
    # strict=False: raw newlines and tabs inside strings are accepted. llama.cpp's JSON grammar lets a model
    # write them, and the embedded model's skill drafts were otherwise complete, valid objects.
    found: list[Any] = []
    stripped = text.strip()
    try:
        found.append(json.loads(stripped, strict=False))
    except ValueError:
        pass
    for block in _FENCE.findall(text):
        try:
            found.append(json.loads(block.strip(), strict=False))
        except ValueError:
            pass
    decoder = json.JSONDecoder(strict=False)
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text, i)
            except ValueError:
                continue
            found.append(value)
            if isinstance(value, dict):
                break
    return found


def parse_structured(text: str, model: type[T]) -> T:
    """Validate the first JSON value in `text` that fits `model`.

    Raises ValueError with a readable message (the validation error of the best candidate, or
    "no JSON object found") when nothing validates.
    """
    candidates = _json_candidates(text)
    if not candidates:
        raise ValueError("no JSON object found in the reply")
    first_error: str | None = None
    for value in candidates:
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            if first_error is None:
                first_error = str(exc)
    raise ValueError(first_error or "no JSON object found in the reply")
