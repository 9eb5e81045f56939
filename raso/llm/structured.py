"""Structured output helpers: schema prompts, tolerant JSON extraction, validation."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from raso.prompts import DEFAULT_PROMPTS, PromptLibrary

T = TypeVar("T", bound=BaseModel)

INSTRUCTIONS_TEMPLATE = "structured_instructions.md"
REPAIR_TEMPLATE = "structured_repair.md"
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a model is shown and constrained by, without pydantic's `title` annotations: they
    constrain nothing, and a small model may write a schema's title as the value of a field."""
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


def bound_strings(schema: dict[str, Any], field_chars: Mapping[str, int]) -> dict[str, Any]:
    """A copy of `schema` where each string property named in `field_chars` (at any depth) gets that `maxLength`
    (a tighter one already there is kept). Sent to a grammar-constrained model, the bound makes the model close
    the string in time, so the reply is a complete object within its token cap instead of a loop that is cut off;
    the pydantic validation of the reply is unchanged."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {key: walk(value) for key, value in node.items()}
        properties = out.get("properties")
        if isinstance(properties, dict):
            for name, prop in properties.items():
                if name in field_chars and isinstance(prop, dict) and prop.get("type") == "string":
                    prop["maxLength"] = min(int(prop.get("maxLength", field_chars[name])), field_chars[name])
        return out

    return walk(schema)


def _shown_schema(model: type[BaseModel], json_schema: dict[str, Any] | None) -> str:
    return json.dumps(json_schema if json_schema is not None else schema_of(model), indent=1)


def schema_instructions(model: type[BaseModel], *, prompts: PromptLibrary | None = None,
                        json_schema: dict[str, Any] | None = None) -> str:
    """The instructions naming the schema (`json_schema`: the one to show instead of the model's own)."""
    return (prompts or DEFAULT_PROMPTS).render(INSTRUCTIONS_TEMPLATE, schema=_shown_schema(model, json_schema))


def repair_prompt(model: type[BaseModel], error: str, *, prompts: PromptLibrary | None = None,
                  json_schema: dict[str, Any] | None = None) -> str:
    return (prompts or DEFAULT_PROMPTS).render(REPAIR_TEMPLATE, schema=_shown_schema(model, json_schema),
                                               error=error)


def with_instructions(
    messages: list[dict[str, Any]], model: type[BaseModel], *, prompts: PromptLibrary | None = None,
    json_schema: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Append the schema instructions to the last user message (or add one). `prompts` None = the defaults."""
    instructions = schema_instructions(model, prompts=prompts, json_schema=json_schema)
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
