"""MCP authorization against a real authorization server (oidc-provider, tests/support/oidc.py):
the whole flow a client does, each refused token, persons kept to their own conversation, and
the Origin check with CORS."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import psycopg
import pytest
from mcp.client import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from psycopg.rows import dict_row
from pydantic import AnyUrl

from harness import processes
from harness.database import DatabaseFactory, with_database
from harness.mcp import INITIALIZE, MODERN, ModernWire, bound, mcp_session
from service.mcp.binding import person_conversation_id
from tests.conftest import AGENT, ServiceProcess
from tests.support.oidc import (
    MACHINE_CLIENT,
    PUBLIC_CLIENT,
    REDIRECT_URI,
    SHORT_CLIENT,
    AuthorizationServer,
    authorization_server,
    sign_in,
)

pytestmark = pytest.mark.e2e

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ALLOWED_ORIGIN = "https://app.example"
SCOPE = "mcp:tools"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("oauth")


@pytest.fixture(scope="module")
def idp(logs: Path) -> Iterator[AuthorizationServer]:
    with authorization_server(logs) as server:
        yield server


@pytest.fixture(scope="module")
def rogue(logs: Path, idp: AuthorizationServer) -> Iterator[AuthorizationServer]:
    """A provider naming itself the issuer, signing with keys the issuer does not publish."""
    with authorization_server(logs, issuer=idp.issuer) as server:
        yield server


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, logs: Path, idp: AuthorizationServer
) -> Iterator[ServiceProcess]:
    name = database_factory.create()
    process = ServiceProcess(
        with_database(database_factory.server, name),
        logs,
        MCP_OAUTH_ISSUER=idp.issuer,
        MCP_OAUTH_SCOPES=SCOPE,
        MCP_OAUTH_CLOCK_SKEW_SECONDS="0",
        MCP_ALLOWED_ORIGINS=ALLOWED_ORIGIN,
    )
    try:
        processes.ServiceProcess.start(process)
        process.wait_http(f"{process.base_url}/healthz", 90.0)  # a machine shared with others is slow
        yield process
    finally:
        if process.process is not None:
            process.stop()
        database_factory.drop(name)


def resource(service: ServiceProcess) -> str:
    return f"{service.base_url}/mcp"


def challenge_params(header: str) -> dict[str, str]:
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def person_token(service: ServiceProcess, login: str) -> str:
    """What an MCP client does for a person, from nothing but the server's URL: the 401's
    challenge, the protected-resource metadata, the authorization server's metadata, the
    authorization code with PKCE at the person's sign-in, and the token for this resource."""
    refused = httpx.post(f"{service.base_url}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=10)
    assert refused.status_code == 401
    challenge = challenge_params(refused.headers["www-authenticate"])
    assert challenge["scope"] == SCOPE
    metadata = httpx.get(challenge["resource_metadata"], timeout=10).json()
    assert metadata["resource"] == resource(service)
    issuer = metadata["authorization_servers"][0]
    server = httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=10).json()
    assert server["issuer"] == issuer and "S256" in server["code_challenge_methods_supported"]
    verifier = secrets.token_urlsafe(48)
    challenge_s256 = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )
    state = secrets.token_urlsafe(16)
    query = urlencode(
        {
            "response_type": "code",
            "client_id": PUBLIC_CLIENT,
            "redirect_uri": REDIRECT_URI,
            "scope": " ".join(metadata["scopes_supported"]),
            "state": state,
            "code_challenge": challenge_s256,
            "code_challenge_method": "S256",
            "resource": metadata["resource"],
        }
    )
    landed = parse_qs(urlsplit(sign_in(f"{server['authorization_endpoint']}?{query}", login)).query)
    assert landed["state"] == [state], landed
    token = httpx.post(
        server["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": landed["code"][0],
            "redirect_uri": REDIRECT_URI,
            "client_id": PUBLIC_CLIENT,
            "code_verifier": verifier,
            "resource": metadata["resource"],
        },
        timeout=10,
    )
    assert token.status_code == 200, token.text
    return str(token.json()["access_token"])


def start_arguments() -> dict[str, Any]:
    return {"duration_seconds": 1500, "activity": "write report"}


def post_mcp(service: ServiceProcess, token: str, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{service.base_url}/mcp",
        json=INITIALIZE,
        headers={**MCP_HEADERS, "Authorization": f"Bearer {token}", **headers},
        timeout=10,
    )


async def test_a_person_signs_in_with_pkce_and_calls_tools_in_their_own_conversation(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    login = f"alice-{uuid.uuid4().hex[:8]}"
    token = person_token(service, login)
    own = person_conversation_id(idp.issuer, login)
    async with mcp_session(service.base_url, token) as mcp:
        started = await mcp.session.call_tool("pomodoro.start", start_arguments())
        named = await mcp.session.call_tool("pomodoro.interrupt", {}, meta=bound(own))
    assert started.is_error is False, started
    assert (
        started.structured_content is not None
        and started.structured_content["operation"]["state"] == "focusing"
    )
    assert named.is_error is False, named
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        rows = db.execute(
            "SELECT DISTINCT conversation_id FROM tool_calls WHERE conversation_id = %s", [own]
        ).fetchall()
    assert rows == [{"conversation_id": own}]


def test_the_protected_resource_metadata_names_the_issuer_and_scopes_at_both_paths(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        answer = httpx.get(f"{service.base_url}{path}", timeout=10)
        assert answer.status_code == 200
        assert answer.json()["resource"] == resource(service)
        assert answer.json()["authorization_servers"] == [idp.issuer]
        assert answer.json()["scopes_supported"] == [SCOPE]
    anonymous = httpx.post(f"{service.base_url}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=10)
    assert anonymous.status_code == 401 and "a person's access token" in anonymous.json()["message"]
    assert "error=" not in anonymous.headers["www-authenticate"]  # no token: a bare challenge (RFC 6750)


@pytest.mark.parametrize(
    ("case", "status", "error", "says"),
    [
        ("wrong_audience", 401, "invalid_token", "aud must be"),
        ("expired", 401, "invalid_token", "expired"),
        ("unknown_key", 401, "invalid_token", "does not publish"),
        ("missing_scope", 403, "insufficient_scope", "lacks the scope mcp:tools"),
        ("not_a_jwt", 401, "invalid_token", "not a JWT"),
        ("other_issuer", 401, "invalid_token", "not of an accepted issuer"),
    ],
)
def test_a_token_this_resource_does_not_take_is_refused_saying_why(
    service: ServiceProcess,
    idp: AuthorizationServer,
    rogue: AuthorizationServer,
    logs: Path,
    case: str,
    status: int,
    error: str,
    says: str,
) -> None:
    if case == "wrong_audience":
        token = idp.token(MACHINE_CLIENT, "https://elsewhere.example/mcp")
    elif case == "expired":
        token = idp.token(SHORT_CLIENT, resource(service))
        time.sleep(2.2)  # it lives 1 s; the service allows no clock skew here
    elif case == "unknown_key":
        token = rogue.token(MACHINE_CLIENT, resource(service))
    elif case == "missing_scope":
        token = idp.token(MACHINE_CLIENT, resource(service), scope="other:read")
    elif case == "not_a_jwt":
        token = "not-a-jwt-but-long-enough"
    else:
        with authorization_server(logs) as other:
            token = other.token(MACHINE_CLIENT, resource(service))
    answer = post_mcp(service, token)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["message"]
    challenge = challenge_params(answer.headers["www-authenticate"])
    assert challenge["error"] == error
    assert challenge["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    # The same resource takes a good token of the same provider.
    assert post_mcp(service, idp.token(MACHINE_CLIENT, resource(service))).status_code == 200


async def test_a_person_never_reaches_another_persons_conversation_task_or_session(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    alice, bob = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("alice", "bob"))
    alices = person_conversation_id(idp.issuer, alice)
    alice_token, bob_token = person_token(service, alice), person_token(service, bob)
    async with mcp_session(service.base_url, alice_token) as mcp:
        started = await mcp.session.call_tool("pomodoro.start", start_arguments())
        assert started.structured_content is not None
        task_id = started.structured_content["operation"]["operation_id"]
        async with mcp_session(service.base_url, bob_token) as other:
            with pytest.raises(MCPError) as named:
                await other.session.call_tool("pomodoro.interrupt", {}, meta=bound(alices))
            assert named.value.code == -32602 and "that person's conversation" in named.value.message
            for method in ("tasks/get", "tasks/cancel", "tasks/result"):
                with pytest.raises(MCPError) as unknown:
                    await other.request(method, {"taskId": task_id})
                assert unknown.value.code == -32602 and "no task" in unknown.value.message, method
            own = await other.session.call_tool("pomodoro.interrupt", {})
            # bob has nothing focusing: his own conversation is empty.
            assert own.structured_content is not None
            assert own.structured_content["status"] == "no_active_focusing_operation", own
    # At 2026-07-28, sessionless: the task methods and the listen are bob's only.
    for method, params in (
        ("tasks/get", {"taskId": task_id}),
        ("tasks/cancel", {"taskId": task_id}),
        ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
        (
            "tools/call",
            {"name": "pomodoro.interrupt", "arguments": {}, "_meta": {"io.lineup/conversation_id": alices}},
        ),
    ):
        answer = modern(service, bob_token, method, params)
        assert "error" in answer and answer["error"]["code"] == -32602, (method, answer)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {bob_token}"}, timeout=30) as http:
        wire = ModernWire(http, resource(service))
        async with wire.stream("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}) as stream:
            acknowledged = await anext(stream.messages())
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"taskIds": []}  # alice's task: not honoured
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        state = db.execute("SELECT state FROM operations WHERE operation_id = %s", [task_id]).fetchone()
    assert state == {"state": "focusing"}
    # The Agent's token still names any conversation, a person's too.
    async with mcp_session(service.base_url) as agent:
        stopped = await agent.call("pomodoro.interrupt", {}, conversation_id=alices)
    assert stopped.is_error is False


def modern(service: ServiceProcess, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "wire", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        **params.get("_meta", {}),
    }
    headers = {
        **MCP_HEADERS,
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    routed = params.get("taskId", params.get("name"))
    if routed is not None:
        headers["Mcp-Name"] = routed
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    answer = httpx.post(f"{service.base_url}/mcp", json=body, headers=headers, timeout=10)
    result: dict[str, Any] = answer.json()
    return result


def test_a_session_opened_by_one_person_is_not_found_for_another(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    alice_token = person_token(service, f"alice-{uuid.uuid4().hex[:8]}")
    bob_token = person_token(service, f"bob-{uuid.uuid4().hex[:8]}")
    opened = post_mcp(service, alice_token)
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    headers = {**MCP_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    for token, expected in (
        (bob_token, 404),
        (AGENT["Authorization"].removeprefix("Bearer "), 404),
        (alice_token, 200),
    ):
        answer = httpx.post(
            f"{service.base_url}/mcp",
            json=listed,
            headers={**headers, "Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert answer.status_code == expected, answer.text


def test_a_present_origin_must_be_allowed_and_an_allowed_one_gets_cors(service: ServiceProcess) -> None:
    url = f"{service.base_url}/mcp"
    evil = httpx.post(
        url, json=INITIALIZE, headers={**MCP_HEADERS, **AGENT, "Origin": "https://evil.example"}, timeout=10
    )
    assert evil.status_code == 403 and evil.json()["error"] == "forbidden"
    assert "access-control-allow-origin" not in evil.headers
    preflight = httpx.options(
        url,
        headers={
            "Origin": ALLOWED_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
        timeout=10,
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "authorization" in preflight.headers["access-control-allow-headers"]
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in preflight.headers
    allowed = httpx.post(
        url, json=INITIALIZE, headers={**MCP_HEADERS, **AGENT, "Origin": ALLOWED_ORIGIN}, timeout=10
    )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    exposed = {name.strip().lower() for name in allowed.headers["access-control-expose-headers"].split(",")}
    assert exposed == {"mcp-session-id", "mcp-protocol-version", "www-authenticate"}
    unauthorized = httpx.post(
        url, json=INITIALIZE, headers={**MCP_HEADERS, "Origin": ALLOWED_ORIGIN}, timeout=10
    )
    assert unauthorized.status_code == 401
    assert unauthorized.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    # Without Origin (a client that is no browser) nothing changes.
    assert httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **AGENT}, timeout=10).status_code == 200


class MemoryStorage:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_mcp_sdk_client_signs_a_person_in_by_itself_and_calls_the_tools(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    """The ``mcp`` SDK's own OAuth client, given only the server's URL: it discovers the metadata,
    registers itself (dynamic client registration), sends the person to sign in, exchanges the
    code (PKCE, resource indicator), and calls the tools with the token."""
    login = f"carol-{uuid.uuid4().hex[:8]}"
    landed: list[str] = []

    async def redirect(url: str) -> None:
        landed.append(await asyncio.to_thread(sign_in, url, login))

    async def callback() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(landed[-1]).query)
        # iss: the authorization response's issuer (RFC 9207), which the SDK checks.
        return AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=resource(service),
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            client_name="lineup tests",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
    )
    http = create_mcp_http_client(auth=auth)
    async with (
        http,
        streamable_http_client(resource(service), http_client=http) as (read, write),
        ClientSession(dispatcher=JSONRPCDispatcher(read, write)) as session,
    ):
        await session.initialize()
        started = await session.call_tool("pomodoro.start", start_arguments())
        stopped = await session.call_tool("pomodoro.interrupt", {})
    assert len(landed) == 1 and storage.tokens is not None and storage.client is not None
    assert started.is_error is False and stopped.is_error is False, (started, stopped)
    assert stopped.structured_content is not None and stopped.structured_content["status"] == "interrupted"
    own = person_conversation_id(idp.issuer, login)
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        calls = db.execute(
            "SELECT tool FROM tool_calls WHERE conversation_id = %s ORDER BY created_at", [own]
        ).fetchall()
    assert [row["tool"] for row in calls] == ["pomodoro.start", "pomodoro.interrupt"]


async def test_a_persons_client_that_cannot_answer_a_question_is_told_so_and_nothing_is_asked(
    service: ServiceProcess, idp: AuthorizationServer
) -> None:
    login = f"dora-{uuid.uuid4().hex[:8]}"
    token = person_token(service, login)
    own = person_conversation_id(idp.issuer, login)
    ask = {"prompt": "Another round?", "choices": ["yes", "no"]}
    # A 2025-11-25 session that declares no elicitation: the question could never come back.
    async with mcp_session(service.base_url, token) as mcp:
        with pytest.raises(MCPError) as refused:
            await mcp.session.call_tool("interact.ask", ask)
        started = await mcp.session.call_tool("pomodoro.start", start_arguments())
    assert refused.value.error.code == -32602
    assert "could never bring the answer back" in refused.value.error.message
    assert started.is_error is False  # the other tools are as ever
    # At 2026-07-28: the tasks extension without elicitation is not enough either.
    modern_refusal = modern(service, token, "tools/call", {"name": "interact.ask", "arguments": ask})
    assert modern_refusal["error"]["code"] == -32602, modern_refusal
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        asked = db.execute(
            "SELECT count(*) AS n FROM interactions WHERE conversation_id = %s", [own]
        ).fetchone()
    assert asked == {"n": 0}
