"""A failed operation's task on a real ``serve`` process, at both revisions, with the test-only
conformance fixtures (tests/fixtures/conformance_app, through APP_FOLDERS) whose jobs their app
fails at the deadline: at 2025-11-25 the task is ``failed`` and ``tasks/result`` is the tool's
``isError`` result or, for ``internal_error``, the JSON-RPC error; at 2026-07-28 a tool execution
error is ``completed`` with ``result.isError`` and a protocol-level one ``failed`` with its error.
Either way the outbox holds the one result the relay delivers, and a person who never took a task
learns it from ``operation_status``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp.shared.exceptions import MCPError
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from harness.mcp import bound, mcp_session, modern_wire
from tests.conftest import ServiceProcess, service_on_own_database

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"
FAILING = "conformance_failing-job"
PROTOCOL = "conformance_protocol-error-job"
DB = psycopg.Connection[dict[str, Any]]


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with service_on_own_database(
        database_factory, tmp_path_factory.mktemp("mcp-failed"), APP_FOLDERS=str(FIXTURES)
    ) as process:
        yield process


@pytest.fixture
def db(service: ServiceProcess) -> Iterator[DB]:
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def outbox(db: DB, cid: str) -> list[dict[str, Any]]:
    return db.execute(
        "SELECT payload FROM outbox WHERE conversation_id = %s ORDER BY sequence", (cid,)
    ).fetchall()


async def test_at_2025_11_25_a_failed_job_is_a_failed_task_whose_result_is_its_error(
    service: ServiceProcess, db: DB
) -> None:
    cid = f"failed-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        failing = await mcp.request(
            "tools/call", {"name": FAILING, "arguments": {}, "task": {"ttl": 60_000}, "_meta": bound(cid)}
        )
        internal = await mcp.request(
            "tools/call", {"name": PROTOCOL, "arguments": {}, "task": {"ttl": 60_000}, "_meta": bound(cid)}
        )
        # tasks/result waits for the deadline (about a second), where the read settles it.
        result = await mcp.request("tasks/result", {"taskId": failing["task"]["taskId"]})
        with pytest.raises(MCPError) as raised:
            await mcp.request("tasks/result", {"taskId": internal["task"]["taskId"]})
        got = [await mcp.request("tasks/get", {"taskId": t["task"]["taskId"]}) for t in (failing, internal)]
    assert result["isError"] is True
    assert result["structuredContent"]["state"] == "failed"
    assert result["structuredContent"]["error"]["code"] == "job_failed"
    assert raised.value.error.code == -32603
    assert raised.value.error.message == "The job failed inside: a protocol-level error, for testing"
    assert [task["status"] for task in got] == ["failed", "failed"]
    assert [task["statusMessage"] for task in got] == ["failed (deadline_reached)"] * 2
    # One result each, in the conversation's order (both may be settled by one read: any order).
    by_code = {p["payload"]["result"]["error"]["code"]: p["payload"] for p in outbox(db, cid)}
    assert sorted(by_code) == ["internal_error", "job_failed"]
    assert sorted(p["sequence"] for p in by_code.values()) == [1, 2]
    assert by_code["job_failed"]["result"] == result["structuredContent"]


async def test_at_2026_07_28_a_tool_error_completes_with_is_error_and_a_protocol_error_fails(
    service: ServiceProcess, db: DB
) -> None:
    cid = f"failed-{uuid.uuid4()}"
    async with modern_wire(service.base_url) as wire:
        failing = await wire.result("tools/call", {"name": FAILING, "arguments": {}, "_meta": bound(cid)})
        internal = await wire.result("tools/call", {"name": PROTOCOL, "arguments": {}, "_meta": bound(cid)})
        assert failing["resultType"] == internal["resultType"] == "task"
        # Wait for the ending as operation_status does for a client without tasks (at most 4 s a call).
        status = await wire.result(
            "tools/call",
            {"name": "operation_status", "arguments": {"wait_seconds": 4}, "_meta": bound(cid)},
        )
        failed = await wire.result("tasks/get", {"taskId": failing["taskId"]})
        errored = await wire.result("tasks/get", {"taskId": internal["taskId"]})
    assert status["structuredContent"]["state"] == "failed"
    assert status["structuredContent"]["result"]["error"]["code"] == "internal_error"
    assert failed["status"] == "completed"
    assert failed["result"]["isError"] is True
    assert failed["result"]["structuredContent"]["error"]["code"] == "job_failed"
    assert errored["status"] == "failed"
    assert "result" not in errored
    assert errored["error"]["code"] == -32603
    assert errored["error"]["data"]["state"] == "failed"
    by_code = {p["payload"]["result"]["error"]["code"]: p["payload"]["result"] for p in outbox(db, cid)}
    assert by_code == {
        "job_failed": failed["result"]["structuredContent"],
        "internal_error": errored["error"]["data"],
    }
