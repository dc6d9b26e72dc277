"""What binds an MCP ``tools/call`` to the runtime: ``params._meta`` keys of our own namespace.

MCP's ``tools/call`` names only the tool and its arguments; the conversation and the idempotency
key travel in ``_meta`` under ``io.lineup/…``. A person's token (``service.mcp.oauth``) binds every
request to that person's own conversation (``person_conversation_id``): ``_meta`` may leave it out
or name that one, any other is refused; its tool call ids live in a namespace the server gives
them (``person_namespace``). A missing or malformed conversation is an invalid
request (JSON-RPC ``-32602``), as is a malformed tool call id: both follow the id rule of
``service.domain.ids``, as over REST. Without a tool call id the server
makes one (it is returned in the result's ``_meta``, so the caller can replay or trace the call).
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from service.domain.ids import ID_RULE, MAX_ID_LENGTH, is_valid_id
from service.use_cases import callers

MAX_ID = MAX_ID_LENGTH

CONVERSATION_ID = "io.lineup/conversation_id"
TOOL_CALL_ID = "io.lineup/tool_call_id"
#: A listed tool's own name (the manifest's, REST's ``tool``), in its ``_meta`` (``service.tool_names``).
TOOL_NAME = "io.lineup/tool"
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


def person_conversation_id(issuer: str, subject: str) -> str:
    """A person's conversation: ``person-`` and the unpadded base64url SHA-256 of the issuer, a
    line feed and the subject (``sub`` is unique only per issuer). Within the id alphabet, the same
    on every replica and release, and computable by a Host backend from the same two strings."""
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).digest()
    return "person-" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


#: The conversation a person's token binds this request to; None for the Agent's token (which
#: names any conversation in ``_meta``). Set per request by ``service.mcp.endpoint``'s middleware.
person_conversation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "person_conversation", default=None
)


#: When the person's token of this request stops being valid (``exp`` plus the leeway, epoch
#: seconds): a stream it opens ends then. None for the Agent's token.
person_ends_at: contextvars.ContextVar[float | None] = contextvars.ContextVar("person_ends_at", default=None)


def not_theirs() -> MCPError:
    return MCPError(
        INVALID_PARAMS,
        f"a person's token reaches only that person's conversation: leave _meta[{CONVERSATION_ID!r}] "
        "out, or name that one",
        data={"field": f"_meta.{CONVERSATION_ID}"},
    )


def _persons(meta: Mapping[str, Any], own: str) -> str:
    named = _id(meta, CONVERSATION_ID)
    if named not in (None, own):
        raise not_theirs()
    return own


#: The request header that names the conversation of the Agent's call, for clients that cannot
#: set ``params._meta`` (LangChain's MCP adapters); ``_meta`` wins, and both must agree.
CONVERSATION_HEADER = "Lineup-Conversation-Id"

#: The ``Lineup-Conversation-Id`` of the request being served (the Agent's token only); set per
#: request by ``service.mcp.endpoint``'s middleware.
header_conversation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "header_conversation", default=None
)


def _agents(meta: Mapping[str, Any]) -> str | None:
    """The conversation the Agent's request names: in ``_meta``, else in the header."""
    named = _id(meta, CONVERSATION_ID)
    header = header_conversation.get()
    if header is None:
        return named
    if not is_valid_id(header):
        raise MCPError(
            INVALID_PARAMS,
            f"the {CONVERSATION_HEADER} header must be a string of {ID_RULE}",
            data={"field": CONVERSATION_HEADER},
        )
    if named is not None and named != header:
        raise MCPError(
            INVALID_PARAMS,
            f"_meta[{CONVERSATION_ID!r}] and the {CONVERSATION_HEADER} header name different "
            "conversations: name one, or the same in both",
            data={"field": f"_meta.{CONVERSATION_ID}"},
        )
    return header


def bind(meta: Mapping[str, Any] | None) -> Binding:
    meta = meta or {}
    own = person_conversation.get()
    conversation_id = _agents(meta) if own is None else _persons(meta, own)
    if conversation_id is None:
        raise MCPError(
            INVALID_PARAMS,
            f"tools/call needs the conversation in params._meta[{CONVERSATION_ID!r}] (or the "
            f"{CONVERSATION_HEADER} header)",
            data={"field": f"_meta.{CONVERSATION_ID}"},
        )
    tool_call_id = _id(meta, TOOL_CALL_ID)
    if own is not None:
        return _persons_call(conversation_id, tool_call_id)
    if tool_call_id is None:
        return Binding(conversation_id, f"mcp-{uuid.uuid4()}", tool_call_id_made=True)
    return Binding(conversation_id, tool_call_id, tool_call_id_made=False)


#: Every person's tool call id starts ``p~<22 characters>~`` (``person_namespace``).
PERSON_PREFIX = "p~"


def person_namespace(issuer: str, subject: str, client_id: str) -> str:
    """Where a person's tool call ids live: ``p~``, the unpadded base64url of the first 16 bytes of
    SHA-256(issuer, subject and client id, each followed by a line feed), and ``~``. The server
    gives it: a person's id can never equal the Agent's (whose ids the Agent makes, never in this
    namespace), nor another person's or another client's of the same person, so the webhook's
    ``Idempotency-Key`` (the tool call id) is unique per result."""
    digest = hashlib.sha256(f"{issuer}\n{subject}\n{client_id}\n".encode()).digest()[:16]
    return PERSON_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode() + "~"


def _persons_call(conversation_id: str, tool_call_id: str | None) -> Binding:
    """A person's call: its id in the person's namespace (``person_namespace``); an id already in
    it — one the server answered with — is taken as it is, so a replay by it finds the call."""
    caller = callers.current.get()
    namespace = person_namespace(caller.issuer or "", caller.subject or "", caller.client_id or "")
    if tool_call_id is None:
        return Binding(conversation_id, f"{namespace}mcp-{uuid.uuid4()}", tool_call_id_made=True)
    if tool_call_id.startswith(namespace):
        return Binding(conversation_id, tool_call_id, tool_call_id_made=False)
    if len(namespace) + len(tool_call_id) > MAX_ID:
        raise MCPError(
            INVALID_PARAMS,
            f"_meta[{TOOL_CALL_ID!r}]: a person's tool call id is at most {MAX_ID - len(namespace)}"
            f" characters (the server puts it in the person's namespace, {namespace}…)",
            data={"field": f"_meta.{TOOL_CALL_ID}"},
        )
    return Binding(conversation_id, namespace + tool_call_id, tool_call_id_made=False)


def named_call_id(tool_call_id: str, field: str) -> str:
    """A tool call id a request names as an argument (``operation_status``'s ``tool_call_id``), under
    the id rule: the Agent's as it is; a person's in that person's namespace, as ``_meta``'s is — an
    id already in it taken as it is, so the id a call answered with names that call."""
    if not is_valid_id(tool_call_id):
        raise MCPError(INVALID_PARAMS, f"{field} must be a string of {ID_RULE}", data={"field": field})
    if person_conversation.get() is None:
        return tool_call_id
    caller = callers.current.get()
    namespace = person_namespace(caller.issuer or "", caller.subject or "", caller.client_id or "")
    if tool_call_id.startswith(namespace):
        return tool_call_id
    if len(namespace) + len(tool_call_id) > MAX_ID:
        raise MCPError(
            INVALID_PARAMS,
            f"{field}: a person's tool call id is at most {MAX_ID - len(namespace)} characters (the "
            f"server puts it in the person's namespace, {namespace}…)",
            data={"field": field},
        )
    return namespace + tool_call_id


def bound_conversation(meta: Mapping[str, Any] | None) -> str | None:
    """The conversation a task request names, if it names one (a task of another is unknown); for
    a person always theirs."""
    own = person_conversation.get()
    return _agents(meta or {}) if own is None else _persons(meta or {}, own)
