"""What each ``python -m service ops …`` command does, on the CLI's one connection: the ops API's
reads (``service.use_cases.ops_reads``) and views, and the writes of ``service.db``; printed as text
(``service.cli.ops_text``) or, with ``--json``, as the ``/v1/ops`` objects."""

from __future__ import annotations

import argparse
import getpass
import socket
import sys
from collections.abc import Callable
from typing import Any, TextIO
from uuid import UUID

import psycopg
from psycopg.rows import DictRow

from service.cli.ops_text import (
    delivery_text,
    json_text,
    operations_table,
    outbox_block,
    outbox_table,
    requeued_text,
    screen,
    stats_text,
    trace_text,
    when,
)
from service.db import delivery as delivery_db
from service.db import ops_queries as ops_db
from service.db import recovery as recovery_db
from service.db import requeue as requeue_db
from service.use_cases import ops_reads
from service.use_cases.ops_views import delivery_view, outbox_row

Conn = psycopg.Connection[DictRow]
Command = Callable[[Conn, argparse.Namespace, TextIO], int]

MIN_EVENT_PREFIX = 4


def _operator() -> str:
    """Who paused, as ``delivery_endpoints.paused_by`` records it."""
    return f"cli:{getpass.getuser()}@{socket.gethostname()}"


def resolve_event(conn: Conn, value: str) -> UUID | str:
    """The event id that ``value`` names — in full, or by its first hex digits when they are
    unique — or the message saying why none is."""
    try:
        return UUID(value)
    except ValueError:
        pass
    digits = value.replace("-", "")
    unknown = f"no outbox row with event_id {value}"
    if not MIN_EVENT_PREFIX <= len(digits) < 32 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        return unknown
    found = ops_db.event_ids_with_prefix(conn, digits)
    if not found:
        return unknown
    if len(found) > 1:
        return f"event_id prefix {value} is ambiguous ({found[0]}, {found[1]}, …): give more digits"
    return found[0]


def fail(message: str) -> int:
    print(screen(f"error: {message}"), file=sys.stderr)
    return 1


def emit_json(data: Any, out: TextIO) -> int:
    print(json_text(data), file=out)
    return 0


def outbox_list(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    query = ops_reads.outbox_list(
        status=args.status,
        conversation_id=args.conversation,
        tool_call_prefix=args.tool_call,
        limit=args.limit,
        after=args.cursor,
    )
    data = ops_reads.read_on(conn, query)
    if args.json:
        return emit_json(data, out)
    print(screen(outbox_table(data, args.wide)), file=out)
    if data["next_cursor"]:
        print(f"more: --cursor {data['next_cursor']}", file=out)
    return 0


def outbox_show(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    event_id = resolve_event(conn, args.event_id)
    if isinstance(event_id, str):
        return fail(event_id)
    row = ops_reads.read_on(conn, ops_reads.outbox_show(event_id))
    if row is None:
        return fail(f"no outbox row with event_id {args.event_id}")
    if args.json:
        return emit_json(row, out)
    print(screen(outbox_block(row)), file=out)
    return 0


def outbox_requeue(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    if args.all_dead:
        found = requeue_db.requeue_all_dead(conn)
    else:
        event_id = resolve_event(conn, args.event_id)
        if isinstance(event_id, str):
            return fail(event_id)
        try:
            found = [requeue_db.requeue_dead(conn, event_id)]
        except requeue_db.NotRequeueableError as exc:
            return fail(str(exc))
    rows = [outbox_row(row) for row in found]
    if args.json:
        return emit_json({"requeued": rows}, out)
    print(screen(requeued_text(rows)), file=out)
    return 0


def outbox_recover(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    which = recovery_db.DeadFilter(
        since=args.since,
        until=args.until,
        conversation_id=args.conversation,
        tool=args.tool,
        last_error_prefix=args.last_error,
    )
    if which.since is not None and which.until is not None and which.since >= which.until:
        print("error: --since must be before --until", file=sys.stderr)
        return 2
    done = recovery_db.recover(conn, which, dry_run=args.dry_run)
    if args.json:
        return emit_json(done.answer(), out)
    if args.dry_run:
        print(f"{done.matched} dead row(s) match: nothing requeued (dry run)", file=out)
    else:
        print(f"{done.requeued} of {done.matched} matching dead row(s) requeued", file=out)
    return 0


def delivery_status(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    state = ops_reads.read_on(conn, ops_reads.delivery_state())
    retention = ops_reads.read_on(conn, ops_reads.retention())
    if args.json:
        return emit_json({"delivery": state, "retention": retention}, out)
    print(screen(delivery_text(state, retention)), file=out)
    return 0


def delivery_pause(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    state = delivery_view(delivery_db.pause(conn, _operator(), args.reason))
    if args.json:
        return emit_json(state, out)
    print(screen(f"delivery paused since {when(state['paused_at'])} by {state['paused_by']}"), file=out)
    return 0


def delivery_resume(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    state = delivery_view(delivery_db.resume(conn))
    if args.json:
        return emit_json(state, out)
    print(f"delivery running (circuit {state['circuit']})", file=out)
    return 0


def operations_list(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    query = ops_reads.operations_list(state=args.state, conversation_id=args.conversation, limit=args.limit)
    data = ops_reads.read_on(conn, query)
    if args.json:
        return emit_json(data, out)
    print(screen(operations_table(data, args.wide)), file=out)
    return 0


def show_stats(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    data = ops_reads.read_on(conn, ops_reads.stats())
    if args.json:
        return emit_json(data, out)
    delivery = ops_reads.read_on(conn, ops_reads.delivery_state())
    print(screen(stats_text(data, delivery)), file=out)
    return 0


def trace_tool_call(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    trace = ops_reads.read_on(conn, ops_reads.trace_tool_call(args.tool_call_id))
    if trace is None:
        # A list's shortened id ("start-4f1c…"): its beginning, when that names one recorded call.
        prefix = args.tool_call_id.removesuffix("…")
        found = ops_db.tool_call_ids_with_prefix(conn, prefix) if prefix else []
        if len(found) > 1:
            return fail(f"tool call {prefix!r}… is ambiguous ({found[0]}, {found[1]}, …): give more of it")
        if found:
            trace = ops_reads.read_on(conn, ops_reads.trace_tool_call(found[0]))
    if trace is None:
        return fail(
            f"nothing is recorded for tool call {args.tool_call_id!r} "
            "(answers 401, 404 and 422 are not recorded)"
        )
    if args.json:
        return emit_json(trace, out)
    print(screen(trace_text(trace)), file=out)
    return 0
