"""Four-way races at ends_at: the deadline (the service's sweeper), two Agent interrupts, and the
person leaving or closing — fired together over real HTTP. Postgres decides; exactly one wins."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from datetime import datetime
from typing import Any

import httpx
import pytest

from harness.calls import interrupt_body, start_body
from tests.conftest import AGENT, HOST

RACES = 200
BATCH = 25

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _epoch(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


async def _at(moment: float, jitter: float) -> None:
    await asyncio.sleep(max(0.0, moment + jitter - time.time()))


async def _race(
    client: httpx.AsyncClient, conversation_id: str, leave: bool, rng: random.Random
) -> dict[str, Any]:
    started = (
        await client.post(
            "/v1/tool-calls", json=start_body(conversation_id, duration_seconds=1), headers=AGENT
        )
    ).json()
    ends_at = _epoch(started["operation"]["ends_at"])

    async def interrupt() -> dict[str, Any]:
        await _at(ends_at, rng.uniform(-0.08, 0.01))
        response = await client.post("/v1/tool-calls", json=interrupt_body(conversation_id), headers=AGENT)
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def host_action() -> dict[str, Any]:
        await _at(ends_at, rng.uniform(-0.08, 0.01))
        if leave:
            response = await client.post(
                f"/v1/host/conversations/{conversation_id}/workspace/foreground",
                json={"target": "interact"},
                headers=HOST,
            )
        else:
            response = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
        assert response.status_code == 200, response.text
        return dict(response.json())

    first, second, host = await asyncio.gather(interrupt(), interrupt(), host_action())
    return {"started": started, "receipts": [first, second], "host": host, "leave": leave}


def _check(race: dict[str, Any], operation: dict[str, Any], outbox_rows: int) -> str:
    state, reason = operation["state"], operation["reason"]
    assert state in {"completed", "interrupted", "cancelled"}, operation
    assert outbox_rows == 1, (operation, outbox_rows)
    receipts = race["receipts"]
    interrupted = [r for r in receipts if r["status"] == "interrupted"]
    assert len(interrupted) <= 1
    if reason == "agent_interrupt":
        assert len(interrupted) == 1
        assert interrupted[0]["operation_id"] == operation["operation_id"]
    else:
        assert interrupted == []
    for receipt in receipts:
        if receipt["status"] == "operation_already_final":
            assert receipt["final_state"] == state
            assert receipt["operation_id"] == operation["operation_id"]
        else:
            assert receipt["status"] == "interrupted"
    if race["leave"]:
        assert race["host"]["foreground"] == "interact"
        assert race["host"]["focusing_operation"] is None
        assert reason != "app_closed"
    else:
        assert race["host"]["operation"]["state"] == state
        assert reason != "user_left_workspace"
    if state == "completed":
        assert _epoch(operation["finalized_at"]) >= _epoch(operation["ends_at"])
    else:
        assert _epoch(operation["finalized_at"]) < _epoch(operation["ends_at"])
    return f"{state}/{reason}"


async def test_two_hundred_four_way_races_each_end_in_one_state_with_one_result(
    service_process: Any, db: Any
) -> None:
    service = service_process()
    rng = random.Random(20261130)
    outcomes: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=service.base_url, limits=limits, timeout=30) as client:
        for batch_start in range(0, RACES, BATCH):
            races = await asyncio.gather(
                *(
                    _race(client, f"race-{index}", leave=index % 2 == 0, rng=rng)
                    for index in range(batch_start, batch_start + BATCH)
                )
            )
            for race in races:
                operation_id = race["started"]["operation"]["operation_id"]
                operation = (await client.get(f"/v1/operations/{operation_id}", headers=AGENT)).json()
                rows = db.execute(
                    "SELECT count(*) AS n FROM outbox WHERE tool_call_id = %s",
                    [race["started"]["tool_call_id"]],
                ).fetchone()["n"]
                outcomes[_check(race, operation, rows)] += 1
    assert sum(outcomes.values()) == RACES
    focusing = db.execute("SELECT count(*) AS n FROM operations WHERE state = 'focusing'").fetchone()["n"]
    assert focusing == 0
    open_instances = db.execute("SELECT count(*) AS n FROM app_instances WHERE status = 'open'").fetchone()[
        "n"
    ]
    assert open_instances == 0
    print(f"\n{RACES} four-way races: {dict(outcomes)}")
    # The jitter straddles ends_at: the races are real only if more than one kind of winner shows up.
    assert len(outcomes) >= 2, outcomes
