"""A validated Agent tool call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    tool_call_id: str
    conversation_id: str
    tool: str
    arguments: dict[str, Any]
