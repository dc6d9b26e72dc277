"""Real MCP clients against a real ``serve`` process at 2026-07-28, with the tasks extension: the
``mcp`` SDK's own ``Client`` (its extension hooks: a claim on ``resultType: "task"``) and FastMCP's
client with ``fastmcp-tasks``, a client library written apart from this service. Each starts a focus
period as a task and gets the relay's result object back as the finished tool result."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import fastmcp
import fastmcp_tasks.client
import httpx
import psycopg
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from harness.mcp import TasksExtension, bound
from tests.conftest import AGENT_TOKEN, HOST, ServiceProcess, service_on_own_database
from tests.support.inspector import INSPECTOR

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with service_on_own_database(database_factory, tmp_path_factory.mktemp("mcp-clients")) as process:
        yield process


def conversation() -> str:
    return f"client-{uuid.uuid4()}"


def outbox_results(service: ServiceProcess, cid: str) -> list[dict[str, Any]]:
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as db:
        rows = db.execute("SELECT payload FROM outbox WHERE conversation_id = %s", [cid]).fetchall()
    return [row["payload"]["result"] for row in rows]


async def test_the_sdk_client_declaring_the_extension_gets_the_finished_periods_result(
    service: ServiceProcess,
) -> None:
    cid = conversation()
    tasks = TasksExtension()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    async with (
        http,
        Client(
            streamable_http_client(f"{service.base_url}/mcp", http_client=http), extensions=[tasks]
        ) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("pomodoro.start", {"duration_seconds": 1}, meta=bound(cid))
    assert len(tasks.task_ids) == 1
    assert result.is_error is False
    assert result.structured_content is not None and result.structured_content["reason"] == "deadline_reached"
    assert outbox_results(service, cid) == [result.structured_content]


async def test_the_sdk_clients_ask_resolves_when_the_person_answers(service: ServiceProcess) -> None:
    cid, call_id = conversation(), f"ask-{uuid.uuid4()}"
    tasks = TasksExtension()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})

    async def answer_when_asked() -> None:
        async with httpx.AsyncClient(timeout=10) as host:
            while True:
                answered = await host.post(
                    f"{service.base_url}/v1/host/interactions/{call_id}/answer",
                    json={"answer": "tea"},
                    headers=HOST,
                )
                if answered.status_code == 200:
                    return
                await asyncio.sleep(0.1)

    async with (
        http,
        Client(
            streamable_http_client(f"{service.base_url}/mcp", http_client=http), extensions=[tasks]
        ) as client,
    ):
        asked, _ = await asyncio.gather(
            client.call_tool(
                "interact.ask",
                {"prompt": "Tea or coffee?", "choices": ["tea", "coffee"]},
                meta=bound(cid, call_id),
            ),
            answer_when_asked(),
        )
    assert len(tasks.task_ids) == 1 and call_id not in tasks.task_ids[0]
    assert asked.structured_content is not None and asked.structured_content["answer"] == "tea"
    assert outbox_results(service, cid) == [asked.structured_content]


async def test_fastmcps_task_client_starts_polls_and_cancels_a_period(service: ServiceProcess) -> None:
    cid = conversation()
    async with fastmcp.Client(f"{service.base_url}/mcp", auth=AGENT_TOKEN) as client:
        task = await fastmcp_tasks.client.call_tool_task(
            client, "pomodoro.start", {"duration_seconds": 1500, "activity": "fastmcp"}, meta=dict(bound(cid))
        )
        working = await task.status()
        await task.cancel()
        final = await task.wait(timeout=10)
        result = await task.result()
    assert working.status == "working" and working.task_id == task.task_id
    assert final.status == "completed"
    assert result.structured_content is not None and result.structured_content["reason"] == "agent_interrupt"
    assert outbox_results(service, cid) == [result.structured_content]


async def test_fastmcps_plain_call_waits_for_the_task_transparently(service: ServiceProcess) -> None:
    cid = conversation()
    async with fastmcp.Client(f"{service.base_url}/mcp", auth=AGENT_TOKEN) as client:
        result = await client.call_tool("pomodoro.start", {"duration_seconds": 1}, meta=bound(cid))
    assert result.structured_content is not None and result.structured_content["state"] == "completed"
    assert outbox_results(service, cid) == [result.structured_content]


def inspector(service: ServiceProcess, *args: str) -> dict[str, Any]:
    command = [
        *INSPECTOR,
        "--cli",
        f"{service.base_url}/mcp",
        "--header",
        f"Authorization: Bearer {AGENT_TOKEN}",
        "--format",
        "json",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


@pytest.mark.skipif(shutil.which("npx") is None, reason="the MCP Inspector runs with npx (Node.js)")
def test_the_mcp_inspector_cli_finishes_a_task_at_2026_and_calls_at_2025(service: ServiceProcess) -> None:
    modern, legacy = conversation(), conversation()
    start = ["--method", "tools/call", "--tool-name", "pomodoro_start", "--tool-args-json"]
    finished = inspector(
        service,
        "--protocol-era",
        "modern",
        *start,
        '{"duration_seconds": 1, "activity": "inspector"}',
        "--tool-metadata",
        f"io.lineup/conversation_id={modern}",
    )["result"]
    accepted = inspector(
        service,
        "--protocol-era",
        "legacy",
        *start,
        '{"duration_seconds": 1500}',
        "--tool-metadata",
        f"io.lineup/conversation_id={legacy}",
    )["result"]
    assert finished["isError"] is False and finished["structuredContent"]["reason"] == "deadline_reached"
    assert outbox_results(service, modern) == [finished["structuredContent"]]
    assert accepted["structuredContent"]["status"] == "accepted"
    assert accepted["_meta"]["io.lineup/http_status"] == 202
