"""``python -m service ops …``: the operator CLI over the outbox, the operations and the deliveries.

The command tree and its arguments; what each command does is ``service.cli.ops_commands``, how
it prints ``service.cli.ops_text``. Tables for people by default — lists fit a 100-column
terminal, with ids shortened to their first 8 hex digits, which ``show`` and ``requeue`` accept as
git accepts a short hash (and ``trace`` a tool call id's unique beginning, as lists cut it);
``--wide`` prints every column in full and ``--json`` (the same objects as ``/v1/ops``) is for
machines. Exit 0 on success, 1 when the thing asked for is unknown, ambiguous or refused, 2 for bad
usage or settings.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TextIO

import psycopg
from psycopg.rows import dict_row

from service.cli import ops_commands as commands
from service.cli.ops_commands import MIN_EVENT_PREFIX, Command
from service.cli.ops_text import LIST_WIDTH
from service.db.ops_queries import DEFAULT_LIMIT
from service.db.pool import prepare_options
from service.db.tables import OPERATION_STATES, OUTBOX_STATUSES
from service.domain.cursors import MAX_CURSOR_LENGTH, OutboxCursor
from service.settings import load_settings
from service.use_cases.one_connection import one_connection

DESCRIPTION = (
    "The operator CLI: the outbox, the operations, delivery stats and control, and what happened to "
    "a tool call."
)


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
    listing.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT, help="1..1000 (default 100)")
    listing.add_argument(
        "--cursor", type=_cursor, help="the next page: the cursor the previous page printed (same filters)"
    )
    listing.set_defaults(ops_command=commands.outbox_list)
    event_help = f"the row's event_id (the webhook-id), or its first {MIN_EVENT_PREFIX}+ hex digits"
    show = actions.add_parser("show", parents=[output], help="one row, its payload and every attempt")
    show.add_argument("event_id", metavar="EVENT_ID", help=event_help)
    show.set_defaults(ops_command=commands.outbox_show)
    requeue = actions.add_parser(
        "requeue", parents=[output], help="dead rows back to pending: attempts 0, due now, same event_id"
    )
    target = requeue.add_mutually_exclusive_group(required=True)
    target.add_argument("event_id", metavar="EVENT_ID", nargs="?", help=f"one dead row: {event_help}")
    target.add_argument("--all-dead", action="store_true", help="every dead row")
    requeue.set_defaults(ops_command=commands.outbox_requeue)
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
    recover.set_defaults(ops_command=commands.outbox_recover)

    delivery = areas.add_parser("delivery", help="pause and resume delivery; the endpoint's circuit")
    delivery_actions = delivery.add_subparsers(dest="ops_action", required=True)
    status = delivery_actions.add_parser(
        "status", parents=[output], help="paused or not, the circuit, retention, the oldest rows"
    )
    status.set_defaults(ops_command=commands.delivery_status)
    pause = delivery_actions.add_parser(
        "pause", parents=[output], help="every relay stops sending within a second; rows wait for free"
    )
    pause.add_argument("--reason", type=_reason, help="shown wherever the pause is (up to 500 characters)")
    pause.set_defaults(ops_command=commands.delivery_pause)
    resume = delivery_actions.add_parser("resume", parents=[output], help="the relays send again at once")
    resume.set_defaults(ops_command=commands.delivery_resume)

    operations = areas.add_parser("operations", help="focus periods and how they ended")
    op_actions = operations.add_subparsers(dest="ops_action", required=True)
    op_listing = op_actions.add_parser("list", parents=[list_output], help="operations, newest first")
    op_listing.add_argument("--state", choices=OPERATION_STATES)
    op_listing.add_argument("--conversation", metavar="CONVERSATION_ID")
    op_listing.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT, help="1..1000 (default 100)")
    op_listing.set_defaults(ops_command=commands.operations_list)

    stats = areas.add_parser("stats", parents=[output], help="queue depth, lateness, recent attempts")
    stats.set_defaults(ops_command=commands.show_stats)

    trace = areas.add_parser("trace", parents=[output], help="what happened to tool call X?")
    trace.add_argument(
        "tool_call_id",
        metavar="TOOL_CALL_ID",
        help="the Agent's tool_call_id, or its beginning when that names one call (as lists shorten it)",
    )
    trace.add_argument(
        "--conversation",
        metavar="CONVERSATION_ID",
        help="the conversation the call was made in (a tool_call_id is unique per conversation)",
    )
    trace.set_defaults(ops_command=commands.trace_tool_call)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    command: Command = args.ops_command
    settings = load_settings("ops")
    return asyncio.run(
        _run(command, args, out or sys.stdout, settings.psycopg_url, prepared=settings.db_prepared_statements)
    )


async def _run(command: Command, args: argparse.Namespace, out: TextIO, url: str, *, prepared: bool) -> int:
    try:
        conn = await psycopg.AsyncConnection.connect(
            url,
            autocommit=True,
            row_factory=dict_row,
            application_name="lineup-ops",
            connect_timeout=10,
            **prepare_options(prepared),
        )
    except psycopg.OperationalError as exc:
        print(f"error: cannot connect to the database: {exc}", file=sys.stderr)
        return 1
    async with conn, one_connection(conn, url, prepared=prepared) as rt:
        try:
            return await command(rt, args, out)
        except psycopg.errors.InsufficientPrivilege as exc:
            # The read-only operator role (docs/operations.md, "Database roles") reads, never writes.
            print(
                f"error: the database refused {conn.info.user}: {exc.diag.message_primary}; this command"
                " needs a role that may write (the service's), not the read-only operator role",
                file=sys.stderr,
            )
            return 1


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
