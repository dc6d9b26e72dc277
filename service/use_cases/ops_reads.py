"""What operators read — the outbox, the operations, the tool calls, a trace, the numbers, the
delivery state, retention, the console's overview — for the ops API and the CLI alike.

A ``Query`` is the statements read in one snapshot (``service.db.ops_queries.Lookup``) and the view
that formats their rows (``service.use_cases.ops_views``). The ops API reads one on the pool, and
``python -m service ops`` on its one connection (``service.use_cases.one_connection``), both with
``read``: both answer the same JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar, Unpack
from uuid import UUID

from service.db import console_queries
from service.db import delivery as delivery_db
from service.db import ops_queries as ops_db
from service.db.ops_queries import DEFAULT_LIMIT, Lookup, OutboxFilter, Rows
from service.use_cases import ops_views
from service.use_cases.ops_views import Json
from service.use_cases.unit_of_work import Works

T = TypeVar("T")


@dataclass(frozen=True)
class Query(Generic[T]):
    lookup: Lookup
    view: Callable[[Rows], T]


async def read(rt: Works, query: Query[T]) -> T:
    """The query's answer, read in one snapshot."""
    async with rt.unit_of_work(transaction=False) as work:
        rows = await ops_db.read(work.conn, query.lookup)
    return query.view(rows)


def outbox_list(**only: Unpack[OutboxFilter]) -> Query[Json]:
    """Outbox rows, newest first, a page of ``limit`` from the row after ``after`` on."""
    limit = only.get("limit", DEFAULT_LIMIT)
    return Query(ops_db.outbox_list(**only), lambda rows: ops_views.outbox_page(rows, limit))


def outbox_show(event_id: UUID) -> Query[Json | None]:
    return Query(ops_db.outbox_show(event_id), ops_views.outbox_detail)


def operations_list(
    *, state: str | None = None, conversation_id: str | None = None, limit: int = DEFAULT_LIMIT
) -> Query[Json]:
    lookup = ops_db.operations_list(state=state, conversation_id=conversation_id, limit=limit)
    return Query(lookup, ops_views.operation_list)


def tool_calls_list(
    statuses: Mapping[str, int],
    *,
    minutes: int = 60,
    tool: str | None = None,
    conversation_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Query[Json]:
    """The recorded calls, each with the status its face gives its outcome (``statuses``)."""
    lookup = ops_db.tool_calls_list(minutes=minutes, tool=tool, conversation_id=conversation_id, limit=limit)
    return Query(lookup, lambda rows: ops_views.tool_call_list(rows, minutes, statuses))


def trace_tool_call(
    tool_call_id: str,
    statuses: Mapping[str, int],
    conversation_id: str | None = None,
    trace_url_template: str | None = None,
) -> Query[Json | None]:
    """The trace of one tool call; AmbiguousToolCallId when ``conversation_id`` is None and the id
    was used in more than one conversation. ``trace_url_template``: ``TRACE_URL_TEMPLATE``."""
    return Query(
        ops_db.trace_tool_call(tool_call_id, conversation_id),
        lambda rows: ops_views.trace_view(tool_call_id, rows, statuses, trace_url_template),
    )


def stats() -> Query[Json]:
    return Query(ops_db.stats(), ops_views.stats_view)


def delivery_state() -> Query[Json]:
    return Query(delivery_db.state_lookup(), lambda rows: ops_views.delivery_view(rows["delivery"][0]))


def retention() -> Query[Json]:
    return Query(delivery_db.retention_lookup(), ops_views.retention_view)


def overview() -> Query[Json]:
    """The console's overview, but for the outbox's depth, which this process samples itself."""
    return Query(console_queries.overview(), ops_views.overview_view)
