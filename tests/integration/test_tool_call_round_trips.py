"""A tool call costs one database round trip and one implicit transaction, NOTIFY-free.

Counted on the wire: libpq's protocol trace of the one pooled connection shows every message the
service sends; each round trip ends with a ``Sync`` (extended protocol) or is a ``Query``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from psycopg import pq

from harness.calls import expire
from service.db.pool import Pool, open_pool
from service.domain.errors import NotFound, WriteLimited
from service.http import status_of, status_of_kind
from service.manifests import Registry
from service.settings import Settings
from service.use_cases import callers
from service.use_cases.operation_interrupt import interrupt_operation
from service.use_cases.runtime import Runtime
from service.use_cases.tool_calls import ToolCallRequest, call_tool
from tests.conftest import make_settings


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await open_pool(database_url, size=1)
    yield pool
    await pool.close()


@pytest.fixture
def runtime(pool: Pool, settings: Settings, registry: Registry) -> Runtime:
    return Runtime(pool=pool, settings=settings, registry=registry)


def _call(tool: str, conversation_id: str, arguments: dict[str, Any]) -> ToolCallRequest:
    return ToolCallRequest(f"{tool}-{uuid.uuid4()}", conversation_id, tool, arguments)


async def _run(rt: Runtime, call: ToolCallRequest) -> int:
    return status_of_kind((await call_tool(rt, call)).kind)


@contextmanager
def traced(conn: Any, path: Path) -> Iterator[list[str]]:
    """The frontend messages sent on ``conn`` while inside the block."""
    messages: list[str] = []
    with path.open("w") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield messages
        finally:
            conn.pgconn.untrace()
    for line in path.read_text().splitlines():
        direction, _, rest = line.partition("\t")
        if direction == "F":
            messages.append(rest.split("\t")[1].split()[0])


def round_trips(messages: list[str]) -> int:
    return sum(1 for message in messages if message in ("Sync", "Query"))


async def test_start_interrupt_and_replay_each_cost_one_round_trip(
    runtime: Runtime, pool: Pool, tmp_path: Path, db: Any
) -> None:
    # Warm the connection: psycopg prepares the statement on its first executions.
    for n in range(6):
        await _run(runtime, _call("pomodoro.interrupt", f"warm-{n}", {}))
    async with pool.connection() as conn:
        pass
    start = _call("pomodoro.start", "conv-rt", {"duration_seconds": 60, "activity": "x"})
    interrupt = _call("pomodoro.interrupt", "conv-rt", {})
    ask = _call("interact.ask", "conv-rt", {"prompt": "ok?", "choices": ["yes", "no"]})
    for call, status in ((start, 202), (interrupt, 200), (start, 202), (ask, 202)):
        with traced(conn, tmp_path / "trace") as messages:
            assert await _run(runtime, call) == status
        assert round_trips(messages) == 1, messages
        assert "Query" not in messages  # no BEGIN, no COMMIT: the statement is its own transaction


async def test_an_overdue_start_settles_and_starts_in_the_same_round_trip(
    runtime: Runtime, pool: Pool, tmp_path: Path, db: Any
) -> None:
    for n in range(6):
        await _run(runtime, _call("pomodoro.interrupt", f"warm-{n}", {}))
    first = _call("pomodoro.start", "conv-late", {"duration_seconds": 60})
    assert await _run(runtime, first) == 202
    operation = db.execute(
        "SELECT operation_id FROM operations WHERE conversation_id = 'conv-late'"
    ).fetchone()
    expire(db, operation["operation_id"])
    async with pool.connection() as conn:
        pass
    with traced(conn, tmp_path / "trace") as messages:
        assert await _run(runtime, _call("pomodoro.start", "conv-late", {"duration_seconds": 60})) == 202
    assert round_trips(messages) == 1
    states = db.execute(
        "SELECT state, reason FROM operations WHERE conversation_id = 'conv-late' ORDER BY started_at"
    ).fetchall()
    assert [(r["state"], r["reason"]) for r in states] == [
        ("completed", "deadline_reached"),
        ("focusing", None),
    ]


async def test_a_task_cancel_is_one_round_trip_whoever_wins(
    runtime: Runtime, pool: Pool, tmp_path: Path, db: Any
) -> None:
    for n in range(6):
        await _run(runtime, _call("pomodoro.interrupt", f"warm-{n}", {}))
    assert await _run(runtime, _call("pomodoro.start", "conv-cancel", {"duration_seconds": 60})) == 202
    with pytest.raises(NotFound):  # prepares the statement on the connection
        await interrupt_operation(runtime, uuid.uuid4())
    operation_id = db.execute(
        "SELECT operation_id FROM operations WHERE conversation_id = 'conv-cancel'"
    ).fetchone()["operation_id"]
    async with pool.connection() as conn:
        pass
    outcomes = []
    for _ in range(2):  # the winner, then one that finds it final
        with traced(conn, tmp_path / "trace") as messages:
            outcomes.append((await interrupt_operation(runtime, operation_id)).settled_state)
        assert round_trips(messages) == 1, messages
        assert "Query" not in messages
    assert outcomes == ["interrupted", None]


def test_no_function_or_trigger_of_the_schema_sends_a_notify(db: Any) -> None:
    """Every NOTIFYing commit takes one cluster-wide lock: wake-ups are sent after commit instead."""
    rows = db.execute(
        """
        SELECT p.proname FROM pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace
          AND (p.prosrc ILIKE '%%pg_notify%%' OR p.prosrc ~* '\\mnotify\\M')
        """
    ).fetchall()
    assert [r["proname"] for r in rows] == []


def test_no_statement_of_the_service_sends_a_notify_while_deciding() -> None:
    import service.db.instances
    import service.db.interactions
    import service.db.messages
    import service.db.operations
    import service.db.states
    import service.db.tool_calls
    import service.db.workspaces

    modules = [
        service.db.instances,
        service.db.interactions,
        service.db.messages,
        service.db.operations,
        service.db.states,
        service.db.tool_calls,
        service.db.workspaces,
    ]
    statements = [
        (module.__name__, name)
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, str) and name.isupper() and "notify" in value.lower()
    ]
    assert statements == []


async def test_a_persons_call_spends_its_allowance_in_the_same_one_round_trip(
    pool: Pool, database_url: str, registry: Registry, tmp_path: Path
) -> None:
    settings = make_settings(database_url, write_limit_tool_calls=2)
    runtime = Runtime(pool=pool, settings=settings, registry=registry)
    for n in range(6):
        await _run(runtime, _call("pomodoro.interrupt", f"warm-{n}", {}))
    own = "person-rt"
    calling = callers.current.set(callers.person("https://id.example", "alice", "client", own))
    try:
        async with pool.connection() as conn:
            pass
        start = _call("pomodoro.start", own, {"duration_seconds": 60})
        statuses = []
        for call in (
            start,
            _call("pomodoro.interrupt", own, {}),
            start,
            _call("pomodoro.start", own, {"duration_seconds": 60}),
        ):
            with traced(conn, tmp_path / "trace") as messages:
                try:
                    statuses.append(await _run(runtime, call))
                except WriteLimited as limited:
                    statuses.append(status_of(limited))
            assert round_trips(messages) == 1, messages
            assert "Query" not in messages
    finally:
        callers.current.reset(calling)
    assert statuses == [202, 200, 202, 429]  # the replay spent nothing; the third new call is over
