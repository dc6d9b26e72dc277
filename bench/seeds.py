"""Rows the benches put in place, written by the service's own tool-call statement.

Every seed is a list of Agent tool calls sent straight to Postgres through ``CALL_TOOL``
(``service/db/tool_calls.py``), with the arguments, fingerprint, decision function and context the
service itself passes (its ``Runtime`` and registry, default settings). So a seeded Pomodoro has the
workspace, instance, sub-session, snapshot, recorded answer and outbox row the service would leave,
and a schema change that the service follows, the seeds follow; one it does not, fails the benches'
smoke test (``tests/integration/test_benches_smoke.py``) at once. No hand-written INSERT here.

Many calls go in one pipeline on one connection with ``synchronous_commit = off`` (each call is
still its own transaction): 10,000 calls take a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Any

import msgspec
import psycopg
import psycopg.conninfo
from psycopg.rows import tuple_row


@dataclass(frozen=True)
class _Tool:
    decide: str
    context: str


@cache
def _tools() -> tuple[Any, dict[str, _Tool]]:
    """The registry and each Tool's decision function and context, as the service's Runtime makes
    them with default settings."""
    from service.manifests import registry_of
    from service.settings import load_settings
    from service.use_cases.runtime import Runtime

    settings = load_settings(
        "serve",
        database_url="postgresql://bench@127.0.0.1/unused",
        agent_token="bench-agent-token-000",
        host_token="bench-host-token-0000",
        operator_token="bench-operator-token",
    )
    registry = registry_of(settings)
    runtime = Runtime(pool=None, settings=settings, registry=registry)  # type: ignore[arg-type]
    tools = {
        name: _Tool(decide=registry.runner(name).decide, context=runtime.context_of(name))
        for name in registry.runners
    }
    return registry, tools


@dataclass(frozen=True)
class Call:
    """One Agent tool call."""

    conversation_id: str
    tool: str
    arguments: dict[str, Any]
    tool_call_id: str = ""

    def params(self) -> tuple[str, ...]:
        """``CALL_TOOL``'s parameters, as ``service.use_cases.tool_calls.call_tool`` makes them."""
        from service.domain.idempotency import fingerprint

        registry, tools = _tools()
        spec = registry.tool(self.tool)
        if spec is None:
            raise ValueError(f"no tool named {self.tool!r}")
        tool_call_id = self.tool_call_id or f"seed-{uuid.uuid4()}"
        body = {
            "tool_call_id": tool_call_id,
            "conversation_id": self.conversation_id,
            "tool": self.tool,
            "arguments": self.arguments,
        }
        arguments = msgspec.json.encode(spec.normalized(self.arguments)).decode()
        runner = tools[self.tool]
        return (
            tool_call_id,
            self.conversation_id,
            self.tool,
            fingerprint(body),
            arguments,
            runner.decide,
            runner.context,
        )


def start(conversation_id: str, duration_seconds: int = 1500, activity: str = "bench") -> Call:
    arguments = {"duration_seconds": duration_seconds, "activity": activity}
    return Call(conversation_id, "pomodoro.start", arguments)


def interrupt(conversation_id: str) -> Call:
    return Call(conversation_id, "pomodoro.interrupt", {})


def send(url: str, calls: Iterable[Call], *, chunk: int = 2000) -> Counter[str]:
    """Send the calls in order through the service's statement; the outcome words, counted."""
    from service.db.tool_calls import CALL_TOOL

    outcomes: Counter[str] = Counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        with psycopg.RawCursor(conn, row_factory=tuple_row) as cursor:
            for batch in _chunks(calls, chunk):
                cursor.executemany(CALL_TOOL, [c.params() for c in batch], returning=True)
                while True:
                    row = cursor.fetchone()
                    if row is not None:
                        outcomes[str(row[0])] += 1
                    if not cursor.nextset():
                        break
    return outcomes


def _chunks(calls: Iterable[Call], size: int) -> Iterator[list[Call]]:
    batch: list[Call] = []
    for call in calls:
        batch.append(call)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def expect(outcomes: Counter[str], **wanted: int) -> None:
    """Refuse a seed whose calls did not all answer as meant (a schema or rule the seed no longer
    matches): the bench stops with what came back instead of measuring something else."""
    if dict(outcomes) != wanted:
        raise RuntimeError(f"the seed's tool calls answered {dict(outcomes)}, expected {wanted}")


def focusing(url: str, prefix: str, count: int, duration_seconds: int = 1500, connections: int = 2) -> None:
    """``count`` conversations ``<prefix><n>``, each with one Pomodoro focusing (``connections``
    pipelines side by side: the conversations are independent)."""

    def part(k: int) -> Counter[str]:
        return send(url, (start(f"{prefix}{n}", duration_seconds) for n in range(k, count, connections)))

    with ThreadPoolExecutor(connections) as pool:
        outcomes = sum(pool.map(part, range(connections)), Counter[str]())
    expect(outcomes, accepted=count)


def finished(url: str, prefix: str, conversations: int, per: int = 1) -> None:
    """``per`` Pomodoros started and interrupted in each of ``conversations`` conversations,
    conversation after conversation in turn: one result per Pomodoro queued in the outbox, in each
    conversation's order (a relay backlog, or history once delivered)."""

    def calls() -> Iterator[Call]:
        for _ in range(per):
            for n in range(conversations):
                yield start(f"{prefix}{n}")
                yield interrupt(f"{prefix}{n}")

    total = conversations * per
    expect(send(url, calls()), accepted=total, interrupted=total)


def move_deadlines(conn: psycopg.Connection[Any], prefix: str, lead: float, window: float) -> int:
    """Move the focusing periods of the conversations ``<prefix>…`` so that their deadlines fall
    evenly over ``[now + lead, now + lead + window)`` (in conversation order), each period keeping
    its length, as ``harness.calls.expire`` moves one; the rows moved."""
    cursor = conn.execute(
        """
        WITH due AS (
            SELECT operation_id,
                   date_trunc('milliseconds', statement_timestamp())
                   + make_interval(secs => %(lead)s::float8 + %(window)s::float8
                                   * (row_number() OVER (ORDER BY conversation_id) - 1)
                                   / count(*) OVER ()) AS ends_at
            FROM operations
            WHERE state = 'focusing' AND conversation_id LIKE %(prefix)s || '%%'
        )
        UPDATE operations o
        SET started_at = due.ends_at - make_interval(secs => o.duration_seconds), ends_at = due.ends_at
        FROM due WHERE o.operation_id = due.operation_id
        """,
        {"prefix": prefix, "lead": lead, "window": window},
    )
    return cursor.rowcount


def delivery(url: str, *, paused: bool) -> None:
    """Pause or resume delivery to the Agent as an operator does (``python -m service ops``: the
    service's use case on one connection; a resume wakes the relays after its commit)."""
    from psycopg.rows import dict_row

    from service.use_cases import delivery_control
    from service.use_cases.one_connection import one_connection

    async def run() -> None:
        async with (
            await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as conn,
            one_connection(conn, url) as rt,
        ):
            if paused:
                await delivery_control.pause(rt, by="bench", reason="seeding")
            else:
                await delivery_control.resume(rt, by="bench")

    asyncio.run(run())


@contextlib.contextmanager
def copy_of(url: str) -> Iterator[str]:
    """A copy of the database ``url`` names (``CREATE DATABASE … TEMPLATE``, nobody connected to
    it), dropped ``WITH (FORCE)`` on the way out: a seed made once serves many runs."""
    from harness.database import create_database, drop_database, with_database

    server = with_database(url, "postgres")
    source = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    name = f"{source}_{secrets.token_hex(3)}"
    create_database(server, name, template=str(source))
    try:
        yield with_database(url, name)
    finally:
        drop_database(server, name)


def deliver_all(url: str, relay_id: str = "seed") -> int:
    """Mark every pending result delivered through the relay's own claim and record statements
    (``relay.claims``, as if each POST had been answered 204), without HTTP; the rows delivered."""
    from relay import claims

    async def run() -> int:
        done = 0
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            while claimed := await claims.claim(conn, relay_id, 500, 30.0):
                await claims.record_outcomes(
                    conn,
                    relay_id,
                    [
                        claims.Outcome(c, "delivered", 0.0, None, c.created_at, 1, 204, None, None)
                        for c in claimed
                    ],
                )
                done += len(claimed)
        return done

    return asyncio.run(run())
