"""The contract between the loopback model endpoint and its wire formats (OpenAI chat, Anthropic Messages, OpenAI
Responses). A format is pure translation: no sockets, no gateway; the endpoint does the I/O and the accounting."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, Field


class ChatRequest(BaseModel):
    """One model call in OpenAI chat terms: what the gateway is asked (`messages` as litellm takes them)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None  # OpenAI "function" tools
    tool_choice: Any = None
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    stream: bool = False
    model: str = ""  # the model name the agent asked for (informational: the endpoint's role decides the model)


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it


class ChatReply(BaseModel):
    """The gateway's answer in neutral terms."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str = "stop"  # "stop" | "length" | "tool_calls"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


class WireFormat(Protocol):
    """One agent-facing API. `paths` are the POST paths it serves (e.g. "/v1/messages")."""

    name: ClassVar[str]
    paths: ClassVar[tuple[str, ...]]

    def to_chat(self, body: dict[str, Any]) -> ChatRequest:
        """The request body as a chat request; raises ValueError with a clear message for a malformed body."""

    def from_chat(self, reply: ChatReply, request: ChatRequest) -> dict[str, Any]:
        """The non-streaming response body."""

    def stream(self, reply: ChatReply, request: ChatRequest) -> Iterator[bytes]:
        """The response as server-sent events (the whole reply is known: it may go in one or a few events)."""

    def error(self, status: int, message: str) -> dict[str, Any]:
        """An error body in this format's shape."""


__all__ = ["ChatReply", "ChatRequest", "ToolCall", "WireFormat"]
