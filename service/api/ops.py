"""The ops API (``Bearer $OPERATOR_TOKEN``), read-only: the same answers as ``python -m service ops``."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from litestar import Controller, Request, get
from litestar.params import FromPath, FromQuery, QueryParameter

from service.api import inputs
from service.api.auth import require
from service.api.state import runtime_of
from service.db import operator_queries as operator_db
from service.db.tables import OPERATION_STATES, OUTBOX_STATUSES
from service.domain.errors import not_found

T = TypeVar("T")


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
            status=inputs.choice("status", status, OUTBOX_STATUSES),
            conversation_id=inputs.optional_conversation_id(conversation_id),
            limit=inputs.limit(limit, operator_db.DEFAULT_LIMIT),
        )
        return await _read(request, lookup)

    @get("/outbox/{event_id:str}")
    async def outbox_row(self, event_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        row = await _read(request, operator_db.outbox_show(inputs.uuid_naming(event_id, "event")))
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
            state=inputs.choice("state", state_filter, OPERATION_STATES),
            conversation_id=inputs.optional_conversation_id(conversation_id),
            limit=inputs.limit(limit, operator_db.DEFAULT_LIMIT),
        )
        return await _read(request, lookup)

    @get("/stats")
    async def stats(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await _read(request, operator_db.stats())

    # A path parameter: a tool_call_id may contain "/" (any 1-255 characters).
    @get("/tool-calls/{tool_call_id:path}")
    async def trace(self, tool_call_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        tool_call_id = inputs.existing_id(tool_call_id.removeprefix("/"), "tool_call")
        trace = await _read(request, operator_db.trace_tool_call(tool_call_id))
        if trace is None:
            raise not_found("tool_call")
        return trace
