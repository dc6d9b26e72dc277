"""The ops API (``Bearer $OPERATOR_TOKEN``), read-only: the same answers as ``python -m service ops``."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from litestar import Controller, Request, get
from litestar.params import FromPath, FromQuery, QueryParameter

from service.api.auth import require
from service.api.state import runtime_of
from service.api.tools import parse_uuid
from service.db import operator_queries as operator_db
from service.db.tables import OPERATION_STATES, OUTBOX_STATUSES
from service.domain.errors import ApiError, not_found

T = TypeVar("T")


def _invalid(path: str, message: str) -> ApiError:
    return ApiError(
        422,
        "invalid_request",
        f"invalid query parameter {path}",
        details=[{"path": path, "message": message}],
    )


def _choice(name: str, value: str | None, choices: tuple[str, ...]) -> str | None:
    if value is not None and value not in choices:
        raise _invalid(name, f"must be one of {', '.join(choices)}")
    return value


def _conversation(value: str | None) -> str | None:
    if value is not None and not (1 <= len(value) <= 255 and "\x00" not in value):
        raise _invalid("conversation_id", "1-255 characters, no U+0000")
    return value


def _limit(value: str | None) -> int:
    if value is None:
        return operator_db.DEFAULT_LIMIT
    try:
        limit = int(value)
    except ValueError:
        raise _invalid("limit", "must be a whole number 1..1000") from None
    if not 1 <= limit <= 1000:
        raise _invalid("limit", "must be a whole number 1..1000")
    return limit


async def _read(request: Request[Any, Any, Any], lookup: operator_db.Lookup[T]) -> T:
    async with runtime_of(request).pool.connection() as conn:
        return await operator_db.read_async(conn, lookup)


class OpsController(Controller):
    path = "/v1/ops"
    before_request = require("operator")

    @get("/outbox")
    async def outbox(
        self,
        request: Request[Any, Any, Any],
        status: FromQuery[str | None] = None,
        conversation_id: FromQuery[str | None] = None,
        limit: FromQuery[str | None] = None,
    ) -> dict[str, Any]:
        lookup = operator_db.outbox_list(
            status=_choice("status", status, OUTBOX_STATUSES),
            conversation_id=_conversation(conversation_id),
            limit=_limit(limit),
        )
        return await _read(request, lookup)

    @get("/outbox/{event_id:str}")
    async def outbox_row(self, event_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        row = await _read(request, operator_db.outbox_show(parse_uuid(event_id, "event")))
        if row is None:
            raise not_found("event")
        return row

    @get("/operations")
    async def operations(
        self,
        request: Request[Any, Any, Any],
        # "state" is a name Litestar reserves for the application state.
        state_filter: Annotated[str | None, QueryParameter(name="state")] = None,
        conversation_id: FromQuery[str | None] = None,
        limit: FromQuery[str | None] = None,
    ) -> dict[str, Any]:
        lookup = operator_db.operations_list(
            state=_choice("state", state_filter, OPERATION_STATES),
            conversation_id=_conversation(conversation_id),
            limit=_limit(limit),
        )
        return await _read(request, lookup)

    @get("/stats")
    async def stats(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await _read(request, operator_db.stats())

    # A path parameter: a tool_call_id may contain "/" (any 1-255 characters).
    @get("/tool-calls/{tool_call_id:path}")
    async def trace(self, tool_call_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        tool_call_id = tool_call_id.removeprefix("/")
        if not 1 <= len(tool_call_id) <= 255 or "\x00" in tool_call_id:
            raise not_found("tool_call")
        trace = await _read(request, operator_db.trace_tool_call(tool_call_id))
        if trace is None:
            raise not_found("tool_call")
        return trace
