"""``python -m service ops …``: the operator CLI over the outbox, the operations and the deliveries.

Tables for people by default — lists fit a 100-column terminal, with ids shortened to their first
8 hex digits, which ``show`` and ``requeue`` accept as git accepts a short hash (and ``trace`` a
tool call id's unique beginning, as lists cut it); ``--wide`` prints
every column in full and ``--json`` (the same objects as ``/v1/ops``) is for machines. Exit 0 on
success, 1 when the thing asked for is unknown, ambiguous or refused, 2 for bad usage or settings.
"""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TextIO
from uuid import UUID

import psycopg
from psycopg.rows import DictRow, dict_row

from service.cli.ops_text import (
    cell,
    delivery_text,
    flat,
    outbox_block,
    pairs,
    short_when,
    table,
    trace_text,
    when,
)
from service.db import delivery as delivery_db
from service.db import ops_queries as ops_db
from service.db import recovery as recovery_db
from service.db import requeue as requeue_db
from service.db.tables import OPERATION_STATES, OUTBOX_STATUSES
from service.domain.cursors import MAX_CURSOR_LENGTH, OutboxCursor
from service.settings import load_settings

Conn = psycopg.Connection[DictRow]
Json = dict[str, Any]
Command = Callable[[Conn, argparse.Namespace, TextIO], int]

DESCRIPTION = (
    "The operator CLI: the outbox, the operations, delivery stats and control, and what happened to "
    "a tool call."
)
#: Lists fit a terminal this wide unless ``--wide`` is given.
LIST_WIDTH = 100
SHORT_ID = 8
MIN_EVENT_PREFIX = 4


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (the words after ``ops``) and run the command; raises ``SettingsError``."""
    parser = argparse.ArgumentParser(prog="python -m service ops", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``ops`` command tree, on a parser of its own or on ``python -m service``'s subparser."""
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    list_output = argparse.ArgumentParser(add_help=False)
    shape = list_output.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print JSON (the /v1/ops objects) for scripts")
    shape.add_argument(
        "--wide", action="store_true", help=f"every column, ids and times in full (default: fit {LIST_WIDTH})"
    )
    areas = parser.add_subparsers(
        dest="ops_area", required=True, metavar="{outbox,delivery,operations,stats,trace}"
    )

    outbox = areas.add_parser("outbox", help="the results waiting for, or done with, delivery")
    actions = outbox.add_subparsers(dest="ops_action", required=True)
    listing = actions.add_parser("list", parents=[list_output], help="outbox rows, newest first")
    listing.add_argument("--status", choices=OUTBOX_STATUSES)
    listing.add_argument("--conversation", metavar="CONVERSATION_ID")
    listing.add_argument(
        "--tool-call", metavar="PREFIX", type=_text, help="only tool calls whose id begins with PREFIX"
    )
    listing.add_argument("--limit", type=_limit, default=ops_db.DEFAULT_LIMIT, help="1..1000 (default 100)")
    listing.add_argument(
        "--cursor", type=_cursor, help="the next page: the cursor the previous page printed (same filters)"
    )
    listing.set_defaults(ops_command=outbox_list)
    event_help = f"the row's event_id (the webhook-id), or its first {MIN_EVENT_PREFIX}+ hex digits"
    show = actions.add_parser("show", parents=[output], help="one row, its payload and every attempt")
    show.add_argument("event_id", metavar="EVENT_ID", help=event_help)
    show.set_defaults(ops_command=outbox_show)
    requeue = actions.add_parser(
        "requeue", parents=[output], help="dead rows back to pending: attempts 0, due now, same event_id"
    )
    target = requeue.add_mutually_exclusive_group(required=True)
    target.add_argument("event_id", metavar="EVENT_ID", nargs="?", help=f"one dead row: {event_help}")
    target.add_argument("--all-dead", action="store_true", help="every dead row")
    requeue.set_defaults(ops_command=outbox_requeue)
    recover = actions.add_parser(
        "recover",
        parents=[output],
        help="dead rows back to pending by filter, in batches (the requeue's rule for each)",
        description="Requeue the dead rows that match every filter given (none: every dead row), "
        "each as `requeue` would, in batches of 1,000 in each conversation's order.",
    )
    recover.add_argument("--since", type=_instant, metavar="TIME", help="created at or after (RFC 3339)")
    recover.add_argument("--until", type=_instant, metavar="TIME", help="created before (RFC 3339)")
    recover.add_argument("--conversation", metavar="CONVERSATION_ID", type=_text)
    recover.add_argument("--tool", type=_text, help="e.g. pomodoro.start")
    recover.add_argument(
        "--last-error", metavar="PREFIX", type=_text, help="only rows whose last error begins with PREFIX"
    )
    recover.add_argument("--dry-run", action="store_true", help="count the rows, change nothing")
    recover.set_defaults(ops_command=outbox_recover)

    delivery = areas.add_parser("delivery", help="pause and resume delivery; the endpoint's circuit")
    delivery_actions = delivery.add_subparsers(dest="ops_action", required=True)
    status = delivery_actions.add_parser(
        "status", parents=[output], help="paused or not, the circuit, retention, the oldest rows"
    )
    status.set_defaults(ops_command=delivery_status)
    pause = delivery_actions.add_parser(
        "pause", parents=[output], help="every relay stops sending within a second; rows wait for free"
    )
    pause.add_argument("--reason", type=_reason, help="shown wherever the pause is (up to 500 characters)")
    pause.set_defaults(ops_command=delivery_pause)
    resume = delivery_actions.add_parser("resume", parents=[output], help="the relays send again at once")
    resume.set_defaults(ops_command=delivery_resume)

    operations = areas.add_parser("operations", help="focus periods and how they ended")
    op_actions = operations.add_subparsers(dest="ops_action", required=True)
    op_listing = op_actions.add_parser("list", parents=[list_output], help="operations, newest first")
    op_listing.add_argument("--state", choices=OPERATION_STATES)
    op_listing.add_argument("--conversation", metavar="CONVERSATION_ID")
    op_listing.add_argument(
        "--limit", type=_limit, default=ops_db.DEFAULT_LIMIT, help="1..1000 (default 100)"
    )
    op_listing.set_defaults(ops_command=operations_list)

    stats = areas.add_parser("stats", parents=[output], help="queue depth, lateness, recent attempts")
    stats.set_defaults(ops_command=show_stats)

    trace = areas.add_parser("trace", parents=[output], help="what happened to tool call X?")
    trace.add_argument(
        "tool_call_id",
        metavar="TOOL_CALL_ID",
        help="the Agent's tool_call_id, or its beginning when that names one call (as lists shorten it)",
    )
    trace.set_defaults(ops_command=trace_tool_call)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    command: Command = args.ops_command
    settings = load_settings("ops")
    try:
        conn = psycopg.connect(
            settings.psycopg_url,
            autocommit=True,
            row_factory=dict_row,
            application_name="lineup-ops",
            connect_timeout=10,
        )
    except psycopg.OperationalError as exc:
        print(f"error: cannot connect to the database: {exc}", file=sys.stderr)
        return 1
    with conn:
        return command(conn, args, out or sys.stdout)


def _limit(value: str) -> int:
    try:
        limit = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if not 1 <= limit <= 1000:
        raise argparse.ArgumentTypeError("must be 1..1000")
    return limit


def _text(value: str) -> str:
    if not 1 <= len(value) <= 255 or "\x00" in value:
        raise argparse.ArgumentTypeError("1-255 characters, no U+0000")
    return value


def _reason(value: str) -> str:
    if not 1 <= len(value) <= 500 or "\x00" in value:
        raise argparse.ArgumentTypeError("1-500 characters, no U+0000")
    return value


def _instant(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} has no offset (add Z for UTC)")
    return moment


def _cursor(value: str) -> OutboxCursor:
    cursor = OutboxCursor.decode(value) if len(value) <= MAX_CURSOR_LENGTH else None
    if cursor is None:
        raise argparse.ArgumentTypeError("not a cursor a previous page printed")
    return cursor


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
    print(f"error: {message}", file=sys.stderr)
    return 1


# ---- commands


def outbox_list(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    lookup = ops_db.outbox_list(
        status=args.status,
        conversation_id=args.conversation,
        tool_call_prefix=args.tool_call,
        limit=args.limit,
        after=args.cursor,
    )
    data = ops_db.read(conn, lookup)
    if args.json:
        return emit_json(data, out)
    _print_outbox(data, args.wide, out)
    if data["next_cursor"]:
        print(f"more: --cursor {data['next_cursor']}", file=out)
    return 0


def _print_outbox(data: Json, wide: bool, out: TextIO) -> None:
    if wide:
        rows = [
            [
                row["event_id"],
                row["status"],
                str(row["attempts"]),
                row["conversation_id"],
                str(row["sequence"]),
                row["tool"],
                row["tool_call_id"],
                when(row["created_at"]),
                when(_next_or_delivered(row)),
                flat(row["last_error"]),
            ]
            for row in data["outbox"]
        ]
        headers = ["EVENT_ID", "STATUS", "ATT", "CONVERSATION", "SEQ", "TOOL", "TOOL_CALL_ID", "CREATED"]
        print(table([*headers, "DELIVERED/NEXT", "LAST_ERROR"], rows), file=out)
        return
    rows = [
        [
            row["event_id"][:SHORT_ID],
            row["status"],
            str(row["attempts"]),
            row["conversation_id"],
            str(row["sequence"]),
            row["tool_call_id"],
            short_when(row["created_at"]),
            flat(row["last_error"]),
        ]
        for row in data["outbox"]
    ]
    headers = [
        "EVENT_ID",
        "STATUS",
        "ATT",
        "CONVERSATION",
        "SEQ",
        "TOOL_CALL_ID",
        "CREATED UTC",
        "LAST_ERROR",
    ]
    print(table(headers, rows, width=LIST_WIDTH, flexible=[(5, 16), (3, 12), (7, 10)]), file=out)


def _next_or_delivered(row: Json) -> str | None:
    return {"delivered": row["delivered_at"], "pending": row["next_attempt_at"]}.get(row["status"])


def outbox_show(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    event_id = resolve_event(conn, args.event_id)
    if isinstance(event_id, str):
        return fail(event_id)
    row = ops_db.read(conn, ops_db.outbox_show(event_id))
    if row is None:
        return fail(f"no outbox row with event_id {args.event_id}")
    if args.json:
        return emit_json(row, out)
    print(outbox_block(row), file=out)
    return 0


def outbox_requeue(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    if args.all_dead:
        rows = requeue_db.requeue_all_dead(conn)
    else:
        event_id = resolve_event(conn, args.event_id)
        if isinstance(event_id, str):
            return fail(event_id)
        try:
            rows = [requeue_db.requeue_dead(conn, event_id)]
        except requeue_db.NotRequeueableError as exc:
            return fail(str(exc))
    if args.json:
        return emit_json({"requeued": rows}, out)
    if not rows:
        print("no dead rows: nothing requeued", file=out)
        return 0
    for row in rows:
        print(
            f"requeued {row['event_id']} (tool call {row['tool_call_id']}, conversation "
            f"{row['conversation_id']}, sequence {row['sequence']}): pending, attempts 0, due now",
            file=out,
        )
    print(f"{len(rows)} row(s) requeued", file=out)
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
    state = ops_db.read(conn, delivery_db.state_lookup())
    retention = ops_db.read(conn, delivery_db.retention_lookup())
    if args.json:
        return emit_json({"delivery": state, "retention": retention}, out)
    print(delivery_text(state, retention), file=out)
    return 0


def delivery_pause(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    state = delivery_db.pause(conn, _operator(), args.reason)
    if args.json:
        return emit_json(state, out)
    print(f"delivery paused since {when(state['paused_at'])} by {state['paused_by']}", file=out)
    return 0


def delivery_resume(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    state = delivery_db.resume(conn)
    if args.json:
        return emit_json(state, out)
    print(f"delivery running (circuit {state['circuit']})", file=out)
    return 0


def operations_list(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    lookup = ops_db.operations_list(state=args.state, conversation_id=args.conversation, limit=args.limit)
    data = ops_db.read(conn, lookup)
    if args.json:
        return emit_json(data, out)
    if args.wide:
        rows = [
            [
                row["operation_id"],
                row["state"],
                cell(row["reason"]),
                row["conversation_id"],
                row["tool_call_id"],
                when(row["started_at"]),
                when(row["ends_at"]),
                when(row["finalized_at"]),
                cell(row["lateness_ms"]),
            ]
            for row in data["operations"]
        ]
        headers = ["OPERATION_ID", "STATE", "REASON", "CONVERSATION", "TOOL_CALL_ID", "STARTED", "ENDS"]
        print(table([*headers, "FINALIZED", "LATE_MS"], rows), file=out)
        return 0
    rows = [
        [
            row["operation_id"][:SHORT_ID],
            row["state"],
            cell(row["reason"]),
            row["conversation_id"],
            row["tool_call_id"],
            short_when(row["started_at"]),
            cell(row["lateness_ms"]),
        ]
        for row in data["operations"]
    ]
    headers = ["OPERATION", "STATE", "REASON", "CONVERSATION", "TOOL_CALL_ID", "STARTED UTC", "LATE_MS"]
    print(table(headers, rows, width=LIST_WIDTH, flexible=[(4, 16), (3, 12)]), file=out)
    return 0


def show_stats(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    data = ops_db.read(conn, ops_db.stats())
    if args.json:
        return emit_json(data, out)
    delivery = ops_db.read(conn, delivery_db.state_lookup())
    box, ops, late = data["outbox"], data["operations"], data["deadline_lateness_ms"]
    attempts = data["attempts_last_hour"]
    age = box["oldest_pending_age_seconds"]
    lines = [
        f"server time         {data['server_time']}",
        "outbox              " + pairs(box["by_status"]) + f"  (due now {box['due_now']})",
        f"delivery            {'paused' if delivery['paused'] else 'running'}, circuit {delivery['circuit']}",
        f"oldest pending      {'-' if age is None else f'{age:.1f} s'}",
        "operations          " + pairs(ops["by_state"]),
        f"deadline lateness   p50 {cell(late['p50'])} ms  p99 {cell(late['p99'])} ms  "
        f"max {cell(late['max'])} ms  (over {late['completed']} completed)",
        "attempts, last hour " + pairs(attempts["by_outcome"]) + f"  (total {attempts['total']})",
    ]
    print("\n".join(lines), file=out)
    return 0


def trace_tool_call(conn: Conn, args: argparse.Namespace, out: TextIO) -> int:
    trace = ops_db.read(conn, ops_db.trace_tool_call(args.tool_call_id))
    if trace is None:
        # A list's shortened id ("start-4f1c…"): its beginning, when that names one recorded call.
        prefix = args.tool_call_id.removesuffix("…")
        found = ops_db.tool_call_ids_with_prefix(conn, prefix) if prefix else []
        if len(found) > 1:
            return fail(f"tool call {prefix!r}… is ambiguous ({found[0]}, {found[1]}, …): give more of it")
        if found:
            trace = ops_db.read(conn, ops_db.trace_tool_call(found[0]))
    if trace is None:
        return fail(
            f"nothing is recorded for tool call {args.tool_call_id!r} "
            "(answers 401, 404 and 422 are not recorded)"
        )
    if args.json:
        return emit_json(trace, out)
    print(trace_text(trace), file=out)
    return 0


# ---- rendering


def emit_json(data: Any, out: TextIO) -> int:
    print(json.dumps(data, indent=2, ensure_ascii=False), file=out)
    return 0
