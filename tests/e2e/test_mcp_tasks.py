"""Operations as MCP tasks on a real ``serve`` process: the task id is the operation id, its status
is read from the database (across a restart too), cancelling it is the Agent's interrupt through
the one compare-and-set, and its settling is pushed to the session that started it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import httpx
import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from psycopg.rows import dict_row

from harness.calls import interrupt_body
from harness.database import DatabaseFactory
from harness.mcp import McpSession, bound, mcp_session
from tests.conftest import AGENT, ServiceProcess, service_on_own_database

pytestmark = pytest.mark.e2e

DB = psycopg.Connection[dict[str, Any]]


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with service_on_own_database(database_factory, tmp_path_factory.mktemp("mcp-tasks")) as process:
        yield process


@pytest.fixture
def db(service: ServiceProcess) -> Iterator[DB]:
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def conversation() -> str:
    return f"task-{uuid.uuid4()}"


async def start_task(
    mcp: McpSession, cid: str, seconds: int = 1500, call_id: str | None = None
) -> dict[str, Any]:
    params = {
        "name": "pomodoro.start",
        "arguments": {"duration_seconds": seconds, "activity": "deep work"},
        "task": {"ttl": 60_000},
        "_meta": bound(cid, call_id),
    }
    return await mcp.request("tools/call", params)


def operation_row(db: DB, cid: str) -> dict[str, Any]:
    row = db.execute("SELECT * FROM operations WHERE conversation_id = %s", [cid]).fetchone()
    assert row is not None
    return row


def outbox_rows(db: DB, cid: str) -> list[dict[str, Any]]:
    return db.execute("SELECT * FROM outbox WHERE conversation_id = %s", [cid]).fetchall()


async def test_a_task_augmented_start_is_a_task_named_by_its_operation(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        created = await start_task(mcp, cid)
        got = await mcp.request("tasks/get", {"taskId": created["task"]["taskId"]})
    row = operation_row(db, cid)
    assert created["task"]["taskId"] == str(row["operation_id"])
    assert created["task"]["status"] == got["status"] == "working"
    assert created["task"]["ttl"] is None and got["ttl"] is None
    assert datetime.fromisoformat(got["createdAt"]) == row["started_at"]
    assert created["_meta"]["io.lineup/http_status"] == 202


async def test_cancelling_a_task_is_the_agents_interrupt_and_a_final_task_refuses_it(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        task_id = (await start_task(mcp, cid))["task"]["taskId"]
        cancelled = await mcp.request("tasks/cancel", {"taskId": task_id})
        with pytest.raises(MCPError) as again:
            await mcp.request("tasks/cancel", {"taskId": task_id})
        result = await mcp.request("tasks/result", {"taskId": task_id})
        pushed = await asyncio.wait_for(mcp.statuses.get(), 10)
    row = operation_row(db, cid)
    assert (row["state"], row["reason"]) == ("interrupted", "agent_interrupt")
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task_id
    assert again.value.code == -32602 and again.value.data["status"] == "cancelled"
    rows = outbox_rows(db, cid)
    assert len(rows) == 1
    assert result["structuredContent"] == rows[0]["payload"]["result"] == row["result"]
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert (pushed.task_id, pushed.status) == (task_id, "cancelled")


async def test_a_settling_decided_over_rest_is_pushed_to_the_session_that_started_the_task(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        task_id = (await start_task(mcp, cid))["task"]["taskId"]
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.post(
                f"{service.base_url}/v1/tool-calls", json=interrupt_body(cid), headers=AGENT
            )
        assert answer.json()["status"] == "interrupted"
        pushed = await asyncio.wait_for(mcp.statuses.get(), 10)
        got = await mcp.request("tasks/get", {"taskId": task_id})
    assert (pushed.task_id, pushed.status) == (task_id, got["status"]) == (task_id, "cancelled")
    assert pushed.status_message == "interrupted (agent_interrupt)"


async def test_task_result_waits_for_the_deadline_and_reports_completed(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        task_id = (await start_task(mcp, cid, seconds=1))["task"]["taskId"]
        begun = time.monotonic()
        result = await mcp.request("tasks/result", {"taskId": task_id})
        answered = db.execute("SELECT clock_timestamp() AS now").fetchone()
        waited = time.monotonic() - begun
        got = await mcp.request("tasks/get", {"taskId": task_id})
    assert answered is not None
    assert (
        answered["now"] >= operation_row(db, cid)["ends_at"]
    )  # it waited for the deadline, by the database's clock
    assert waited < 10
    assert result["structuredContent"]["state"] == "completed"
    assert result["structuredContent"]["reason"] == "deadline_reached"
    assert got["status"] == "completed"
    assert len(outbox_rows(db, cid)) == 1


async def test_unknown_tasks_and_tools_that_are_no_task_are_protocol_errors(service: ServiceProcess) -> None:
    async with mcp_session(service.base_url) as mcp:
        for task_id in ("not-a-uuid", str(uuid.uuid4())):
            with pytest.raises(MCPError) as unknown:
                await mcp.request("tasks/get", {"taskId": task_id})
            assert unknown.value.code == -32602
        with pytest.raises(MCPError) as not_a_task:
            await mcp.request(
                "tools/call",
                {"name": "pomodoro.interrupt", "arguments": {}, "task": {}, "_meta": bound(conversation())},
            )
    assert not_a_task.value.code == -32601


async def test_a_task_call_that_opens_nothing_answers_the_tools_refusal(service: ServiceProcess) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        first = await start_task(mcp, cid)
        refused = await start_task(mcp, cid)
        replayed = await start_task(mcp, cid, call_id=first["_meta"]["io.lineup/tool_call_id"])
    assert "task" not in refused and refused["isError"] is True
    assert refused["structuredContent"]["error"] == "operation_already_focusing"
    assert refused["structuredContent"]["operation_id"] == first["task"]["taskId"]
    assert replayed["task"]["taskId"] == first["task"]["taskId"]


async def test_a_cancel_racing_the_deadline_agrees_with_the_task_status_and_queues_one_result(
    service: ServiceProcess, db: DB
) -> None:
    conversations = [conversation() for _ in range(8)]
    async with mcp_session(service.base_url) as mcp:
        tasks = [(await start_task(mcp, cid, seconds=1))["task"] for cid in conversations]

        async def cancel_near_the_deadline(index: int, task: dict[str, Any]) -> int:
            """0 when the cancel won, else the JSON-RPC error code it lost with."""
            ends_at = operation_row(db, conversations[index])["ends_at"].timestamp()
            await asyncio.sleep(max(0.0, ends_at - time.time() + (index - 4) * 0.004))
            try:
                await mcp.request("tasks/cancel", {"taskId": task["taskId"]})
            except MCPError as lost:
                return lost.code
            return 0

        codes = await asyncio.gather(*(cancel_near_the_deadline(i, task) for i, task in enumerate(tasks)))
        assert set(codes) <= {0, -32602}
        won = [code == 0 for code in codes]
        statuses = [(await mcp.request("tasks/get", {"taskId": task["taskId"]}))["status"] for task in tasks]
    for cid, cancel_won, status in zip(conversations, won, statuses, strict=True):
        row = operation_row(db, cid)
        expected = ("interrupted", "cancelled") if cancel_won else ("completed", "completed")
        assert (row["state"], status) == expected
        assert len(outbox_rows(db, cid)) == 1


async def test_a_tasks_status_is_read_from_the_database_across_a_restart(
    service_process: Callable[..., ServiceProcess],
) -> None:
    first = service_process()
    cid = conversation()
    async with mcp_session(first.base_url) as mcp:
        task_id = (await start_task(mcp, cid))["task"]["taskId"]
    first.kill()
    second = service_process()
    async with mcp_session(second.base_url) as mcp:
        before = await mcp.request("tasks/get", {"taskId": task_id})
        cancelled = await mcp.request("tasks/cancel", {"taskId": task_id})
        result = await mcp.request("tasks/result", {"taskId": task_id})
        after = await mcp.request("tasks/get", {"taskId": task_id})
    assert before["status"] == "working" and before["taskId"] == task_id
    assert cancelled["status"] == after["status"] == "cancelled"
    assert result["structuredContent"]["reason"] == "agent_interrupt"
    with psycopg.connect(second.database_url, autocommit=True, row_factory=dict_row) as db:
        assert len(outbox_rows(db, cid)) == 1
