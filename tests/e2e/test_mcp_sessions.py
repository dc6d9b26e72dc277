"""MCP sessions capped per principal (service.mcp.sessions), against a real service and a real
authorization server (oidc-provider, tests/support/oidc.py): one person's ``initialize`` loop
fills their own share, never the table; the Agent keeps room of its own."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness import processes
from harness.database import DatabaseFactory, with_database
from harness.mcp import INITIALIZE, MODERN, ModernWire
from tests.conftest import AGENT_TOKEN, OPERATOR, ServiceProcess
from tests.support.oidc import MACHINE_CLIENT, SHORT_CLIENT, AuthorizationServer, authorization_server

pytestmark = pytest.mark.e2e

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
SECOND_AGENT_TOKEN = "second-agent-token-for-tests-2"
PER_PERSON, PER_AGENT_TOKEN, MAX, RESERVED = 2, 2, 7, 3  # persons together: at most 4


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sessions")


@pytest.fixture(scope="module")
def idp(logs: Path) -> Iterator[AuthorizationServer]:
    with authorization_server(logs) as server:
        yield server


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, logs: Path, idp: AuthorizationServer
) -> Iterator[ServiceProcess]:
    name = database_factory.create()
    process = ServiceProcess(
        with_database(database_factory.server, name),
        logs,
        AGENT_TOKEN=f"{AGENT_TOKEN} {SECOND_AGENT_TOKEN}",
        MCP_OAUTH_ISSUER=idp.issuer,
        MCP_OAUTH_SCOPES="mcp:tools",
        MCP_OAUTH_CLOCK_SKEW_SECONDS="0",
        MCP_SESSIONS_PER_PERSON=str(PER_PERSON),
        MCP_SESSIONS_PER_AGENT_TOKEN=str(PER_AGENT_TOKEN),
        MCP_MAX_SESSIONS=str(MAX),
        MCP_AGENT_RESERVED_SESSIONS=str(RESERVED),
    )
    try:
        processes.ServiceProcess.start(process)
        process.wait_http(f"{process.base_url}/healthz", 90.0)  # a machine shared with others is slow
        yield process
    finally:
        if process.process is not None:
            process.stop()
        database_factory.drop(name)


def person(idp: AuthorizationServer, service: ServiceProcess, client: str | None = None) -> str:
    """An access token of a person of their own: a client registered for it (dynamic client
    registration), its client_credentials token (``sub`` and client are the client's id)."""
    secret = None
    if client is None:
        registered = httpx.post(
            f"{idp.url}/reg",
            json={
                "grant_types": ["client_credentials"],
                "response_types": [],
                "redirect_uris": [],
                "token_endpoint_auth_method": "client_secret_basic",
                "scope": "mcp:tools",
            },
            timeout=10,
        )
        assert registered.status_code == 201, registered.text
        client, secret = registered.json()["client_id"], registered.json()["client_secret"]
    if secret is None:
        return idp.token(client, f"{service.base_url}/mcp")
    answer = httpx.post(
        f"{idp.url}/token",
        data={
            "grant_type": "client_credentials",
            "resource": f"{service.base_url}/mcp",
            "scope": "mcp:tools",
        },
        auth=(client, secret),
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def initialize(service: ServiceProcess, token: str) -> httpx.Response:
    return httpx.post(
        f"{service.base_url}/mcp",
        json=INITIALIZE,
        headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
        timeout=10,
    )


def on_session(service: ServiceProcess, token: str, session: str, method: str = "POST") -> httpx.Response:
    headers = {
        **MCP_HEADERS,
        "Authorization": f"Bearer {token}",
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": "2025-11-25",
    }
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    if method == "DELETE":
        return httpx.delete(f"{service.base_url}/mcp", headers=headers, timeout=10)
    return httpx.post(f"{service.base_url}/mcp", json=listed, headers=headers, timeout=10)


def assert_refused(answer: httpx.Response, status: int, error: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert "mcp-session-id" not in answer.headers and answer.headers["retry-after"]
    body: dict[str, Any] = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32000 and body["error"]["data"]["error"] == error
    return body


def sessions_gauge(service: ServiceProcess) -> dict[str, float]:
    text = httpx.get(f"{service.base_url}/metrics", headers=OPERATOR, timeout=10).text
    return {
        kind: float(value)
        for kind, value in re.findall(r'^lineup_mcp_sessions\{kind="(\w+)"\} (\S+)$', text, re.M)
    }


def test_a_persons_session_ends_when_the_token_that_opened_it_expires(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    """Nothing a person opened outlives their token (its exp plus the leeway, 0 s here): their
    session and its GET stream end; the room it held is given back."""
    for _ in range(5):  # its tokens live 1 s: on a loaded machine one may expire before it is used
        token = idp.token(SHORT_CLIENT, f"{service.base_url}/mcp")
        opened = initialize(service, token)
        if opened.status_code == 200:
            break
    assert opened.status_code == 200, opened.text
    assert opened.headers["mcp-session-id"]
    # Only the session's end (however it ends) gives its count back; nothing else ends it here.
    deadline = time.monotonic() + 60
    while sessions_gauge(service).get("person", 0.0) != 0.0:
        assert time.monotonic() < deadline, "the expired token's session is still open"
        time.sleep(0.2)


def test_one_principal_fills_only_its_own_share_and_the_agent_keeps_room(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    alice = person(idp, service, MACHINE_CLIENT)
    alices = [initialize(service, alice) for _ in range(PER_PERSON)]
    assert [answer.status_code for answer in alices] == [200] * PER_PERSON
    # The loop goes on: refused 429 with a JSON-RPC error body, however often it asks.
    for _ in range(3):
        body = assert_refused(initialize(service, alice), 429, "too_many_sessions")
        assert body["error"]["data"] == {"error": "too_many_sessions", "kind": "person", "limit": PER_PERSON}
        assert f"at most {PER_PERSON} per person" in body["error"]["message"]
    # Her open sessions are unaffected, and a 2026-07-28 request (no session) is not counted.
    assert on_session(service, alice, alices[0].headers["mcp-session-id"]).status_code == 200
    modern = httpx.post(
        f"{service.base_url}/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientInfo": {"name": "wire", "version": "0"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        },
        headers={
            **MCP_HEADERS,
            "Authorization": f"Bearer {alice}",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/list",
        },
        timeout=10,
    )
    assert modern.status_code == 200 and modern.json()["result"]["tools"], modern.text

    # Another person opens theirs; persons together reach their limit (MAX - RESERVED): 503.
    bob = person(idp, service)
    assert [initialize(service, bob).status_code for _ in range(PER_PERSON)] == [200] * PER_PERSON
    assert_refused(initialize(service, person(idp, service)), 503, "unavailable")

    # The Agent still opens sessions, each of its tokens up to its own cap.
    assert [initialize(service, AGENT_TOKEN).status_code for _ in range(PER_AGENT_TOKEN)] == [200, 200]
    body = assert_refused(initialize(service, AGENT_TOKEN), 429, "too_many_sessions")
    assert "per Agent token" in body["error"]["message"]
    assert initialize(service, SECOND_AGENT_TOKEN).status_code == 200
    assert sessions_gauge(service) == {"agent": 3.0, "person": 4.0}
    assert_refused(initialize(service, SECOND_AGENT_TOKEN), 503, "unavailable")  # the process: MAX

    # A session that ends gives its room back.
    assert on_session(service, alice, alices[1].headers["mcp-session-id"], "DELETE").status_code == 200
    assert on_session(service, alice, alices[1].headers["mcp-session-id"]).status_code == 404
    again = initialize(service, alice)
    assert again.status_code == 200 and again.headers["mcp-session-id"]
    assert sessions_gauge(service) == {"agent": 3.0, "person": 4.0}


async def test_a_persons_listen_stream_ends_when_their_token_expires(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    """At 2026-07-28 a person's subscriptions/listen stream on a 25-minute period ends (with its
    result) once the token that opened it expires, not when the period does."""
    resource = f"{service.base_url}/mcp"
    start = {"name": "pomodoro_start", "arguments": {"duration_seconds": 1500}}
    task_id = None
    for _ in range(5):  # its tokens live 1 s: on a loaded machine one may expire before it is used
        token = idp.token(SHORT_CLIENT, resource)
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            answer = await ModernWire(http, resource).post("tools/call", start)
        if answer.status_code == 200:
            task_id = answer.json()["result"]["taskId"]
            break
    assert task_id is not None
    messages: list[dict[str, Any]] = []
    for _ in range(5):
        token = idp.token(SHORT_CLIENT, resource)
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            try:
                listen = {"notifications": {"taskIds": [task_id]}}
                async with ModernWire(http, resource).stream("subscriptions/listen", listen) as stream:
                    messages = [message async for message in stream.messages()]  # until it ends
                break
            except httpx.HTTPStatusError:
                continue  # expired before it was used: another
    assert messages[0]["params"]["notifications"] == {"taskIds": [task_id]}  # honoured: hers
    assert messages[1]["params"]["status"] == "working"
    assert "result" in messages[-1]  # the stream's own answer: it ended
