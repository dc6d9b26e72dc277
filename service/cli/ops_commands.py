"""What each ``python -m service ops …`` command does: the ops API's use cases — its reads
(``service.use_cases.ops_reads``) and its writes (``outbox_requeue``, ``delivery_control``) — run on
the CLI's one connection (``service.use_cases.one_connection``); printed as text
(``service.cli.ops_text``) or, with ``--json``, as the ``/v1/ops`` objects."""

from __future__ import annotations

import argparse
import getpass
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO
from uuid import UUID

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
from service.db import ops_queries as ops_db
from service.db import recovery as recovery_db
from service.domain.errors import AmbiguousToolCallId, NotFound, Refusal
from service.http import outcome_statuses
from service.manifests import registry_of
from service.settings import load_settings
from service.use_cases import delivery_control, ops_reads
from service.use_cases import outbox_requeue as requeues
from service.use_cases.one_connection import OneConnection

Command = Callable[[OneConnection, argparse.Namespace, TextIO], Awaitable[int]]

MIN_EVENT_PREFIX = 4


def _operator() -> str:
    """Who paused, as ``delivery_endpoints.paused_by`` records it."""
    return f"cli:{getpass.getuser()}@{socket.gethostname()}"


async def resolve_event(rt: OneConnection, value: str) -> UUID | str:
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
    found = await ops_db.event_ids_with_prefix(rt.conn, digits)
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


async def outbox_list(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    query = ops_reads.outbox_list(
        status=args.status,
        conversation_id=args.conversation,
        tool_call_prefix=args.tool_call,
        limit=args.limit,
        after=args.cursor,
    )
    data = await ops_reads.read(rt, query)
    if args.json:
        return emit_json(data, out)
    print(screen(outbox_table(data, args.wide)), file=out)
    if data["next_cursor"]:
        print(f"more: --cursor {data['next_cursor']}", file=out)
    return 0


async def outbox_show(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    event_id = await resolve_event(rt, args.event_id)
    if isinstance(event_id, str):
        return fail(event_id)
    row = await ops_reads.read(rt, ops_reads.outbox_show(event_id))
    if row is None:
        return fail(f"no outbox row with event_id {args.event_id}")
    if args.json:
        return emit_json(row, out)
    print(screen(outbox_block(row)), file=out)
    return 0


async def outbox_requeue(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    if args.all_dead:
        rows = await requeues.requeue_all_dead(rt)
    else:
        event_id = await resolve_event(rt, args.event_id)
        if isinstance(event_id, str):
            return fail(event_id)
        try:
            rows = [await requeues.requeue_dead(rt, event_id)]
        except NotFound:
            return fail(f"no outbox row with event_id {event_id}")
        except Refusal as refused:  # not dead: the rule's own sentence
            return fail(refused.message)
    if args.json:
        return emit_json({"requeued": rows}, out)
    print(screen(requeued_text(rows)), file=out)
    return 0


async def outbox_recover(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
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
    done = await requeues.recover_dead(rt, which, dry_run=args.dry_run)
    if args.json:
        return emit_json(done, out)
    if args.dry_run:
        print(f"{done['matched']} dead row(s) match: nothing requeued (dry run)", file=out)
    else:
        print(f"{done['requeued']} of {done['matched']} matching dead row(s) requeued", file=out)
    return 0


async def delivery_status(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    state = await ops_reads.read(rt, ops_reads.delivery_state())
    retention = await ops_reads.read(rt, ops_reads.retention())
    if args.json:
        return emit_json({"delivery": state, "retention": retention}, out)
    print(screen(delivery_text(state, retention)), file=out)
    return 0


async def delivery_pause(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    state = await delivery_control.pause(rt, by=_operator(), reason=args.reason)
    if args.json:
        return emit_json(state, out)
    print(screen(f"delivery paused since {when(state['paused_at'])} by {state['paused_by']}"), file=out)
    return 0


async def delivery_resume(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    state = await delivery_control.resume(rt, by=_operator())
    if args.json:
        return emit_json(state, out)
    print(f"delivery running (circuit {state['circuit']})", file=out)
    return 0


async def operations_list(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    query = ops_reads.operations_list(state=args.state, conversation_id=args.conversation, limit=args.limit)
    data = await ops_reads.read(rt, query)
    if args.json:
        return emit_json(data, out)
    print(screen(operations_table(data, args.wide)), file=out)
    return 0


async def show_stats(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    data = await ops_reads.read(rt, ops_reads.stats())
    if args.json:
        return emit_json(data, out)
    delivery = await ops_reads.read(rt, ops_reads.delivery_state())
    print(screen(stats_text(data, delivery)), file=out)
    return 0


def _statuses() -> dict[str, int]:
    """The status of each outcome word of the apps this service runs, as its API answers it."""
    return outcome_statuses(registry_of(load_settings("ops")).kinds)


def _trace_url_template() -> str | None:
    return load_settings("ops").trace_url_template


async def trace_tool_call(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    try:
        return await _trace_tool_call(rt, args, out)
    except AmbiguousToolCallId as ambiguous:
        named = ambiguous.extra.get("conversation_ids") or []
        which = f" ({', '.join(named)})" if named else ""
        return fail(
            f"tool call {args.tool_call_id!r} was made in more than one conversation{which}: "
            "name one with --conversation"
        )


async def _trace_tool_call(rt: OneConnection, args: argparse.Namespace, out: TextIO) -> int:
    conversation = args.conversation
    statuses, template = _statuses(), _trace_url_template()
    trace = await ops_reads.read(
        rt, ops_reads.trace_tool_call(args.tool_call_id, statuses, conversation, template)
    )
    if trace is None:
        # A list's shortened id ("start-4f1c…"): its beginning, when that names one recorded call.
        prefix = args.tool_call_id.removesuffix("…")
        found = await ops_db.tool_call_ids_with_prefix(rt.conn, prefix) if prefix else []
        if len(found) > 1:
            return fail(f"tool call {prefix!r}… is ambiguous ({found[0]}, {found[1]}, …): give more of it")
        if found:
            trace = await ops_reads.read(
                rt, ops_reads.trace_tool_call(found[0], statuses, conversation, template)
            )
    if trace is None:
        return fail(
            f"nothing is recorded for tool call {args.tool_call_id!r} "
            "(answers 401, 404 and 422 are not recorded)"
        )
    if args.json:
        return emit_json(trace, out)
    print(screen(trace_text(trace)), file=out)
    return 0
