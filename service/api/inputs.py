"""One validator per kind of input a path, query or header carries, with the contract's errors.

Bodies are checked by their models (``service.api.bodies``); everything else a request names goes
through these, so the same input gets the same rule and the same answer everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated
from uuid import UUID

from litestar.params import Parameter, QueryParameter

from service.domain.cursors import MAX_CURSOR_LENGTH, OutboxCursor
from service.domain.errors import InvalidRequest, NotFound
from service.domain.ids import ID_PATTERN, ID_RULE, MAX_ID_LENGTH, is_recorded_id, is_valid_id

MAX_LIMIT = 1000


def _invalid(path: str, message: str, summary: str) -> InvalidRequest:
    return InvalidRequest(summary, details=[{"path": path, "message": message}])


def conversation_id(value: str) -> str:
    """A conversation id in a path that reads: 422 when it cannot name one, even one recorded
    under the earlier id rule (``service.domain.ids``)."""
    if not is_recorded_id(value):
        raise _invalid(
            "conversation_id", "1-255 characters, no U+0000", "conversation_id must be 1-255 characters"
        )
    return value


def new_conversation_id(value: str) -> str:
    """A conversation id in a path that writes (and may open the conversation): the id rule, 422."""
    if not is_valid_id(value):
        raise _invalid("conversation_id", ID_RULE, f"conversation_id must be {ID_RULE}")
    return value


def optional_conversation_id(value: str | None) -> str | None:
    """A conversation id as a filter: 422 when it cannot be one."""
    return None if value is None else conversation_id(value)


def existing_id(value: str, what: str) -> str:
    """A tool-call id (or other caller-made id) naming something: an impossible one is unknown."""
    if not is_recorded_id(value):
        raise NotFound.of(what)
    return value


def uuid_naming(value: str, what: str) -> UUID:
    """A UUID in a path names something: anything else is a 404 ``unknown_<what>``."""
    try:
        return UUID(value)
    except ValueError:
        raise NotFound.of(what) from None


def optional_uuid(value: str | None, name: str) -> UUID | None:
    """A UUID in the query: anything else is a 422."""
    if value is None:
        return None
    try:
        return UUID(value)
    except ValueError:
        raise _invalid(name, "must be a UUID", f"{name} must be a UUID") from None


def bounded_integer(name: str, value: str | None, default: int, lowest: int, highest: int) -> int:
    """A whole number in the query: ASCII digits only (no sign, no spaces, no other scripts'
    digits), from ``lowest`` to ``highest``."""
    if value is None:
        return default
    if not (value.isascii() and value.isdigit()) or len(value) > 9 or not lowest <= int(value) <= highest:
        rule = f"an integer from {lowest} to {highest}"
        raise _invalid(name, rule, f"{name} must be {rule}")
    return int(value)


def limit(value: str | None, default: int) -> int:
    """``?limit=``: 1..1000."""
    return bounded_integer("limit", value, default, 1, MAX_LIMIT)


def choice(name: str, value: str | None, choices: Iterable[str]) -> str | None:
    """A filter that takes one of a fixed set of words."""
    allowed = list(choices)
    if value is not None and value not in allowed:
        raise _invalid(name, f"must be one of {', '.join(allowed)}", f"invalid query parameter {name}")
    return value


def event_sequence(value: str | None, name: str = "Last-Event-ID") -> int | None:
    """A stream position (``Last-Event-ID`` or ``?after=``): a non-negative integer."""
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise _invalid(
            name, "a non-negative integer", "Last-Event-ID (or after) must be a non-negative integer"
        )
    return int(value)


# How the document describes what these validators accept: the handlers receive strings and
# apply the validators above, so that every refusal has the contract's body. For an optional
# parameter the schema replaces Litestar's ``string | null``.
def documented_as(**schema: object) -> dict[str, object]:
    return {"oneOf": None, **schema}


UuidPath = Annotated[str, Parameter(schema_extra={"format": "uuid"})]
IdPath = Annotated[str, Parameter(schema_extra={"minLength": 1, "maxLength": MAX_ID_LENGTH})]
#: A path that may open a conversation: the id rule.
NewIdPath = Annotated[
    str, Parameter(schema_extra={"minLength": 1, "maxLength": MAX_ID_LENGTH, "pattern": ID_PATTERN})
]
LimitQuery = Annotated[
    str | None,
    QueryParameter(name="limit", schema_extra=documented_as(type="integer", minimum=1, maximum=MAX_LIMIT)),
]
UuidQuery = Annotated[str | None, Parameter(schema_extra=documented_as(type="string", format="uuid"))]
ConversationQuery = Annotated[
    str | None,
    QueryParameter(
        name="conversation_id",
        schema_extra=documented_as(type="string", minLength=1, maxLength=MAX_ID_LENGTH),
    ),
]
SEQUENCE = documented_as(type="string", pattern="^[0-9]+$")


def optional_id_prefix(name: str, value: str | None) -> str | None:
    """The beginning of a caller-made id, as a filter (taken literally): 1-255 characters."""
    if value is not None and not is_recorded_id(value):
        raise _invalid(name, "1-255 characters, no U+0000", f"{name} must be 1-255 characters")
    return value


def outbox_cursor(value: str | None) -> OutboxCursor | None:
    """``?cursor=``: a ``next_cursor`` an outbox list answered, unchanged."""
    if value is None:
        return None
    cursor = OutboxCursor.decode(value)
    if cursor is None:
        raise _invalid("cursor", "a next_cursor of an earlier page", "cursor is not one this service made")
    return cursor


IdPrefixQuery = Annotated[
    str | None,
    QueryParameter(
        name="tool_call_id_prefix",
        schema_extra=documented_as(type="string", minLength=1, maxLength=MAX_ID_LENGTH),
    ),
]
CursorQuery = Annotated[
    str | None,
    QueryParameter(
        name="cursor", schema_extra=documented_as(type="string", minLength=1, maxLength=MAX_CURSOR_LENGTH)
    ),
]
