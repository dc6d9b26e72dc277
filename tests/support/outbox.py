"""Queue tool results in the outbox the way the service's deciding transactions do, without the service,
and run a relay over them in a thread of the test process."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from opentelemetry.trace import TracerProvider
from psycopg.types.json import Jsonb

from relay.config import RelayConfig
from relay.worker import Relay
from service.settings import Settings

ENSURE_WORKSPACE = "INSERT INTO workspaces (conversation_id) VALUES (%s) ON CONFLICT DO NOTHING"

# The payload is built as SETTLE_FOCUSING builds it; operation_id stays NULL (no operations row).
QUEUE_RESULT = """
WITH sequenced AS (
    UPDATE workspaces SET outbox_sequence = outbox_sequence + 1
    WHERE conversation_id = %(conversation_id)s
    RETURNING outbox_sequence
)
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, payload)
SELECT %(event_id)s, %(tool)s, %(tool_call_id)s, %(conversation_id)s, s.outbox_sequence,
       jsonb_build_object(
           'event_id', %(event_id)s::uuid, 'type', 'tool.result', 'tool', %(tool)s::text,
           'tool_call_id', %(tool_call_id)s::text, 'conversation_id', %(conversation_id)s::text,
           'operation_id', NULL, 'sequence', s.outbox_sequence, 'result', %(result)s::jsonb)
FROM sequenced s
RETURNING sequence
"""

RESULT = {
    "state": "completed",
    "reason": "deadline_reached",
    "activity": "write tests",
    "duration_seconds": 1500,
    "started_at": "2026-11-30T08:00:00.000000Z",
    "ends_at": "2026-11-30T08:25:00.000000Z",
    "finalized_at": "2026-11-30T08:25:00.000000Z",
    "focused_seconds": 1500,
}


@dataclass(frozen=True)
class Queued:
    event_id: str
    tool_call_id: str
    conversation_id: str
    sequence: int


def queue_results(
    conn: psycopg.Connection[Any],
    conversation_id: str,
    count: int = 1,
    *,
    tool: str = "pomodoro.start",
    tool_call_id: str | None = None,
) -> list[Queued]:
    """``count`` results for one conversation, each committed in its own transaction, in order
    (``tool_call_id`` names the first one's call, as recorded in the past)."""
    queued = []
    for index in range(count):
        event_id = str(uuid.uuid4())
        if index > 0 or tool_call_id is None:
            tool_call_id = f"call-{uuid.uuid4().hex[:12]}"
        with conn.transaction():
            conn.execute(ENSURE_WORKSPACE, (conversation_id,))
            row = conn.execute(
                QUEUE_RESULT,
                {
                    "event_id": event_id,
                    "tool": tool,
                    "tool_call_id": tool_call_id,
                    "conversation_id": conversation_id,
                    "result": Jsonb(RESULT),
                },
            ).fetchone()
        assert row is not None
        sequence = row["sequence"] if isinstance(row, dict) else row[0]
        queued.append(Queued(event_id, tool_call_id, conversation_id, int(sequence)))
    return queued


def queue_across(
    conn: psycopg.Connection[Any], conversations: int, per_conversation: int, *, prefix: str = "conv"
) -> list[Queued]:
    """Results for several conversations, interleaved the way they would commit."""
    queued = []
    for _ in range(per_conversation):
        for index in range(conversations):
            queued.extend(queue_results(conn, f"{prefix}-{index}"))
    return queued


def outbox_rows(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Every outbox row by event_id (as text), with dict rows whatever the connection's factory."""
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        cursor.execute("SELECT * FROM outbox ORDER BY conversation_id, sequence")
        return {str(row["event_id"]): row for row in cursor.fetchall()}


def attempt_rows(conn: psycopg.Connection[Any], event_id: str) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        cursor.execute("SELECT * FROM outbox_attempts WHERE event_id = %s ORDER BY attempt", (event_id,))
        return cursor.fetchall()


# -- a relay in a thread ----------------------------------------------------------------------------


def relay_config(database_url: str, webhook_url: str, secrets: list[str], **overrides: Any) -> RelayConfig:
    """Short timeouts and backoff so that a retry story plays out in well under a second."""
    settings = Settings(
        database_url=database_url,
        agent_webhook_url=webhook_url,
        webhook_secret=" ".join(secrets),
        relay_id=f"test-relay-{uuid.uuid4().hex[:6]}",
        relay_max_attempts=5,
        relay_backoff_base_seconds=0.05,
        relay_backoff_max_seconds=0.2,
        relay_timeout_seconds=0.5,
        relay_lease_seconds=30.0,
        relay_poll_interval_seconds=0.2,
        relay_concurrency=8,
        relay_batch_size=10,
        relay_shutdown_grace_seconds=2.0,
    )
    return replace(RelayConfig.from_settings(settings), **overrides)


@dataclass
class RunningRelay:
    relay: Relay
    stop: Callable[[], None]


@contextlib.contextmanager
def running_relay(
    config: RelayConfig, *, tracer_provider: TracerProvider | None = None
) -> Iterator[RunningRelay]:
    """The relay on its own event loop in a thread; leaving the block stops it as SIGTERM would.
    ``tracer_provider``: where its delivery spans go (None: the process's, if any)."""
    relay = Relay(config, tracer_provider=tracer_provider)
    loop = asyncio.new_event_loop()
    stop_event = asyncio.Event()
    failures: list[BaseException] = []
    stopped = threading.Event()

    def run() -> None:
        try:
            loop.run_until_complete(relay.run(stop_event))
        except BaseException as exc:
            failures.append(exc)
        finally:
            loop.close()
            stopped.set()

    def stop() -> None:
        if not stopped.is_set():
            loop.call_soon_threadsafe(stop_event.set)
            assert stopped.wait(30), "relay did not stop within 30s"

    thread = threading.Thread(target=run, name=config.relay_id, daemon=True)
    thread.start()
    try:
        yield RunningRelay(relay, stop)
    finally:
        stop()
        thread.join(5)
    if failures:
        raise failures[0]


def wait_until(condition: Callable[[], Any], timeout: float = 15.0, interval: float = 0.02) -> Any:
    """Poll ``condition`` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout}s")
        time.sleep(interval)
