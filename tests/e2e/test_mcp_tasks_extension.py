"""Tasks at 2026-07-28 (the extension ``io.modelcontextprotocol/tasks``) on a real ``serve``
process, on the plain JSON-RPC wire as the extension's examples show it: a declared call answers a
``CreateTaskResult`` that ``tasks/get`` already finds, the finished task carries the relay's result,
``tasks/cancel`` is the Agent's interrupt acknowledged whoever wins, and a task of another
conversation, an undeclared request or a mismatched ``Mcp-Name`` are refused as the extension says."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from harness.calls import expire
from harness.database import DatabaseFactory
from harness.mcp import bound, modern_wire
from tests.conftest import HOST, ServiceProcess, service_on_own_database

pytestmark = pytest.mark.e2e

DB = psycopg.Connection[dict[str, Any]]


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with service_on_own_database(database_factory, tmp_path_factory.mktemp("mcp-ext")) as process:
        yield process


@pytest.fixture
def db(service: ServiceProcess) -> Iterator[DB]:
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def conversation() -> str:
    return f"ext-{uuid.uuid4()}"


def start(cid: str, seconds: int = 1500, call_id: str | None = None) -> dict[str, Any]:
    return {
        "name": "pomodoro.start",
        "arguments": {"duration_seconds": seconds, "activity": "deep work"},
        "_meta": bound(cid, call_id),
    }


def ask(cid: str, call_id: str) -> dict[str, Any]:
    return {
        "name": "interact.ask",
        "arguments": {"prompt": "Tea or coffee?", "choices": ["tea", "coffee"]},
        "_meta": bound(cid, call_id),
    }


def outbox_rows(db: DB, cid: str) -> list[dict[str, Any]]:
    return db.execute("SELECT * FROM outbox WHERE conversation_id = %s", [cid]).fetchall()


async def test_a_declared_start_answers_a_task_that_any_get_finds_at_once(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        created = await wire.result("tools/call", start(cid))
        got = await wire.result("tasks/get", {"taskId": created["taskId"]})
    row = db.execute("SELECT * FROM operations WHERE conversation_id = %s", [cid]).fetchone()
    assert row is not None
    assert created["resultType"] == "task" and got["resultType"] == "complete"
    assert created["taskId"] == got["taskId"] == str(row["operation_id"])
    assert created["status"] == got["status"] == "working"
    assert created["ttlMs"] is None and created["pollIntervalMs"] > 0
    assert datetime.fromisoformat(got["createdAt"]) == row["started_at"]
    assert "result" not in got
    assert created["_meta"]["io.lineup/http_status"] == 202
    assert created["_meta"]["io.lineup/tool_call_id"] == row["tool_call_id"]


async def test_without_the_declaration_the_call_answers_the_tool_result(service: ServiceProcess) -> None:
    cid = conversation()
    async with modern_wire(service.base_url, declares_tasks=False) as wire:
        result = await wire.result("tools/call", start(cid))
    assert result["resultType"] == "complete" and "taskId" not in result
    assert result["structuredContent"]["status"] == "accepted"


async def test_cancel_is_the_agents_interrupt_and_the_finished_task_carries_the_relays_result(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        cancelled = await wire.result("tasks/cancel", {"taskId": task_id})
        again = await wire.result("tasks/cancel", {"taskId": task_id})
        got = await wire.result("tasks/get", {"taskId": task_id})
    assert cancelled == again == {"resultType": "complete", "_meta": cancelled["_meta"]}
    rows = outbox_rows(db, cid)
    assert len(rows) == 1
    assert got["status"] == "completed" and got["statusMessage"] == "interrupted (agent_interrupt)"
    assert got["result"]["structuredContent"] == rows[0]["payload"]["result"]
    assert got["result"]["isError"] is False and got["result"]["content"][0]["type"] == "text"
    assert datetime.fromisoformat(got["lastUpdatedAt"]) > datetime.fromisoformat(got["createdAt"])


async def test_a_cancel_after_the_deadline_is_acknowledged_and_the_period_completed(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        expire(db, task_id)
        cancelled = await wire.result("tasks/cancel", {"taskId": task_id})
        got = await wire.result("tasks/get", {"taskId": task_id})
    assert cancelled["resultType"] == "complete"
    assert got["status"] == "completed"
    assert got["result"]["structuredContent"]["reason"] == "deadline_reached"
    assert [row["payload"]["result"] for row in outbox_rows(db, cid)] == [got["result"]["structuredContent"]]


async def test_a_task_past_its_deadline_is_settled_by_the_get_that_reads_it(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        expire(db, task_id)
        got = await wire.result("tasks/get", {"taskId": task_id})
    assert got["status"] == "completed" and got["statusMessage"] == "completed (deadline_reached)"
    assert len(outbox_rows(db, cid)) == 1


async def test_an_undeclared_task_request_is_missing_required_client_capability(
    service: ServiceProcess,
) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/cancel", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
        ):
            answer = await wire.post(method, params, declares_tasks=False)
            assert answer.status_code == 400
            error = answer.json()["error"]
            assert error["code"] == -32021
            assert error["data"] == {
                "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
            }
        still = await wire.result("tasks/get", {"taskId": task_id})
    assert still["status"] == "working"


async def test_unknown_tasks_and_tasks_of_another_conversation_answer_alike(service: ServiceProcess) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        mine = await wire.result("tasks/get", {"taskId": task_id, "_meta": bound(cid)})
        errors = []
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            for unknown, meta in (
                (str(uuid.uuid4()), {}),
                ("not-a-uuid", {}),
                (task_id, bound(conversation())),
            ):
                params: dict[str, Any] = {"taskId": unknown, "_meta": meta}
                if method == "tasks/update":
                    params["inputResponses"] = {"name": {"action": "accept", "content": {"input": "x"}}}
                error = await wire.error(method, params)
                errors.append((error["code"], error["message"].replace(unknown, "<id>")))
        still = await wire.result("tasks/get", {"taskId": task_id})
    assert mine["status"] == still["status"] == "working"  # the foreign cancel changed nothing
    assert set(errors) == {(-32602, "no task '<id>'")}


async def test_an_mcp_name_header_naming_another_task_is_a_header_mismatch(service: ServiceProcess) -> None:
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(conversation())))["taskId"]
        answer = await wire.post("tasks/get", {"taskId": task_id}, name=str(uuid.uuid4()))
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32020


async def test_update_is_acknowledged_and_changes_nothing(service: ServiceProcess) -> None:
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(conversation())))["taskId"]
        acknowledged = await wire.result(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {"name": {"action": "accept", "content": {"input": "Luca"}}},
            },
        )
        got = await wire.result("tasks/get", {"taskId": task_id})
    assert acknowledged["resultType"] == "complete" and set(acknowledged) <= {"resultType", "_meta"}
    assert got["status"] == "working"


async def test_a_refused_start_is_the_tools_result_and_a_replay_is_the_same_task(
    service: ServiceProcess,
) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        first = await wire.result("tools/call", start(cid))
        refused = await wire.result("tools/call", start(cid))
        replayed = await wire.result(
            "tools/call", start(cid, call_id=first["_meta"]["io.lineup/tool_call_id"])
        )
        await wire.result("tasks/cancel", {"taskId": first["taskId"]})
        replayed_final = await wire.result(
            "tools/call", start(cid, call_id=first["_meta"]["io.lineup/tool_call_id"])
        )
    assert refused["resultType"] == "complete" and refused["isError"] is True
    assert refused["structuredContent"]["error"] == "operation_already_focusing"
    assert replayed["resultType"] == "task" and replayed["taskId"] == first["taskId"]
    assert replayed_final["taskId"] == first["taskId"] and replayed_final["status"] == "completed"


async def test_an_interaction_is_a_task_until_the_person_answers(service: ServiceProcess, db: DB) -> None:
    cid = conversation()
    call_id = f"ask-{uuid.uuid4()}"
    async with modern_wire(service.base_url) as wire:
        asked = ask(cid, call_id)
        created = await wire.result("tools/call", asked)
        replayed = await wire.result("tools/call", asked)
        cancelled = await wire.result("tasks/cancel", {"taskId": created["taskId"]})
        waiting = await wire.result("tasks/get", {"taskId": created["taskId"]})
        async with httpx.AsyncClient(timeout=10) as http:
            answered = await http.post(
                f"{service.base_url}/v1/host/interactions/{call_id}/answer",
                json={"answer": "tea"},
                headers=HOST,
            )
        assert answered.status_code == 200, answered.text
        got = await wire.result("tasks/get", {"taskId": created["taskId"]})
    assert created["resultType"] == "task" and replayed["taskId"] == created["taskId"]
    assert uuid.UUID(created["taskId"]) and call_id not in created["taskId"]
    assert cancelled["resultType"] == "complete" and waiting["status"] == "working"
    rows = outbox_rows(db, cid)
    assert len(rows) == 1
    assert got["status"] == "completed" and got["result"]["structuredContent"] == rows[0]["payload"]["result"]
    assert got["result"]["structuredContent"]["answer"] == "tea"


async def test_tasks_result_is_not_a_method_of_the_extension(service: ServiceProcess) -> None:
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(conversation())))["taskId"]
        error = await wire.error("tasks/result", {"taskId": task_id})
    assert error["code"] == -32601


async def test_server_discover_advertises_the_extension(service: ServiceProcess) -> None:
    async with modern_wire(service.base_url) as wire:
        discovered = await wire.result("server/discover", {})
    assert discovered["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"] == {}
    assert discovered["capabilities"]["tools"].get("listChanged") in (None, False)


async def test_concurrent_cancels_of_one_task_end_it_once(service: ServiceProcess, db: DB) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        answers = await asyncio.gather(*(wire.result("tasks/cancel", {"taskId": task_id}) for _ in range(8)))
        got = await wire.result("tasks/get", {"taskId": task_id})
    assert {answer["resultType"] for answer in answers} == {"complete"}
    assert got["result"]["structuredContent"]["reason"] == "agent_interrupt"
    assert len(outbox_rows(db, cid)) == 1


SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


async def test_a_listen_stream_pushes_each_task_now_then_once_final_then_ends(
    service: ServiceProcess, db: DB
) -> None:
    cid = conversation()
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(cid)))["taskId"]
        wanted = [task_id, str(uuid.uuid4()), "not-a-task"]
        async with wire.stream("subscriptions/listen", {"notifications": {"taskIds": wanted}}) as stream:
            messages = stream.messages()
            acknowledged = await anext(messages)
            now = await anext(messages)
            await wire.result("tasks/cancel", {"taskId": task_id})
            final = await asyncio.wait_for(anext(messages), 10)
            ended = await asyncio.wait_for(anext(messages), 10)
        got = await wire.result("tasks/get", {"taskId": task_id})
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"taskIds": [task_id]}
    subscription = acknowledged["params"]["_meta"][SUBSCRIPTION]
    assert now["method"] == final["method"] == "notifications/tasks"
    assert now["params"]["taskId"] == task_id and now["params"]["status"] == "working"
    assert final["params"]["_meta"][SUBSCRIPTION] == subscription
    assert {k: v for k, v in final["params"].items() if k != "_meta"} == {
        k: v for k, v in got.items() if k not in ("_meta", "resultType")
    }
    assert final["params"]["result"]["structuredContent"] == outbox_rows(db, cid)[0]["payload"]["result"]
    assert ended["id"] == acknowledged["params"]["_meta"][SUBSCRIPTION] and "result" in ended


async def test_listening_for_tasks_without_the_declaration_is_missing_required_client_capability(
    service: ServiceProcess,
) -> None:
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", start(conversation())))["taskId"]
        answer = await wire.post(
            "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, declares_tasks=False
        )
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32021
