"""The fourth security review's medium finding, against a real ``serve`` and a real authorization
server (oidc-provider): a person's tool calls over MCP spend write allowances — per conversation
and per person, refused calls too — with the Host API's 429 and Retry-After as a tool result,
while the Agent keeps its own (by default unlimited) budget."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from harness.mcp import bound, mcp_session
from service.mcp.binding import person_conversation_id
from tests.conftest import ServiceProcess
from tests.support.oauth_service import SCOPE, service_for_issuer
from tests.support.oidc import MACHINE_CLIENT, AuthorizationServer, authorization_server

pytestmark = pytest.mark.e2e

LIMIT = 6
START = {"duration_seconds": 1500, "activity": "write report"}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("person-limits")


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
        WRITE_LIMIT_TOOL_CALLS=str(LIMIT),
        WRITE_LIMIT_WINDOW_SECONDS="86400",  # one window for the whole test
    ) as process:
        yield process


def _count(service: ServiceProcess, table: str, conversation_id: str) -> int:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        row = db.execute(
            f"SELECT count(*) AS n FROM {table} WHERE conversation_id = %s",
            [conversation_id],
        ).fetchone()
    assert row is not None
    return int(row["n"])


async def test_a_persons_calls_spend_an_allowance_and_past_it_answer_429_with_retry_after(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    token = idp.token(MACHINE_CLIENT, f"{service.base_url}/mcp", scope=SCOPE)
    own = person_conversation_id(idp.issuer, MACHINE_CLIENT)
    first = f"first-{uuid.uuid4().hex[:8]}"
    async with mcp_session(service.base_url, token) as mcp:
        call = mcp.session.call_tool
        answers = [
            await call("pomodoro.start", START, meta=bound(own, first)),
            await call("pomodoro.start", START),  # refused (409, recorded): it spends too
            await call("pomodoro.interrupt", {}),
            await call("pomodoro.start", START),
            await call("pomodoro.start", START),
            await call("pomodoro.interrupt", {}),
        ]
        over = await call("pomodoro.start", START)
        again = await call("pomodoro.interrupt", {})
        replayed = await call("pomodoro.start", START, meta=bound(own, first))  # a replay spends nothing
    assert [a.is_error for a in answers] == [False, True, False, False, True, False]
    for refused in (over, again):
        assert refused.is_error is True
        body = refused.structured_content
        assert body is not None and body["error"] == "too_many_requests", body
        assert body["retry_after_seconds"] >= 1
        assert refused.meta is not None and refused.meta["io.lineup/http_status"] == 429
    assert replayed.is_error is False
    assert replayed.structured_content == answers[0].structured_content
    # Nothing of the refused calls was recorded or sent: six answers, two results for the Agent.
    assert _count(service, "tool_calls", own) == LIMIT
    assert _count(service, "outbox", own) == 2


async def test_the_agent_keeps_its_own_budget_unlimited_by_default(service: ServiceProcess) -> None:
    conversation = f"conv-agent-{uuid.uuid4().hex[:8]}"
    async with mcp_session(service.base_url) as mcp:
        answers = []
        for _ in range(2 * LIMIT):
            answers.append(await mcp.session.call_tool("pomodoro.start", START, meta=bound(conversation)))
            answers.append(await mcp.session.call_tool("pomodoro.interrupt", {}, meta=bound(conversation)))
    assert all(a.is_error is False for a in answers)
    assert _count(service, "tool_calls", conversation) == 4 * LIMIT
