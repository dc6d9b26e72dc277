"""The demo Agent speaking MCP (``DEMO_AGENT_PROTOCOL=mcp``) to a real service: its calls land in the
same records as REST ones, a repeated message replays, and a lost session is opened again."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from demo_agent.conversations import DemoAgent
from demo_agent.mcp_client import McpLineup, McpTools
from tests.conftest import AGENT_TOKEN, HOST_TOKEN, ServiceProcess

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def mcp_agent(base_url: str) -> AsyncIterator[tuple[DemoAgent, McpTools]]:
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        tools = McpTools(base_url, AGENT_TOKEN)
        session = asyncio.create_task(tools.run(stop))
        try:
            yield DemoAgent(McpLineup(http, tools, AGENT_TOKEN, HOST_TOKEN)), tools
        finally:
            stop.set()
            await session


def message(text: str) -> dict[str, Any]:
    return {"message_id": str(uuid.uuid4()), "role": "user", "text": text, "sub_session_id": None}


async def test_the_demo_agent_starts_and_stops_a_focus_period_over_mcp(
    service_process: Callable[..., ServiceProcess], database_url: str
) -> None:
    service = service_process()
    cid = f"demo-mcp-{uuid.uuid4()}"
    start = message("focus 25 minutes on writing")
    async with mcp_agent(service.base_url) as (agent, _):
        started = await agent.answer(cid, start)
        replayed = await agent.answer(cid, start)
        stopped = await agent.answer(cid, message("stop"))
    assert started == replayed and "25 min" in started
    assert "stopped" in stopped.lower() or "focused" in stopped.lower()
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as db:
        row = db.execute("SELECT * FROM operations WHERE conversation_id = %s", [cid]).fetchone()
        calls = db.execute("SELECT tool_call_id FROM tool_calls WHERE conversation_id = %s", [cid]).fetchall()
    assert row is not None and row["tool_call_id"] == f"demo-{start['message_id']}"
    assert (row["state"], row["reason"]) == ("interrupted", "agent_interrupt")
    assert len(calls) == 2


async def test_after_a_service_restart_the_demo_agent_opens_a_new_mcp_session(
    service_process: Callable[..., ServiceProcess], database_url: str, tmp_path: Path
) -> None:
    first = service_process()
    cid = f"demo-mcp-{uuid.uuid4()}"
    async with mcp_agent(first.base_url) as (agent, _):
        assert "25 min" in await agent.answer(cid, message("focus 25 minutes"))
        first.kill()
        second = ServiceProcess(database_url, tmp_path)
        second.port = first.port  # the address the agent knows
        second.start()
        try:
            # The first call after the restart finds the old session gone and fails (it may not have
            # reached the service): sent again, the same message opens a new session and is answered.
            stop = message("stop")
            failures = 0
            deadline = time.monotonic() + 30
            while True:
                try:
                    reply = await agent.answer(cid, stop)
                    break
                except httpx.HTTPError:
                    failures += 1
                    assert time.monotonic() < deadline, "no new MCP session within 30 s"
                    await asyncio.sleep(0.2)
        finally:
            second.stop()
    assert "stopped" in reply.lower() or "focused" in reply.lower()
    assert failures <= 1  # only the call that met the lost session
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as db:
        row = db.execute("SELECT state, reason FROM operations WHERE conversation_id = %s", [cid]).fetchone()
    assert row is not None and (row["state"], row["reason"]) == ("interrupted", "agent_interrupt")
