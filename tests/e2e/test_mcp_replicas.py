"""Two ``serve`` replicas on one database behind nginx: tasks need no affinity at 2026-07-28, and a
2025-11-25 session whose replica goes away is re-opened by its client with its tasks intact.

A 2026-07-28 task is started through round-robin on one replica, then read and cancelled through
the other (``X-Upstream`` names the replica of each answer): one task, one ending, one outbox row.
A 2025-11-25 session lives in one replica's memory, so it goes through the affinity port; when that
replica is killed its session is gone, and a new session on the other replica finds the task."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from harness.mcp import ModernWire, TasksExtension, bound, mcp_session, modern_wire
from harness.nginx import UPSTREAM_HEADER, Nginx, available, load_balancer
from tests.conftest import AGENT_TOKEN, ServiceProcess, services_on_own_database

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not available(), reason="nginx is not installed (scripts/system-deps.sh installs nginx-light)"
    ),
]


@dataclass
class Replicas:
    services: list[ServiceProcess]
    balancer: Nginx
    database_url: str

    def by_address(self, address: str) -> ServiceProcess:
        return next(s for s in self.services if s.base_url.endswith(f":{address.rsplit(':', 1)[1]}"))


@pytest.fixture(scope="module")
def replicas(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    log_dir = tmp_path_factory.mktemp("replicas")
    with (
        services_on_own_database(database_factory, log_dir, {}, {}) as services,
        load_balancer([f"127.0.0.1:{s.port}" for s in services]) as balancer,
    ):
        yield Replicas(services, balancer, services[0].database_url)


def start(cid: str, seconds: int = 1500) -> dict[str, Any]:
    return {"name": "pomodoro.start", "arguments": {"duration_seconds": seconds}, "_meta": bound(cid)}


async def through_the_other(
    wire: ModernWire, origin: str, method: str, params: dict[str, Any]
) -> httpx.Response:
    """``method`` through the balancer, served by the replica that is not ``origin``: harmless
    ``server/discover`` requests step the round-robin until ``origin`` has just answered."""
    for _ in range(4):
        stepped = await wire.post("server/discover", {})
        if stepped.headers[UPSTREAM_HEADER] == origin:
            break
    answer = await wire.post(method, params)
    assert answer.headers[UPSTREAM_HEADER] != origin
    return answer


def outbox_rows(url: str, cid: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as db:
        return db.execute("SELECT * FROM outbox WHERE conversation_id = %s", [cid]).fetchall()


async def test_a_task_started_on_one_replica_is_read_and_cancelled_through_the_other(
    replicas: Replicas,
) -> None:
    cid = f"replicas-{uuid.uuid4()}"
    async with modern_wire(replicas.balancer.round_robin_url) as wire:
        started = await wire.post("tools/call", start(cid))
        origin = started.headers[UPSTREAM_HEADER]
        task_id = started.json()["result"]["taskId"]
        got = await through_the_other(wire, origin, "tasks/get", {"taskId": task_id})
        cancelled = await through_the_other(wire, origin, "tasks/cancel", {"taskId": task_id})
        final = [await wire.post("tasks/get", {"taskId": task_id}) for _ in range(2)]
    assert got.json()["result"]["status"] == "working"
    assert cancelled.json()["result"] == {
        "resultType": "complete",
        "_meta": cancelled.json()["result"]["_meta"],
    }
    assert {answer.headers[UPSTREAM_HEADER] for answer in final} == {
        f"127.0.0.1:{s.port}" for s in replicas.services
    }
    results = [answer.json()["result"] for answer in final]
    assert results[0]["status"] == results[1]["status"] == "completed"
    assert results[0]["result"] == results[1]["result"]
    rows = outbox_rows(replicas.database_url, cid)
    assert [row["payload"]["result"] for row in rows] == [results[0]["result"]["structuredContent"]]


async def test_the_sdk_client_polls_its_task_across_both_replicas(replicas: Replicas) -> None:
    cid = f"replicas-{uuid.uuid4()}"
    tasks = TasksExtension(poll_seconds=0.1)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    transport = streamable_http_client(f"{replicas.balancer.round_robin_url}/mcp", http_client=http)
    async with http, Client(transport, extensions=[tasks]) as client:
        result = await client.call_tool("pomodoro.start", {"duration_seconds": 1}, meta=bound(cid))
    assert result.structured_content is not None and result.structured_content["reason"] == "deadline_reached"
    polled_on = {
        replica for replica, method, name, _ in replicas.balancer.routed() if name == tasks.task_ids[0]
    }
    assert polled_on == {f"127.0.0.1:{s.port}" for s in replicas.services}
    assert [row["payload"]["result"] for row in outbox_rows(replicas.database_url, cid)] == [
        result.structured_content
    ]


async def test_a_2025_session_whose_replica_goes_away_is_reopened_with_its_tasks(replicas: Replicas) -> None:
    cid = f"replicas-{uuid.uuid4()}"
    params = {
        "name": "pomodoro.start",
        "arguments": {"duration_seconds": 1500},
        "task": {"ttl": 60_000},
        "_meta": bound(cid),
    }
    async with mcp_session(replicas.balancer.affinity_url) as mcp:
        task_id = (await mcp.request("tools/call", params))["task"]["taskId"]
        holder = replicas.by_address(replicas.balancer.routed()[-1][0])
        holder.kill()
        with pytest.raises(Exception):  # noqa: B017, PT011 - the session is gone with its replica
            await mcp.request("tasks/get", {"taskId": task_id})
    try:
        async with mcp_session(replicas.balancer.affinity_url) as reopened:
            before = await reopened.request("tasks/get", {"taskId": task_id})
            cancelled = await reopened.request("tasks/cancel", {"taskId": task_id})
            result = await reopened.request("tasks/result", {"taskId": task_id})
        survivor = replicas.balancer.routed()[-1][0]
    finally:
        holder.start()
    assert survivor != f"127.0.0.1:{holder.port}"
    assert before["status"] == "working" and cancelled["status"] == "cancelled"
    assert [row["payload"]["result"] for row in outbox_rows(replicas.database_url, cid)] == [
        result["structuredContent"]
    ]


async def test_a_cancel_through_one_replica_is_pushed_on_the_other_replicas_listen_stream(
    replicas: Replicas,
) -> None:
    cid = f"replicas-{uuid.uuid4()}"
    async with modern_wire(replicas.balancer.round_robin_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        async with wire.stream("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}) as stream:
            listening_on = stream.source.response.headers[UPSTREAM_HEADER]
            messages = stream.messages()
            await anext(messages)  # the acknowledgement
            assert (await anext(messages))["params"]["status"] == "working"
            await through_the_other(wire, listening_on, "tasks/cancel", {"taskId": task_id})
            pushed = await asyncio.wait_for(anext(messages), 10)
    assert pushed["method"] == "notifications/tasks" and pushed["params"]["status"] == "completed"
    assert pushed["params"]["result"]["structuredContent"]["reason"] == "agent_interrupt"
