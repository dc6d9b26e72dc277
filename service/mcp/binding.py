"""What binds an MCP ``tools/call`` to the runtime: ``params._meta`` keys of our own namespace.

MCP's ``tools/call`` names only the tool and its arguments; the conversation and the idempotency
key travel in ``_meta`` under ``io.lineup/…``. A missing or malformed conversation is an invalid
request (JSON-RPC ``-32602``), as is a malformed tool call id: both follow the id rule of
``service.domain.ids``, as over REST. Without a tool call id the server
makes one (it is returned in the result's ``_meta``, so the caller can replay or trace the call).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from service.domain.ids import ID_RULE, is_valid_id

CONVERSATION_ID = "io.lineup/conversation_id"
TOOL_CALL_ID = "io.lineup/tool_call_id"
#: The HTTP status ``POST /v1/tool-calls`` answers for the same call (in the result's ``_meta``).
HTTP_STATUS = "io.lineup/http_status"


@dataclass(frozen=True, slots=True)
class Binding:
    conversation_id: str
    tool_call_id: str
    tool_call_id_made: bool  # the server made it: the caller sent none


def _id(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not is_valid_id(value):
        raise MCPError(
            INVALID_PARAMS,
            f"_meta[{key!r}] must be a string of {ID_RULE}",
            data={"field": f"_meta.{key}"},
        )
    return value


def bind(meta: Mapping[str, Any] | None) -> Binding:
    meta = meta or {}
    conversation_id = _id(meta, CONVERSATION_ID)
    if conversation_id is None:
        raise MCPError(
            INVALID_PARAMS,
            f"tools/call needs the conversation in params._meta[{CONVERSATION_ID!r}]",
            data={"field": f"_meta.{CONVERSATION_ID}"},
        )
    tool_call_id = _id(meta, TOOL_CALL_ID)
    if tool_call_id is None:
        return Binding(conversation_id, f"mcp-{uuid.uuid4()}", tool_call_id_made=True)
    return Binding(conversation_id, tool_call_id, tool_call_id_made=False)


def bound_conversation(meta: Mapping[str, Any] | None) -> str | None:
    """The conversation a task request names, if it names one (a task of another is unknown)."""
    return _id(meta or {}, CONVERSATION_ID)
