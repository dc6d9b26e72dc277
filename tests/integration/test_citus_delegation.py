"""On Citus, each tool call is delegated whole to the worker holding its conversation — and stays so;
and the database code can be applied again on a distributed database.

Citus 13.2 stops delegating function calls on a connection once a statement on it failed while
Citus planned it recursively (the planner's recursive-planning depth is never brought back to 0;
every later call then runs statement by statement from the coordinator, a round trip each, with
only a DEBUG line to show it). The service's pool therefore closes, on Citus, every connection
that saw a failed statement (``RecoveringPool.discard_after_error``). These tests run on a real
Citus cluster (a coordinator and one worker) started here, migrated and distributed as
``make citus`` does; they are skipped where no citus extension is installed (``make citus`` builds
one).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from harness.citus import citus_cluster, installed
from harness.postgres import memory_dir
from service.db import tool_calls as tc_db
from service.db.distribute import distribute
from service.db.migrate import upgrade
from service.db.pool import RecoveringPool, open_pool
from service.manifests import registry_of
from service.settings import Settings

pytestmark = pytest.mark.skipif(
    not installed(), reason="no citus extension installed (make citus builds one)"
)

# A statement Citus refuses while it plans it recursively: the sweeper's batch of the release before
# the Citus-ready schema (FOR UPDATE SKIP LOCKED over every shard) failed this way.
POISON = "WITH due AS (SELECT operation_id FROM operations LIMIT 5 FOR UPDATE SKIP LOCKED) SELECT * FROM due"
PUSHED = "pushing down the function call"
CONTEXT = json.dumps({"late_window_seconds": 5, "statuses": {"no_active_focusing_operation": 200}})


@pytest.fixture(scope="module")
def citus_url() -> Iterator[str]:
    with citus_cluster(workers=1, parent=memory_dir()) as cluster:
        url = cluster.url()
        upgrade(url, registry_of(Settings()))
        with psycopg.connect(url, autocommit=True) as conn:
            distribute(conn)
        yield url


async def delegated(conn: psycopg.AsyncConnection[Any]) -> bool:
    """One tool call (the service's own statement) on ``conn``: was it handed whole to the worker?
    Citus says so in a DEBUG line as it plans it."""
    said: list[str] = []
    await conn.execute("SET client_min_messages TO debug1")
    conn.add_notice_handler(lambda notice: said.append(notice.message_primary or ""))
    try:
        result = await tc_db.call(
            conn,
            tool_call_id=f"call-{uuid.uuid4()}",
            conversation_id=f"conversation-{uuid.uuid4()}",
            tool="pomodoro.interrupt",
            fingerprint="fingerprint",
            arguments="{}",
            decide="pomodoro_interrupt",
            context=CONTEXT,
        )
    finally:
        conn._notice_handlers.clear()
        await conn.execute("RESET client_min_messages")
    assert result.outcome == "no_active_focusing_operation"
    return PUSHED in said


@pytest.fixture
async def pool(citus_url: str) -> AsyncIterator[RecoveringPool[Any]]:
    opened = await open_pool(citus_url, size=1)
    assert isinstance(opened, RecoveringPool)
    opened.discard_after_error = True  # what serve does on a distributed database
    try:
        yield opened
    finally:
        await opened.close()


async def test_citus_stops_delegating_on_a_connection_that_failed_a_recursive_plan(citus_url: str) -> None:
    """Why the pool closes such connections: if this starts failing, Citus has fixed it."""
    async with await psycopg.AsyncConnection.connect(citus_url, autocommit=True) as conn:
        assert await delegated(conn)
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            await conn.execute(POISON)
        assert not await delegated(conn)


async def test_after_a_planning_error_the_pools_next_tool_calls_are_delegated_again(
    pool: RecoveringPool[Any],
) -> None:
    async with pool.connection() as conn:
        assert await delegated(conn)
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        async with pool.connection() as conn:
            await conn.execute(POISON)
    assert pool.discarded == 1
    for _ in range(5):
        async with pool.connection() as conn:
            assert await delegated(conn)


def test_migrate_on_a_distributed_database_makes_its_triggers_again(citus_url: str) -> None:
    """Citus refuses a trigger on a distributed table unless told it is safe; migrate says so."""
    with psycopg.connect(citus_url, autocommit=True) as conn:
        conn.execute("SET citus.enable_unsafe_triggers = on")
        conn.execute("DROP TRIGGER workspaces_guard ON workspaces")
        conn.execute("DELETE FROM database_code WHERE name = 'workspaces.workspaces_guard'")
    upgrade(citus_url, registry_of(Settings()))
    with psycopg.connect(citus_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname = 'workspaces_guard' AND tgrelid = 'workspaces'::regclass"
        ).fetchone()
    assert found == (1,)
