"""Persons' sessions on the Host API: minted by the backend, scoped to conversations, revocable.

Two people, Alice and Bob, each with a session scoped to their own conversation: neither can see,
answer, close or stream the other's — checked on every ``/v1/host/*`` route the app serves, read
from the app itself so that a new route cannot be forgotten.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from harness.calls import start_body
from harness.mcp import INITIALIZE
from service.api.host_scope import KEY
from service.app import create_app
from service.manifests import Registry
from tests.conftest import AGENT, HOST, make_settings

Client = AsyncTestClient[Any]
JSON = {"Content-Type": "application/json"}


async def mint(client: Client, *conversation_ids: str, ttl: int = 3600) -> dict[str, Any]:
    response = await client.post(
        "/v1/host/sessions",
        json={"subject": "a person", "conversation_ids": list(conversation_ids), "ttl_seconds": ttl},
        headers=HOST,
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def bearer(session: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {session['session']}"}


async def seed(client: Client, conversation_id: str) -> dict[str, str]:
    """A focusing Pomodoro (its instance) and a pending interaction in the conversation."""
    started = await client.post("/v1/tool-calls", json=start_body(conversation_id), headers=AGENT)
    ask = {
        "tool_call_id": f"ask-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": "interact.ask",
        "arguments": {"prompt": "ok?"},
    }
    assert (await client.post("/v1/tool-calls", json=ask, headers=AGENT)).status_code == 202
    return {
        "conversation_id": conversation_id,
        "instance_id": started.json()["instance_id"],
        "tool_call_id": ask["tool_call_id"],
    }


def host_routes(app: Litestar) -> list[tuple[str, str, dict[str, Any]]]:
    found: list[tuple[str, str, dict[str, Any]]] = []
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path.startswith("/v1/host/"):
            for handler in route.route_handlers:
                for method in sorted(handler.http_methods - {"OPTIONS", "HEAD"}):
                    found.append((method, route.path, dict(handler.opt)))
    return found


def fill(path: str, names: dict[str, str]) -> str:
    return re.sub(r"\{([a-z_]+)(:[a-z]+)?\}", lambda m: names.get(m.group(1), str(uuid.uuid4())), path)


def test_every_host_route_says_where_its_conversation_is(app_for_routes: Litestar) -> None:
    for method, path, opt in host_routes(app_for_routes):
        assert opt.get(KEY) in ("path", "instance", "interaction", "backend"), (method, path)


@pytest.fixture
def app_for_routes(settings: Any, registry: Registry) -> Litestar:
    return create_app(settings, registry, sweeper=False)


async def test_a_session_reaches_its_own_conversations_and_nothing_of_anyone_else(
    client: Client, app_for_routes: Litestar
) -> None:
    alice, bob = await seed(client, "alice"), await seed(client, "bob")
    alice_session = await mint(client, "alice")
    own = await client.get("/v1/host/conversations/alice/workspace", headers=bearer(alice_session))
    assert own.status_code == 200
    assert [i["instance_id"] for i in own.json()["instances"]] == [alice["instance_id"]]

    for method, path, opt in host_routes(app_for_routes):
        url = fill(path, bob)
        response = await client.request(method, url, headers={**bearer(alice_session), **JSON}, json={})
        expected = 401 if opt[KEY] == "backend" else 404
        assert response.status_code == expected, (method, path, response.text)
        assert response.json()["error"] in (
            "unauthorized",
            "unknown_conversation",
            "unknown_instance",
            "unknown_interaction",
        ), (method, path)
    # Bob's things are untouched: his Pomodoro still focuses, his question still waits.
    workspace = (await client.get("/v1/host/conversations/bob/workspace", headers=HOST)).json()
    assert workspace["focusing_operation"] is not None
    assert [i["tool_call_id"] for i in workspace["pending_interactions"]] == [bob["tool_call_id"]]


async def test_a_session_cannot_speak_as_the_agent(client: Client) -> None:
    session = await mint(client, "alice")
    as_agent = await client.post(
        "/v1/host/conversations/alice/messages", json={"role": "agent", "text": "hi"}, headers=bearer(session)
    )
    assert (as_agent.status_code, as_agent.json()["error"]) == (403, "forbidden")
    as_user = await client.post(
        "/v1/host/conversations/alice/messages", json={"role": "user", "text": "hi"}, headers=bearer(session)
    )
    assert as_user.status_code == 201
    backend = await client.post(
        "/v1/host/conversations/alice/messages", json={"role": "agent", "text": "hi"}, headers=HOST
    )
    assert backend.status_code == 201


async def test_a_revoked_or_expired_session_is_refused(client: Client, db: Any) -> None:
    session = await mint(client, "alice")
    url = "/v1/host/conversations/alice/workspace"
    assert (await client.get(url, headers=bearer(session))).status_code == 200
    revoked = await client.delete(f"/v1/host/sessions/{session['session_id']}", headers=HOST)
    assert revoked.status_code == 204
    assert revoked.content == b"" and "content-type" not in revoked.headers
    assert (await client.get(url, headers=bearer(session))).status_code == 401
    assert (await client.delete(f"/v1/host/sessions/{uuid.uuid4()}", headers=HOST)).status_code == 404

    later = await mint(client, "alice", ttl=60)
    assert (await client.get(url, headers=bearer(later))).status_code == 200
    db.execute(
        "UPDATE host_sessions SET created_at = now() - interval '2 hours', "
        "expires_at = now() - interval '1 second' WHERE session_id = %s",
        [later["session_id"]],
    )
    assert (await client.get(url, headers=bearer(later))).status_code == 401


async def test_only_the_backend_mints_and_ends_sessions(client: Client) -> None:
    session = await mint(client, "alice")
    body = {"subject": "x", "conversation_ids": ["alice", "bob"]}
    assert (await client.post("/v1/host/sessions", json=body, headers=bearer(session))).status_code == 401
    assert (await client.post("/v1/host/sessions", json=body, headers=AGENT)).status_code == 401
    ended = await client.delete(f"/v1/host/sessions/{session['session_id']}", headers=bearer(session))
    assert ended.status_code == 401


async def test_the_minted_session_says_whom_and_what_it_reaches(client: Client) -> None:
    session = await mint(client, "a", "b", "a")
    assert session["subject"] == "a person"
    assert session["conversation_ids"] == ["a", "b"]
    assert uuid.UUID(session["session_id"])
    assert session["expires_at"].endswith("Z")
    refused = await client.post(
        "/v1/host/sessions", json={"subject": "x", "conversation_ids": []}, headers=HOST
    )
    assert (refused.status_code, refused.json()["error"]) == (422, "invalid_request")


async def test_without_a_session_secret_minting_is_503(database_url: str, registry: Registry) -> None:
    app = create_app(make_settings(database_url, host_session_secret=None), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        response = await client.post(
            "/v1/host/sessions", json={"subject": "x", "conversation_ids": ["a"]}, headers=HOST
        )
    assert (response.status_code, response.json()["error"]) == (503, "sessions_disabled")


async def test_sign_in_and_out_are_refused_cross_site_and_sign_out_ends_the_session(client: Client) -> None:
    session = await mint(client, "alice")
    cross = await client.post(
        "/host/session", data={"token": session["session"]}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert cross.status_code == 403
    other_origin = await client.post(
        "/host/session", data={"token": session["session"]}, headers={"Origin": "https://evil.example"}
    )
    assert other_origin.status_code == 403
    signed_in = await client.post("/host/session", data={"token": session["session"]}, follow_redirects=False)
    assert signed_in.status_code == 303
    assert (await client.get("/v1/host/conversations/alice/workspace")).status_code == 200
    refused = await client.post("/host/sign-out", headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403
    out = await client.post("/host/sign-out", follow_redirects=False)
    assert out.status_code == 303
    # Ended server-side: the token itself no longer works anywhere.
    workspace = await client.get("/v1/host/conversations/alice/workspace", headers=bearer(session))
    assert workspace.status_code == 401


async def test_api_answers_are_not_stored_nor_sniffed(client: Client) -> None:
    mcp = {**AGENT, "Accept": "application/json, text/event-stream"}
    for response in (
        await client.get("/v1/tools", headers=AGENT),
        await client.get("/v1/host/conversations/x/workspace", headers=HOST),
        await client.get("/v1/tools"),
        await client.post("/mcp", json=INITIALIZE, headers=mcp),
        await client.get("/mcp", headers=mcp),  # 400: no session
        await client.post("/mcp", json=INITIALIZE),  # 401
    ):
        assert response.headers["cache-control"] == "no-store", response.request.url
        assert response.headers["x-content-type-options"] == "nosniff", response.request.url


async def test_an_mcp_refusal_the_sdk_words_as_plain_text_is_the_contract_error(client: Client) -> None:
    response = await client.post(
        "/mcp", content=b"{}", headers={**AGENT, "Content-Type": "text/plain", "Accept": "application/json"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "bad_request", "message": "Invalid Content-Type header"}


async def test_api_docs_are_the_documents_only_unless_the_page_is_turned_on(
    client: Client, database_url: str, registry: Registry
) -> None:
    assert (await client.get("/schema/openapi.json")).status_code == 200
    assert (await client.get("/schema/openapi.yaml")).status_code == 200
    for page in ("/schema/swagger", "/schema/elements", "/schema/rapidoc", "/schema/redoc", "/schema/x"):
        refused = await client.get(page)
        assert refused.status_code == 404, page
        assert refused.json()["error"] == "not_found"
        assert refused.headers["cache-control"] == "no-store"
    app = create_app(make_settings(database_url, api_docs_ui=True), registry, sweeper=False)
    async with AsyncTestClient(app=app) as with_ui:
        swagger = await with_ui.get("/schema/swagger")
        assert swagger.status_code == 200
        assert "https://" not in swagger.text  # nothing from a CDN
        csp = swagger.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        script = await with_ui.get("/schema/ui/swagger-ui-bundle.js")
        assert script.status_code == 200
        assert (await with_ui.get("/schema/ui/index.html")).status_code == 404


async def test_a_session_answers_its_own_interaction_of_an_id_asked_elsewhere_too(client: Client) -> None:
    """The same tool_call_id in Alice's and Bob's conversations: Alice's session reaches only hers,
    so the id alone names one; naming Bob's conversation is refused as if it did not exist."""
    for conversation_id in ("alice", "bob"):
        ask = {
            "tool_call_id": "ask-shared",
            "conversation_id": conversation_id,
            "tool": "interact.ask",
            "arguments": {"prompt": "ok?"},
        }
        assert (await client.post("/v1/tool-calls", json=ask, headers=AGENT)).status_code == 202
    alice_session = await mint(client, "alice")
    url = "/v1/host/interactions/ask-shared/answer"
    refused = await client.post(
        url, params={"conversation_id": "bob"}, json={"answer": "no"}, headers=bearer(alice_session)
    )
    assert refused.status_code == 404
    assert refused.json()["error"] == "unknown_interaction"
    own = await client.post(url, json={"answer": "yes"}, headers=bearer(alice_session))
    assert own.status_code == 200, own.text
    by_backend = await client.post(url, json={"answer": "no"}, headers=HOST)
    assert by_backend.status_code == 409
    assert by_backend.json()["error"] == "ambiguous_tool_call_id"
