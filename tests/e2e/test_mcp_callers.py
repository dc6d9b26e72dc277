"""The fourth security review's attribution finding, against a real ``serve`` and a real
authorization server (oidc-provider): every recorded call names its caller, a person's interrupt
says so (``person_interrupt``), and a person's tool call ids live in a namespace the server gives
them, so a person can never take the Agent's id (nor its ``Idempotency-Key``) — while the Agent's
own calls answer exactly as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from harness.mcp import bound, mcp_session
from service.mcp.binding import person_conversation_id, person_namespace
from tests.conftest import AGENT, ServiceProcess
from tests.support.oauth_service import SCOPE, service_for_issuer
from tests.support.oidc import MACHINE_CLIENT, AuthorizationServer, authorization_server

pytestmark = pytest.mark.e2e

START = {"duration_seconds": 1500, "activity": "write report"}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("callers")


@pytest.fixture(scope="module")
def idp(logs: Path) -> Iterator[AuthorizationServer]:
    with authorization_server(logs) as server:
        yield server


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, logs: Path, idp: AuthorizationServer
) -> Iterator[ServiceProcess]:
    with service_for_issuer(
        database_factory,
        logs,
        idp.issuer,
    ) as process:
        yield process


def _rows(service: ServiceProcess, query: str, conversation_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        return db.execute(query, [conversation_id]).fetchall()


async def test_each_call_names_its_caller_and_a_persons_ids_never_meet_the_agents(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    token = idp.token(MACHINE_CLIENT, f"{service.base_url}/mcp", scope=SCOPE)
    own = person_conversation_id(idp.issuer, MACHINE_CLIENT)
    namespace = person_namespace(idp.issuer, MACHINE_CLIENT, MACHINE_CLIENT)
    async with mcp_session(service.base_url, token) as mcp:
        started = await mcp.session.call_tool("pomodoro.start", START, meta=bound(own, "same-id"))
        stopped = await mcp.session.call_tool("pomodoro.interrupt", {})
        # A replay by the id the server answered with finds the same call.
        assert started.meta is not None
        replayed = await mcp.session.call_tool(
            "pomodoro.start", START, meta=bound(own, started.meta["io.lineup/tool_call_id"])
        )
    assert started.is_error is False and stopped.is_error is False, (started, stopped)
    assert started.meta["io.lineup/tool_call_id"] == f"{namespace}same-id"
    assert started.structured_content is not None
    assert started.structured_content["tool_call_id"] == f"{namespace}same-id"
    assert stopped.meta is not None and stopped.meta["io.lineup/tool_call_id"].startswith(f"{namespace}mcp-")
    assert replayed.structured_content == started.structured_content
    # The Agent, in the same conversation, under the same id the person sent: its own call, with
    # today's answer (before, the person's record answered it 409 idempotency_key_reused).
    async with httpx.AsyncClient(base_url=service.base_url, headers=AGENT, timeout=10) as agent:
        body = {
            "tool_call_id": "same-id",
            "conversation_id": own,
            "tool": "pomodoro.start",
            "arguments": START,
        }
        agents_start = await agent.post("/v1/tool-calls", json=body)
        body = {
            "tool_call_id": "agent-stop",
            "conversation_id": own,
            "tool": "pomodoro.interrupt",
            "arguments": {},
        }
        agents_stop = await agent.post("/v1/tool-calls", json=body)
    assert agents_start.status_code == 202, agents_start.text
    assert agents_start.json()["tool_call_id"] == "same-id"
    assert agents_stop.status_code == 200 and agents_stop.json()["status"] == "interrupted", agents_stop.text

    calls = _rows(
        service, "SELECT tool_call_id, tool, caller FROM tool_calls WHERE conversation_id = %s", own
    )
    person = {"kind": "person", "issuer": idp.issuer, "subject": MACHINE_CLIENT, "client_id": MACHINE_CLIENT}
    by_id = {row["tool_call_id"]: row["caller"] for row in calls}
    assert by_id[f"{namespace}same-id"] == person
    assert by_id[stopped.meta["io.lineup/tool_call_id"]] == person
    assert by_id["same-id"] == {"kind": "agent"} and by_id["agent-stop"] == {"kind": "agent"}
    ended = _rows(
        service,
        "SELECT tool_call_id, reason FROM operations WHERE conversation_id = %s ORDER BY started_at",
        own,
    )
    assert [(row["tool_call_id"], row["reason"]) for row in ended] == [
        (f"{namespace}same-id", "person_interrupt"),
        ("same-id", "agent_interrupt"),
    ]
    # One result each, under two different ids: the webhook's Idempotency-Key is the tool call id.
    results = _rows(
        service,
        "SELECT tool_call_id, payload -> 'result' ->> 'reason' AS reason FROM outbox"
        " WHERE conversation_id = %s ORDER BY created_at",
        own,
    )
    assert [(row["tool_call_id"], row["reason"]) for row in results] == [
        (f"{namespace}same-id", "person_interrupt"),
        ("same-id", "agent_interrupt"),
    ]
    # operation_status reads a call a person names by their own id, in their namespace: the
    # person's "same-id" is theirs, never the Agent's call under the same id.
    async with mcp_session(service.base_url, token) as mcp:
        theirs = await mcp.session.call_tool("operation_status", {"tool_call_id": "same-id"})
        by_answer = await mcp.session.call_tool("operation_status", {"tool_call_id": f"{namespace}same-id"})
    assert theirs.structured_content is not None
    assert (theirs.structured_content["tool_call_id"], theirs.structured_content["reason"]) == (
        f"{namespace}same-id",
        "person_interrupt",
    )
    assert by_answer.structured_content == theirs.structured_content
