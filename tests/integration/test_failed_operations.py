"""An operation that ends in failure (its app's decision: at its deadline, or by a later call of the
app), through the Runtime API any app uses — here the conformance fixtures' failing jobs
(tests/fixtures/conformance_app): settled ``failed`` once by the one compare-and-set whoever races
it, its one outbox row carrying the error, the relay delivering it, its task's ending at both MCP
revisions, and ``operation_status``."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from mcp.shared.exceptions import MCPError
from psycopg.rows import dict_row

from harness.calls import expire
from harness.mcp import ModernWire, bound
from harness.receiver import Receiver, new_secret
from service.app import create_app
from service.db import code
from service.domain.outcomes import Accepted
from service.manifests import Registry
from service.mcp import status
from service.mcp.binding import Binding
from service.mcp.progress import ended_result
from service.mcp.tasks import task_result, task_view
from service.mcp.tasks_extension import detailed
from service.mcp.tools import Answer
from service.settings import Settings
from tests.conftest import AGENT, AGENT_TOKEN, registry_with
from tests.support.outbox import relay_config, running_relay, wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"
FAILING = "conformance.failing-job"
PROTOCOL = "conformance.protocol-error-job"
Client = AsyncTestClient[Any]
Db = psycopg.Connection[dict[str, Any]]


@pytest.fixture
def fixtures_registry(db: Db) -> Registry:
    db.execute((FIXTURES / "decisions.sql").read_text())
    code.declare_tools(db, code.declared_tools([FIXTURES]), only_these=False)
    return registry_with(FIXTURES)


@pytest.fixture
async def client(settings: Settings, fixtures_registry: Registry) -> AsyncIterator[Client]:
    async with AsyncTestClient(app=create_app(settings, fixtures_registry, sweeper=False)) as client:
        yield client


async def start(client: Client, cid: str, tool: str = FAILING) -> dict[str, Any]:
    body = {"tool_call_id": f"call-{uuid.uuid4()}", "conversation_id": cid, "tool": tool, "arguments": {}}
    answer = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert answer.status_code == 202, answer.text
    return dict(answer.json())


def operation(db: Db, operation_id: str) -> dict[str, Any]:
    row = db.execute("SELECT * FROM operations WHERE operation_id = %s", (operation_id,)).fetchone()
    assert row is not None
    return row


def postpone(db: Db, operation_id: str) -> None:
    """Move a job's one-second period a minute ahead, so that no deadline decides before the test's
    own statements do, however slow the machine."""
    db.execute(
        "UPDATE operations SET started_at = started_at + interval '60 s', ends_at = ends_at + interval '60 s'"
        " WHERE operation_id = %s",
        (operation_id,),
    )


def outbox(db: Db, cid: str) -> list[dict[str, Any]]:
    return db.execute("SELECT * FROM outbox WHERE conversation_id = %s ORDER BY sequence", (cid,)).fetchall()


Step = tuple[str, tuple[Any, ...]]


def race(database_url: str, participants: list[list[Step]]) -> list[list[dict[str, Any]]]:
    """Each participant's statements in a transaction of its own (its lock first, as every use case
    takes it), all released at once; the rows each one's last statement got back."""
    barrier = threading.Barrier(len(participants))
    got: list[list[dict[str, Any]]] = [[] for _ in participants]

    def run(index: int) -> None:
        with psycopg.connect(database_url, row_factory=dict_row) as conn:
            barrier.wait()
            for sql, params in participants[index]:
                got[index] = conn.execute(sql, params).fetchall()
            conn.commit()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(participants))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return got


LOCK = "SELECT lock_workspace(%s, false)"
SETTLE_DUE = "SELECT * FROM settle_due(100)"
INTERRUPT = "SELECT * FROM settle_focusing_v2(%s, ARRAY[%s]::uuid[], 'interrupted', 'agent_interrupt')"
FAIL_NOW = "SELECT * FROM app_fail_operation(%s, %s::uuid, 'disk_full', 'The job ran out of disk')"
OVERDUE = "SELECT * FROM settle_if_overdue(%s)"


def locked(cid: str, sql: str, *params: Any) -> list[Step]:
    return [(LOCK, (cid,)), (sql, params)]


async def test_a_job_its_app_fails_at_the_deadline_ends_failed_with_its_error_and_one_result(
    client: Client, db: Db, database_url: str
) -> None:
    cid = f"conv-{uuid.uuid4()}"
    started = await start(client, cid)
    operation_id = started["operation"]["operation_id"]
    focusing = operation(db, operation_id)
    assert focusing["state"] == "focusing"
    assert focusing["failure"] == {
        "code": "job_failed",
        "message": "The job could not finish: it always fails, for testing",
    }
    expire(db, operation_id)

    # The sweeper's batch, a request's deadline rule and the Agent's interrupt, racing: one wins.
    got = race(
        database_url,
        [[(SETTLE_DUE, ())], locked(cid, OVERDUE, cid), locked(cid, INTERRUPT, cid, operation_id)],
    )
    won = [row for rows in got for row in rows if str(row["operation_id"]) == operation_id]
    assert len(won) == 1
    assert (won[0]["state"], won[0]["reason"]) == ("failed", "deadline_reached")

    row = operation(db, operation_id)
    assert (row["state"], row["reason"]) == ("failed", "deadline_reached")
    assert row["lateness_ms"] is not None and row["lateness_ms"] >= 0
    assert row["result"]["error"] == row["failure"]
    (queued,) = outbox(db, cid)
    assert queued["payload"]["result"] == row["result"]
    assert queued["payload"]["operation_id"] == operation_id
    assert queued["tool_call_id"] == started["tool_call_id"]
    # The REST view of the operation names the ending as the outbox does.
    viewed = (await client.get(f"/v1/operations/{operation_id}", headers=AGENT)).json()
    assert (viewed["state"], viewed["done"], viewed["result"]) == ("failed", True, row["result"])


async def test_a_later_call_of_the_app_fails_it_once_whoever_races_it(
    client: Client, db: Db, database_url: str
) -> None:
    conversations = [f"conv-{uuid.uuid4()}" for _ in range(6)]
    ids = [(await start(client, cid))["operation"]["operation_id"] for cid in conversations]
    for operation_id in ids:
        postpone(db, operation_id)
    for cid, operation_id in zip(conversations, ids, strict=True):
        got = race(
            database_url,
            [locked(cid, FAIL_NOW, cid, operation_id), locked(cid, INTERRUPT, cid, operation_id)],
        )
        endings = [(row["state"], row["reason"]) for rows in got for row in rows]
        assert len(endings) == 1
        assert endings[0] in {("failed", "app_failed"), ("interrupted", "agent_interrupt")}
        row = operation(db, operation_id)
        assert (row["state"], row["reason"]) == endings[0]
        (queued,) = outbox(db, cid)
        if row["state"] == "failed":
            assert queued["payload"]["result"]["error"] == {
                "code": "disk_full",
                "message": "The job ran out of disk",
            }
        else:  # interrupted first: its result names no error, byte for byte as before
            assert "error" not in queued["payload"]["result"]
        # Once final, nothing ends it again: no second row.
        again = db.execute(FAIL_NOW, (cid, operation_id)).fetchall()
        assert again == []
        assert len(outbox(db, cid)) == 1


async def test_the_rules_refuse_a_failed_operation_without_its_error_and_a_misshapen_one(
    client: Client, db: Db
) -> None:
    cid = f"conv-{uuid.uuid4()}"
    operation_id = (await start(client, cid))["operation"]["operation_id"]
    postpone(db, operation_id)
    settle = "SELECT settle_focusing_v2(%s, ARRAY[%s]::uuid[], 'failed', %s)"
    with pytest.raises(psycopg.errors.CheckViolation, match="ck_operations_failure"):
        db.execute(
            'UPDATE operations SET failure = \'{"code": "Bad Code", "message": "x"}\' '
            "WHERE operation_id = %s",
            (operation_id,),
        )
    with pytest.raises(psycopg.errors.CheckViolation, match="ck_operations_state_matches_reason"):
        db.execute(settle, (cid, operation_id, "agent_interrupt"))
    db.execute("UPDATE operations SET failure = NULL WHERE operation_id = %s", (operation_id,))
    with pytest.raises(psycopg.errors.CheckViolation, match="ck_operations_failure"):
        db.execute(settle, (cid, operation_id, "app_failed"))
    # Nothing was decided: the operation goes on, with no result queued.
    assert operation(db, operation_id)["state"] == "focusing"
    assert outbox(db, cid) == []


async def test_the_relay_delivers_the_failed_result_in_the_conversations_order(
    client: Client, db: Db, database_url: str
) -> None:
    cid = f"conv-{uuid.uuid4()}"
    first = await start(client, cid)
    expire(db, first["operation"]["operation_id"])
    db.execute(OVERDUE, (cid,))
    second = await start(client, cid, PROTOCOL)
    expire(db, second["operation"]["operation_id"])
    db.execute(OVERDUE, (cid,))
    queued = outbox(db, cid)
    assert [row["sequence"] for row in queued] == [1, 2]
    secret = new_secret()
    with Receiver([secret]) as agent, running_relay(relay_config(database_url, agent.url, [secret])):
        deliveries = agent.wait_for_accepted({str(row["event_id"]) for row in queued})
        wait_until(lambda: all(row["status"] == "delivered" for row in outbox(db, cid)))
    by_sequence = sorted(deliveries, key=lambda d: d.payload["sequence"])
    assert [d.payload for d in by_sequence] == [row["payload"] for row in queued]
    assert [d.payload["result"]["error"]["code"] for d in by_sequence] == ["job_failed", "internal_error"]
    assert {d.payload["result"]["state"] for d in by_sequence} == {"failed"}


def as_task(viewed: dict[str, Any]) -> dict[str, Any]:
    """An operation's REST view as the MCP task code reads it (``service.mcp.tasks.read_task``)."""
    return {**viewed, "task_id": viewed["operation_id"], "kind": "operation"}


async def test_a_failed_tasks_ending_at_both_revisions(client: Client, db: Db) -> None:
    cid = f"conv-{uuid.uuid4()}"
    wire = ModernWire(client, "/mcp")
    wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    created = {}
    for tool in ("conformance_failing-job", "conformance_protocol-error-job"):
        answer = await wire.result("tools/call", {"name": tool, "arguments": {}, "_meta": bound(cid)})
        assert answer["resultType"] == "task"
        created[tool] = answer["taskId"]
        expire(db, answer["taskId"])
    failing, internal = created.values()

    # 2026-07-28: a tool execution error is completed with result.isError; a protocol-level one is
    # failed with its JSON-RPC error and no result.
    got = await wire.result("tasks/get", {"taskId": failing})
    assert got["status"] == "completed"
    assert got["result"]["isError"] is True
    assert got["result"]["structuredContent"]["error"]["code"] == "job_failed"
    got = await wire.result("tasks/get", {"taskId": internal})
    assert got["status"] == "failed"
    assert "result" not in got
    assert got["error"]["code"] == -32603
    assert got["error"]["message"] == "The job failed inside: a protocol-level error, for testing"
    assert got["error"]["data"]["error"]["code"] == "internal_error"

    # 2025-11-25: both are failed tasks; tasks/result is the isError result, or the JSON-RPC error.
    views = {
        key: as_task((await client.get(f"/v1/operations/{key}", headers=AGENT)).json())
        for key in (failing, internal)
    }
    assert task_view(views[failing])["status"] == task_view(views[internal])["status"] == "failed"
    assert task_result(views[failing])["isError"] is True
    with pytest.raises(MCPError) as raised:
        task_result(views[internal])
    assert raised.value.error.code == -32603
    # The extension's wire from the same rows agrees with what the face answered.
    assert detailed(views[failing])["status"] == "completed"
    assert detailed(views[internal])["status"] == "failed"
    # A short operation answered in its own call (await_in_call_seconds): a tool execution error.
    for key, tool in ((failing, FAILING), (internal, PROTOCOL)):
        accepted = Answer(
            tool, Binding(cid, "call-x", False), Accepted, 202, {"operation": {"operation_id": key}}
        )
        in_call = ended_result(accepted, views[key])
        assert in_call["isError"] is True
        assert in_call["structuredContent"] == views[key]["result"]
    assert len(outbox(db, cid)) == 2


async def test_operation_status_answers_the_failed_ending_with_the_relays_result(
    client: Client, db: Db
) -> None:
    cid = f"conv-{uuid.uuid4()}"
    started = await start(client, cid)
    expire(db, started["operation"]["operation_id"])
    wire = ModernWire(client, "/mcp")
    wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    answer = await wire.result(
        "tools/call",
        {"name": status.NAME, "arguments": {"tool_call_id": started["tool_call_id"]}, "_meta": bound(cid)},
    )
    body = answer["structuredContent"]
    assert (body["state"], body["reason"]) == ("failed", "deadline_reached")
    (queued,) = outbox(db, cid)
    assert body["result"] == queued["payload"]["result"]
    assert answer["isError"] is False
    assert "failed (deadline_reached): The job could not finish" in answer["content"][0]["text"]


async def test_the_sweepers_batch_fails_what_its_app_said_fails_and_completes_the_rest(
    client: Client, db: Db
) -> None:
    cid = f"conv-{uuid.uuid4()}"
    failing = (await start(client, cid))["operation"]["operation_id"]
    body = {
        "tool_call_id": f"call-{uuid.uuid4()}",
        "conversation_id": cid,
        "tool": "conformance.slow-compute",
        "arguments": {"seconds": 1},
    }
    computing = (await client.post("/v1/tool-calls", json=body, headers=AGENT)).json()["operation"][
        "operation_id"
    ]
    expire(db, failing, 0.6)
    expire(db, computing, 0.5)
    swept = db.execute("SELECT * FROM settle_due(100)").fetchall()  # claim_due, then settle_claimed
    assert {(str(r["operation_id"]), r["state"]) for r in swept} == {
        (failing, "failed"),
        (computing, "completed"),
    }
    results = [row["payload"]["result"] for row in outbox(db, cid)]
    assert [r["state"] for r in results] == ["failed", "completed"]  # in the order of their deadlines
    assert "error" not in results[1]
    assert results[0]["error"]["code"] == "job_failed"
