"""The ops API (``Bearer $OPERATOR_TOKEN``, or the operator console's cookie): the same answers as
``python -m service ops``, the console's overview, and the writes: requeue a dead row, recover dead
rows by filter, pause and resume delivery."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar, cast

from litestar import Controller, Request, get, post
from litestar.params import JSONBody, QueryParameter

from service.api import inputs
from service.api.answers import refusals
from service.api.auth import OPS_SECURITY, require_ops
from service.api.bodies import PauseBody, RecoverBody
from service.api.inputs import (
    ConversationQuery,
    CursorQuery,
    IdPath,
    IdPrefixQuery,
    LimitQuery,
    UuidPath,
    documented_as,
)
from service.api.ops_answers import (
    DeliveryState,
    OperationList,
    OutboxList,
    OutboxRow,
    OutboxRowDetail,
    Overview,
    Recovered,
    Retention,
    Stats,
    ToolCallList,
    ToolCallTrace,
)
from service.db.ops_queries import DEFAULT_LIMIT
from service.db.recovery import DeadFilter
from service.db.tables import OPERATION_STATES, OUTBOX_STATUSES
from service.domain.errors import not_found
from service.http import bearer_token, outcome_statuses
from service.outbox_history import OutboxHistory
from service.use_cases import delivery_control, ops_reads
from service.use_cases.outbox_requeue import recover_dead, requeue_dead
from service.web.state import runtime_of

T = TypeVar("T")
QUERY_ERRORS = {422: ("invalid_request",)}
# Documented as the enums and ids they must be; received as strings so that every refusal is the
# contract's 422 (service.api.inputs).
StatusQuery = Annotated[
    str | None,
    QueryParameter(name="status", schema_extra=documented_as(type="string", enum=list(OUTBOX_STATUSES))),
]
MinutesQuery = Annotated[
    str | None,
    QueryParameter(name="minutes", schema_extra=documented_as(type="integer", minimum=1, maximum=1440)),
]
ToolQuery = Annotated[str | None, QueryParameter(name="tool", schema_extra=documented_as(type="string"))]
StateQuery = Annotated[
    str | None,
    QueryParameter(name="state", schema_extra=documented_as(type="string", enum=list(OPERATION_STATES))),
]


async def _read(request: Request[Any, Any, Any], query: ops_reads.Query[T]) -> T:
    return await ops_reads.read(runtime_of(request), query)


def _operator(request: Request[Any, Any, Any]) -> str:
    """Who made a write, as far as the credential tells: the API's token or the console."""
    return "ops API" if bearer_token(request) else "console"


class OpsController(Controller):
    path = "/v1/ops"
    tags = ["ops API"]
    security = OPS_SECURITY
    before_request = require_ops

    @get(
        "/outbox",
        summary="Outbox rows, newest first, a page at a time",
        description="Filters: status, conversation_id, and tool_call_id_prefix (taken literally). "
        "An answer with a next_cursor has more rows: pass it as cursor, with the same filters.",
        response_description="The rows",
        responses=refusals(QUERY_ERRORS),
    )
    async def outbox(
        self,
        request: Request[Any, Any, Any],
        status: StatusQuery = None,
        conversation_id: ConversationQuery = None,
        tool_call_id_prefix: IdPrefixQuery = None,
        limit: LimitQuery = None,
        cursor: CursorQuery = None,
    ) -> OutboxList:
        query = ops_reads.outbox_list(
            status=inputs.choice("status", status, OUTBOX_STATUSES),
            conversation_id=inputs.optional_conversation_id(conversation_id),
            tool_call_prefix=inputs.optional_id_prefix("tool_call_id_prefix", tool_call_id_prefix),
            limit=inputs.limit(limit, DEFAULT_LIMIT),
            after=inputs.outbox_cursor(cursor),
        )
        return cast(OutboxList, await _read(request, query))

    @post(
        "/outbox/{event_id:str}/requeue",
        status_code=200,
        summary="Put a dead outbox row back in the queue (attempts 0, due now, the same event_id)",
        description="The rule of ops outbox requeue: dead rows only. The relays are woken at once.",
        response_description="The row, now pending",
        responses=refusals({404: ("unknown_event",), 409: ("not_dead",)}, path=True),
    )
    async def requeue(self, event_id: UuidPath, request: Request[Any, Any, Any]) -> OutboxRow:
        row = await requeue_dead(runtime_of(request), inputs.uuid_naming(event_id, "event"))
        return cast(OutboxRow, row)

    @post(
        "/outbox/recover",
        status_code=200,
        summary="Put dead outbox rows back in the queue by filter, or count them (dry_run)",
        description="Dead rows only, each by the single requeue's rule (the same event_id, attempts "
        "0, due now), in batches of 1,000 in each conversation's order; the relays are woken after "
        "each batch. since/until bound created_at (since included, until not).",
        response_description="How many rows matched, and how many were requeued",
        responses=refusals(body=True),
    )
    async def recover(self, data: JSONBody[RecoverBody], request: Request[Any, Any, Any]) -> Recovered:
        which = DeadFilter(
            since=data.since,
            until=data.until,
            conversation_id=data.conversation_id,
            tool=data.tool,
            last_error_prefix=data.last_error_prefix,
        )
        return cast(Recovered, await recover_dead(runtime_of(request), which, dry_run=data.dry_run))

    @get(
        "/delivery",
        summary="Whether delivery is paused, and the state of the endpoint's circuit",
        response_description="The delivery state",
        responses=refusals(),
    )
    async def delivery(self, request: Request[Any, Any, Any]) -> DeliveryState:
        return cast(DeliveryState, await delivery_control.delivery_state(runtime_of(request)))

    @post(
        "/delivery/pause",
        status_code=200,
        summary="Pause delivery: every relay stops sending within a second; held rows spend no attempts",
        description="Pausing a paused endpoint keeps when and by whom; a reason given replaces the old one.",
        response_description="The delivery state",
        responses=refusals(body=True),
    )
    async def pause(self, data: JSONBody[PauseBody], request: Request[Any, Any, Any]) -> DeliveryState:
        state = await delivery_control.pause(runtime_of(request), by=_operator(request), reason=data.reason)
        return cast(DeliveryState, state)

    @post(
        "/delivery/resume",
        status_code=200,
        summary="Resume delivery: the relays are woken and the held rows go at once",
        response_description="The delivery state",
        responses=refusals(),
    )
    async def resume(self, request: Request[Any, Any, Any]) -> DeliveryState:
        state = await delivery_control.resume(runtime_of(request), by=_operator(request))
        return cast(DeliveryState, state)

    @get(
        "/retention",
        summary="What retention keeps, as the relays report it, and the oldest rows it will remove",
        response_description="The retention settings and the oldest rows",
        responses=refusals(),
    )
    async def retention(self, request: Request[Any, Any, Any]) -> Retention:
        return cast(Retention, await _read(request, ops_reads.retention()))

    @get(
        "/overview",
        summary="The console's overview: the stats, the last hour by minute, the outbox's depth, "
        "the delivery state and retention",
        description="depth: the outbox as this process sampled it every 15 s over the last hour.",
        response_description="The numbers",
        responses=refusals(),
    )
    async def overview(self, request: Request[Any, Any, Any]) -> Overview:
        found = await _read(request, ops_reads.overview())
        history: OutboxHistory = request.app.state.outbox_history
        return cast(Overview, {**found, "depth": history.samples()})

    @get(
        "/outbox/{event_id:str}",
        summary="One outbox row with its payload and delivery attempts",
        response_description="The row",
        responses=refusals({404: ("unknown_event",)}, path=True),
    )
    async def outbox_row(self, event_id: UuidPath, request: Request[Any, Any, Any]) -> OutboxRowDetail:
        row = await _read(request, ops_reads.outbox_show(inputs.uuid_naming(event_id, "event")))
        if row is None:
            raise not_found("event")
        return cast(OutboxRowDetail, row)

    @get(
        "/operations",
        summary="Operations, newest first",
        response_description="The operations",
        responses=refusals(QUERY_ERRORS),
    )
    async def operations(
        self,
        request: Request[Any, Any, Any],
        # "state" is a name Litestar reserves for the application state.
        state_filter: StateQuery = None,
        conversation_id: ConversationQuery = None,
        limit: LimitQuery = None,
    ) -> OperationList:
        query = ops_reads.operations_list(
            state=inputs.choice("state", state_filter, OPERATION_STATES),
            conversation_id=inputs.optional_conversation_id(conversation_id),
            limit=inputs.limit(limit, DEFAULT_LIMIT),
        )
        return cast(OperationList, await _read(request, query))

    @get(
        "/stats",
        summary="Outbox, operations, deadline lateness and delivery attempts in numbers",
        response_description="The numbers",
        responses=refusals(),
    )
    async def stats(self, request: Request[Any, Any, Any]) -> Stats:
        return cast(Stats, await _read(request, ops_reads.stats()))

    @get(
        "/tool-calls",
        summary="The tool calls answered in the last minutes, newest first",
        description="Every recorded answer, those that start nothing (direct tools' answers, refusals) "
        "included; minutes: 1..1440 (60).",
        response_description="The calls",
        responses=refusals(QUERY_ERRORS),
    )
    async def tool_calls(
        self,
        request: Request[Any, Any, Any],
        minutes: MinutesQuery = None,
        tool: ToolQuery = None,
        conversation_id: ConversationQuery = None,
        limit: LimitQuery = None,
    ) -> ToolCallList:
        registry = runtime_of(request).registry
        query = ops_reads.tool_calls_list(
            outcome_statuses(registry.kinds),
            minutes=inputs.bounded_integer("minutes", minutes, 60, 1, 1440),
            tool=inputs.choice("tool", tool, sorted(registry.tools)),
            conversation_id=inputs.optional_conversation_id(conversation_id),
            limit=inputs.limit(limit, DEFAULT_LIMIT),
        )
        return cast(ToolCallList, await _read(request, query))

    # A path parameter: a tool_call_id recorded under the earlier id rule may contain "/".
    @get(
        "/tool-calls/{tool_call_id:path}",
        summary="What happened to one tool call",
        response_description="Its answer, operations, outbox rows and delivery attempts",
        description="A tool_call_id is unique per conversation: conversation_id names the one; without "
        "it, an id used in more than one conversation is refused 409 ambiguous_tool_call_id.",
        responses=refusals(
            {**QUERY_ERRORS, 404: ("unknown_tool_call",), 409: ("ambiguous_tool_call_id",)}, path=True
        ),
    )
    async def trace(
        self, tool_call_id: IdPath, request: Request[Any, Any, Any], conversation_id: ConversationQuery = None
    ) -> ToolCallTrace:
        tool_call_id = inputs.existing_id(tool_call_id.removeprefix("/"), "tool_call")
        conversation = inputs.optional_conversation_id(conversation_id)
        rt = runtime_of(request)
        statuses = outcome_statuses(rt.registry.kinds)
        template = rt.settings.trace_url_template
        query = ops_reads.trace_tool_call(tool_call_id, statuses, conversation, template)
        trace = await _read(request, query)
        if trace is None:
            raise not_found("tool_call")
        return cast(ToolCallTrace, trace)
