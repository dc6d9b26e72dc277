"""The Web Host's pages and its session cookie: sign-in, where the cookie counts, the CSRF checks,
and the security headers of every page."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import start_body
from service.web.host_cookie import PLAIN_COOKIE_NAME, SECURE_COOKIE_NAME
from tests.conftest import AGENT, HOST, HOST_TOKEN, make_settings

COOKIE_NAME = PLAIN_COOKIE_NAME  # the test clients speak plain http (COOKIE_SECURE=false)

Client = AsyncTestClient[Any]
JSON = {"Content-Type": "application/json"}


async def mint(client: Client, *conversation_ids: str) -> str:
    """A person's session for these conversations, minted by the Host backend."""
    response = await client.post(
        "/v1/host/sessions",
        json={"subject": "person", "conversation_ids": list(conversation_ids) or ["demo"]},
        headers=HOST,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["session"])


async def sign_in(client: Client, conversation_id: str = "demo") -> str:
    token = await mint(client, conversation_id)
    response = await client.post(
        "/host/session",
        data={"token": token, "conversation_id": conversation_id},
        follow_redirects=False,
    )
    assert response.status_code == 303
    value = response.cookies[COOKIE_NAME]
    assert value
    return value


async def test_without_a_session_the_host_page_is_a_sign_in_form_with_one_token_field(client: Client) -> None:
    response = await client.get("/host/?conversation_id=demo")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert 'name="token"' in response.text
    assert 'name="conversation_id" value="demo"' in response.text
    assert '<script type="module" src="/host/signin.js"></script>' in response.text


async def test_the_sign_in_page_speaks_of_a_persons_session_and_make_dev(client: Client) -> None:
    page = (await client.get("/host/?conversation_id=demo")).text
    assert "make dev" in page and "session" in page
    assert "HOST_TOKEN" not in page and "python -m service dev" not in page


async def test_the_preview_says_whom_a_token_signs_in_as_without_signing_in(client: Client) -> None:
    token = await mint(client, "demo", "other")
    response = await client.post("/host/session/preview", json={"token": token})
    assert response.status_code == 200, response.text
    assert response.json()["subject"] == "person"
    assert response.json()["conversation_ids"] == ["demo", "other"]
    assert response.json()["expires_at"].endswith("Z")
    assert "set-cookie" not in response.headers
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"Sec-Fetch-Site": "cross-site"}, "token", 403),
        ({"Origin": "https://elsewhere.example"}, "token", 403),
        ({}, "not-a-session", 401),
        ({}, "", 401),
    ],
    ids=["cross-site", "other-origin", "wrong-token", "empty"],
)
async def test_the_preview_is_refused_cross_site_and_for_a_wrong_token(
    client: Client, headers: dict[str, str], body: str, status: int
) -> None:
    token = await mint(client, "demo") if body == "token" else body
    response = await client.post("/host/session/preview", json={"token": token}, headers=headers)
    assert response.status_code == status, response.text
    assert "subject" not in response.text


async def test_the_preview_needs_a_json_body(client: Client) -> None:
    token = await mint(client, "demo")
    response = await client.post("/host/session/preview", data={"token": token})
    assert response.status_code == 403


async def test_a_wrong_token_shows_the_form_again_with_an_error_and_401(client: Client) -> None:
    response = await client.post(
        "/host/session", data={"token": "agent-token-for-tests-0001", "conversation_id": "demo"}
    )
    assert response.status_code == 401
    assert 'role="alert"' in response.text
    assert COOKIE_NAME not in response.headers.get("set-cookie", "")


async def test_a_session_token_sets_an_httponly_strict_cookie_and_returns_to_the_conversation(
    client: Client,
) -> None:
    token = await mint(client, "a&b=c", "demo")
    response = await client.post(
        "/host/session",
        data={"token": f" {token}\n", "conversation_id": "a&b=c"},
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/host/?conversation_id=a%26b%3Dc"
    cookie = response.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "path", "samesite", "max-age"} <= attributes
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/;" in cookie + ";"
    assert "secure" not in attributes  # plain http
    page = await client.get("/host/?conversation_id=demo")
    assert 'type="module" src="/host/main.js"' in page.text


async def test_by_default_the_cookie_is_secure_and_host_prefixed(database_url: str, registry: Any) -> None:
    from service.app import create_app

    app = create_app(make_settings(database_url, cookie_secure=True), registry, sweeper=False)
    async with AsyncTestClient(app=app, base_url="https://testserver.local") as secure:
        token = await mint(secure)
        response = await secure.post("/host/session", data={"token": token}, follow_redirects=False)
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SECURE_COOKIE_NAME}=")
    assert "secure" in cookie.lower()
    assert "domain" not in cookie.lower()


async def test_host_token_signs_in_only_where_the_deployment_allows_it(
    database_url: str, registry: Any
) -> None:
    from service.app import create_app

    for allowed, status in ((False, 401), (True, 303)):
        app = create_app(make_settings(database_url, host_token_sign_in=allowed), registry, sweeper=False)
        async with AsyncTestClient(app=app) as client:
            response = await client.post("/host/session", data={"token": HOST_TOKEN}, follow_redirects=False)
            assert response.status_code == status
            if allowed:  # a session reaching every conversation
                assert (await client.get("/v1/host/conversations/any/workspace")).status_code == 200


async def test_the_cookie_stands_in_for_the_host_token_on_the_host_api_only(client: Client) -> None:
    await sign_in(client)
    assert (await client.get("/v1/host/conversations/demo/workspace")).status_code == 200
    assert (await client.get("/v1/host/conversations/demo/messages")).status_code == 200
    posted = await client.post(
        "/v1/host/conversations/demo/messages", json={"role": "user", "text": "hi"}, headers=JSON
    )
    assert posted.status_code == 201
    for method, path in [
        ("GET", "/v1/tools"),
        ("POST", "/v1/tool-calls"),
        ("GET", "/v1/operations/00000000-0000-0000-0000-000000000000"),
        ("GET", "/v1/ops/stats"),
        ("GET", "/v1/ops/outbox"),
        ("GET", "/v1/sdk/context"),
        ("GET", "/v1/sdk/state"),
        ("POST", "/v1/sdk/navigation/close"),
    ]:
        response = await client.request(method, path, json=start_body("demo"), headers=JSON)
        assert response.status_code == 401, (method, path)


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "multipart/form-data; boundary=x"},
        {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
        {"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
    ],
)
async def test_a_cookie_authenticated_write_needs_a_json_body_from_the_same_origin(
    client: Client, db: Any, headers: dict[str, str]
) -> None:
    await sign_in(client)
    response = await client.post(
        "/v1/host/conversations/demo/messages", content=b'{"role": "user", "text": "hi"}', headers=headers
    )
    assert response.status_code == 401
    assert db.execute("SELECT count(*) AS n FROM messages").fetchone()["n"] == 0


async def test_a_tampered_or_foreign_cookie_is_refused(
    client: Client, database_url: str, registry: Any
) -> None:
    value = await sign_in(client)
    client.cookies.clear()
    forged = [
        # A changed signature (its first character: the last ones partly encode padding bits).
        value[: value.rindex(".") + 1]
        + ("B" if value[value.rindex(".") + 1] == "A" else "A")
        + value[value.rindex(".") + 2 :],
        "x" + value,
        value.split(".")[0] + ".",
        "",
        "v1.x.y.z",
    ]
    for candidate in forged:
        response = await client.get(
            "/v1/host/conversations/demo/workspace", headers={"Cookie": f"{COOKIE_NAME}={candidate}"}
        )
        assert response.status_code == 401, candidate

    # A replica with the same HOST_SESSION_SECRET accepts it (whatever its HOST_TOKEN); one with
    # another secret does not.
    from service.app import create_app

    for overrides, status in [
        ({"host_token": "another-host-token-0000001"}, 200),
        ({"host_session_secret": "another-host-session-secret-0123456789"}, 401),
    ]:
        app = create_app(make_settings(database_url, **overrides), registry, sweeper=False)
        async with AsyncTestClient(app=app) as replica:
            response = await replica.get(
                "/v1/host/conversations/demo/workspace", headers={"Cookie": f"{COOKIE_NAME}={value}"}
            )
            assert response.status_code == status


async def test_the_host_page_may_not_be_framed_and_talks_only_to_the_service(client: Client) -> None:
    signed_out = await client.get("/host/")
    await sign_in(client)
    for response in [signed_out, await client.get("/host/")]:
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp
        assert "script-src 'self';" in csp
        assert "connect-src 'self';" in csp
        assert "frame-src 'self';" in csp
        assert "unsafe-inline" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"


async def test_an_app_page_is_always_sandboxed_and_framed_only_by_the_service(
    database_url: str, registry: Any, client: Client
) -> None:
    from service.app import create_app

    settings = make_settings(database_url, public_origin="http://lineup.example:8443")
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as configured:
        response = await configured.get("/apps/pomodoro/", headers={"Host": "evil.example"})
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "sandbox allow-scripts" in csp
    assert "allow-same-origin" not in csp
    assert "connect-src 'none'" in csp
    assert "frame-ancestors 'self' http://lineup.example:8443" in csp
    assert "script-src 'self' http://lineup.example:8443;" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert '<script src="/sdk/lineup-sdk.js" defer></script>' in response.text

    assert "evil.example" not in csp  # the origin comes from PUBLIC_ORIGIN, never the Host header

    unset = await client.get("/apps/pomodoro/", headers={"Host": "odd_host:80"})
    assert "odd_host" not in unset.headers["content-security-policy"]
    assert "script-src 'self';" in unset.headers["content-security-policy"]


async def test_only_catalogued_assets_are_served(client: Client) -> None:
    sdk = await client.get("/sdk/lineup-sdk.js")
    assert sdk.status_code == 200
    assert sdk.headers["content-type"] == "text/javascript; charset=utf-8"
    assert sdk.headers["x-content-type-options"] == "nosniff"
    again = await client.get("/sdk/lineup-sdk.js", headers={"If-None-Match": sdk.headers["etag"]})
    assert again.status_code == 304
    for path in [
        "/host/signin.html",
        "/host/index.html",
        "/apps/interact/",
        "/apps/nothing/",
        "/apps/pomodoro/missing.js",
        "/host/..%2F..%2Fservice%2Fsettings.py",
        "/sdk/..%2Fhost%2Fmain.js",
    ]:
        assert (await client.get(path)).status_code == 404, path


async def test_the_agent_token_never_signs_in(client: Client) -> None:
    response = await client.post("/host/session", data={"token": AGENT["Authorization"].split()[1]})
    assert response.status_code == 401
