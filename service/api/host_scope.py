"""Which conversation a Host API request is about, so that a person's session reaches only its own.

Every ``/v1/host/*`` handler says where its conversation is (``opt={"conversation": …}``): in the
path (``"path"``), behind an instance id (``"instance"``) or an interaction's tool-call id
(``"interaction"``), or nowhere because only the Host backend may call it (``"backend"``). A
person's session is refused anything outside its conversations with a 404, as if it did not exist;
a handler that says nothing refuses sessions altogether (closed by default), and a test reads every
route from the app to hold each to a declaration.
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from litestar import Request

from service.domain.errors import NotFound, unauthorized
from service.use_cases import conversations
from service.use_cases.host_sessions import HostPrincipal
from service.web.state import runtime_of

Where = Literal["path", "instance", "interaction", "backend"]
KEY = "conversation"


def where(kind: Where) -> dict[str, Any]:
    """The ``opt`` of a Host API handler: where its conversation is."""
    return {KEY: kind}


async def enforce(request: Request[Any, Any, Any], principal: HostPrincipal) -> None:
    """Refuse a person's session a request about a conversation it does not reach."""
    if principal.conversation_ids is None:
        return
    kind = request.route_handler.opt.get(KEY)
    if kind == "backend":
        raise unauthorized()
    params = request.path_params
    conversation: str | None
    if kind == "path":
        conversation, what = str(params.get("conversation_id", "")), "conversation"
    elif kind == "instance":
        conversation, what = await _of_instance(request, str(params.get("instance_id", ""))), "instance"
    elif kind == "interaction":
        # Unique per conversation: the one named in ?conversation_id=, else the one the session
        # reaches, else whichever exists (refused).
        named = request.query_params.get("conversation_id")
        tool_call_id = str(params.get("tool_call_id", ""))
        if named is not None:
            found: str | None = named
        else:
            found = await _of_interaction(request, tool_call_id, principal.conversation_ids)
            if found is None:
                found = await _of_interaction(request, tool_call_id, None)
        conversation, what = found, "interaction"
    else:
        raise NotFound.of("resource")
    # Unknown ones pass: the handler answers them 404 itself, with the same body.
    if conversation is not None and not principal.reaches(conversation):
        raise NotFound.of(what)


async def _of_instance(request: Request[Any, Any, Any], value: str) -> str | None:
    try:
        instance_id = UUID(value)
    except ValueError:
        return None
    return await conversations.of_instance(runtime_of(request), instance_id)


async def _of_interaction(
    request: Request[Any, Any, Any], tool_call_id: str, reach: frozenset[str] | None
) -> str | None:
    if not tool_call_id or "\x00" in tool_call_id:
        return None
    return await conversations.of_interaction(runtime_of(request), tool_call_id, reach)
