"""Who makes a tool call, and the allowance the call spends.

The Agent (its token) is trusted: its calls spend nothing unless ``AGENT_TOOL_CALL_LIMIT`` sets a
budget per conversation. A person (an OAuth access token on ``/mcp``: issuer, subject, client) is
the least trusted caller: each new call of theirs spends one ``tool_call`` of
``WRITE_LIMIT_TOOL_CALLS`` per ``WRITE_LIMIT_WINDOW_SECONDS``, against their conversation's
allowance and their own, in the call's own statement (``limited_decide``,
``service/db/sql/45_limits.sql``), with the Host API's 429 ``too_many_requests`` and
``Retry-After`` past it. The face that authenticated the request says who calls, for the request's
duration (``current``); the use case reads it.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from service.settings import Settings

#: The decision that spends an allowance, then runs the Tool's own (``45_limits.sql``).
LIMITED_DECIDE = "limited_decide"
#: What the database raises past an allowance (its DETAIL: the seconds to the window's end).
LIMITED = "tool_call_limited"


@dataclass(frozen=True, slots=True)
class Caller:
    """``kind`` is ``agent`` or ``person``; a person has the issuer, subject and client id of their
    token, and the conversation it binds them to."""

    kind: str
    issuer: str | None = None
    subject: str | None = None
    client_id: str | None = None
    conversation_id: str | None = None

    @property
    def is_person(self) -> bool:
        return self.kind == "person"

    def recorded(self) -> dict[str, Any]:
        """The caller as ``tool_calls.caller`` records it."""
        if not self.is_person:
            return {"kind": "agent"}
        return {"kind": "person", "issuer": self.issuer, "subject": self.subject, "client_id": self.client_id}


AGENT = Caller("agent")

#: Who makes the tool calls of this request: the Agent unless the face bound a person to it.
current: contextvars.ContextVar[Caller] = contextvars.ContextVar("caller", default=AGENT)


def person(issuer: str, subject: str, client_id: str, conversation_id: str) -> Caller:
    return Caller("person", issuer, subject, client_id, conversation_id)


def allowance(settings: Settings, caller: Caller, conversation_id: str) -> dict[str, Any] | None:
    """What a call of ``caller`` in ``conversation_id`` spends: its principals (the conversation
    first, then the person), the window and the calls per window; None when it spends nothing."""
    if caller.is_person:
        limit = settings.write_limit_tool_calls
        principals = [f"conversation:{conversation_id}", f"person:{caller.conversation_id}"]
    elif settings.agent_tool_call_limit:
        limit = settings.agent_tool_call_limit
        principals = [f"agent:{conversation_id}"]
    else:
        return None
    return {"principals": principals, "window": settings.write_limit_window_seconds, "max": limit}
