"""Ids callers name: conversation and tool-call ids are 1-255 characters, never U+0000."""

from __future__ import annotations

from typing import TypeGuard

MAX_ID_LENGTH = 255


def is_valid_id(value: object) -> TypeGuard[str]:
    """A conversation_id or tool_call_id the runtime can hold (Postgres text cannot hold U+0000)."""
    return isinstance(value, str) and 1 <= len(value) <= MAX_ID_LENGTH and "\x00" not in value
