"""The ids the Runtime makes are time-ordered UUIDs (version 7), in the order they were made.

New keys then go to the right edge of their indexes: random ones wrote a whole index page to the
WAL for nearly every key after a checkpoint, most of a Pomodoro's WAL (docs/capacity.md).
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar.testing import AsyncTestClient

from harness.calls import interrupt_body, start_body
from tests.conftest import AGENT, HOST

Client = AsyncTestClient[Any]


def _in_order_of_making(ids: list[uuid.UUID]) -> None:
    assert [value.version for value in ids] == [7] * len(ids)
    assert ids == sorted(ids)


async def test_instances_sub_sessions_operations_and_outbox_events_are_version_7_in_order(
    client: Client, db: Any
) -> None:
    for n in range(4):
        started = await client.post("/v1/tool-calls", json=start_body(f"conv-{n}"), headers=AGENT)
        assert started.status_code == 202, started.text
        interrupted = await client.post("/v1/tool-calls", json=interrupt_body(f"conv-{n}"), headers=AGENT)
        assert interrupted.status_code == 200, interrupted.text

    def ids(sql: str) -> list[uuid.UUID]:
        return [row["id"] for row in db.execute(sql).fetchall()]

    _in_order_of_making(ids("SELECT instance_id AS id FROM app_instances ORDER BY opened_at"))
    _in_order_of_making(ids("SELECT sub_session_id AS id FROM sub_sessions ORDER BY started_at"))
    _in_order_of_making(ids("SELECT operation_id AS id FROM operations ORDER BY started_at"))
    _in_order_of_making(ids("SELECT event_id AS id FROM outbox ORDER BY created_at"))


async def test_messages_are_version_7_in_order(client: Client, db: Any) -> None:
    for n in range(3):
        posted = await client.post(
            "/v1/host/conversations/conv-1/messages",
            json={"role": "user", "text": f"hello {n}"},
            headers=HOST,
        )
        assert posted.status_code == 201, posted.text
    rows = db.execute("SELECT message_id FROM messages ORDER BY created_at").fetchall()
    _in_order_of_making([row["message_id"] for row in rows])


async def test_the_time_in_an_id_is_the_database_clock_in_milliseconds(db: Any) -> None:
    row = db.execute(
        "SELECT uuid_v7() AS id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms"
    ).fetchone()
    made_ms = int.from_bytes(row["id"].bytes[:6], "big")
    assert 0 <= row["now_ms"] - made_ms < 1000
    assert row["id"].variant == uuid.RFC_4122
