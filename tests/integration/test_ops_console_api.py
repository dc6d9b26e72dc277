"""The operator console's API and sign-in: the requeue endpoint, outbox paging, the overview, and
the console cookie's rules (Bearer or cookie; writes only same-origin with JSON)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient

from harness.calls import expire, start_body
from service.web.console_cookie import COOKIE_NAME, ConsoleSessions
from tests.conftest import AGENT, HOST, HOST_TOKEN, OPERATOR, OPERATOR_TOKEN, UNKNOWN_UUID
from tests.integration.test_ops_api import add_attempt, add_outbox_row

Client = AsyncTestClient[Any]
SAME_ORIGIN_JSON = {"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
LONE_SURROGATE_CURSOR = (
    base64.urlsafe_b64encode(b'["2026-12-01T00:00:00.000000Z","\\ud800",1]').rstrip(b"=").decode()
)


async def requeue(client: Client, event_id: str, headers: dict[str, str] | None = None) -> Any:
    return await client.post(
        f"/v1/ops/outbox/{event_id}/requeue", headers=OPERATOR if headers is None else headers
    )


async def signed_in(client: Client) -> str:
    """Sign in through the form; the cookie the console then holds."""
    response = await client.post(
        "/ops/session", data={"token": OPERATOR_TOKEN, "next": "/ops/outbox"}, follow_redirects=False
    )
    assert response.status_code == 303, response.text
    return str(response.cookies[COOKIE_NAME])


# ---- the requeue endpoint


async def test_requeue_puts_a_dead_row_back_as_the_cli_does(client: Client, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=3, last_error="HTTP 400: no")
    add_attempt(db, event_id, 1, "dead", status_code=400)
    response = await requeue(client, event_id)
    assert response.status_code == 200, response.text
    row = response.json()
    assert (row["event_id"], row["status"], row["attempts"]) == (event_id, "pending", 0)
    assert row["last_error"] == "HTTP 400: no" and row["lease_owner"] is None
    stored = db.execute(
        "SELECT status, attempts, next_attempt_at <= now() AS due FROM outbox WHERE event_id = %s", [event_id]
    ).fetchone()
    assert stored == {"status": "pending", "attempts": 0, "due": True}
    assert db.execute(
        "SELECT count(*) AS n FROM outbox_attempts WHERE event_id = %s", [event_id]
    ).fetchone() == {"n": 1}


@pytest.mark.parametrize("status", ["pending", "delivered"])
async def test_requeue_of_a_row_that_is_not_dead_is_409_and_changes_nothing(
    client: Client, db: Any, status: str
) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, status, attempts=2)
    response = await requeue(client, event_id)
    assert response.status_code == 409
    assert response.json()["error"] == "not_dead"
    assert status in response.json()["message"]
    assert db.execute("SELECT status, attempts FROM outbox WHERE event_id = %s", [event_id]).fetchone() == {
        "status": status,
        "attempts": 2,
    }


@pytest.mark.parametrize("event_id", [UNKNOWN_UUID, "not-a-uuid", "0394"])
async def test_requeue_of_an_unknown_event_is_404(client: Client, event_id: str) -> None:
    response = await requeue(client, event_id)
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_event"


@pytest.mark.parametrize("headers", [{}, AGENT, HOST, {"Authorization": "Bearer not-the-operator-token"}])
async def test_requeue_needs_the_operator(client: Client, db: Any, headers: dict[str, str]) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=1)
    response = await requeue(client, event_id, headers)
    assert response.status_code == 401
    assert (
        db.execute("SELECT status FROM outbox WHERE event_id = %s", [event_id]).fetchone()["status"] == "dead"
    )


async def test_a_requeue_wakes_the_relays_after_its_commit(
    client: Client, db: Any, database_url: str
) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=1)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute("LISTEN lineup_outbox")
        assert (await requeue(client, event_id)).status_code == 200
        async with asyncio.timeout(5):
            note = await anext(listener.notifies())
    assert note.channel == "lineup_outbox"
    # Sent by the process's wake-up connection once the requeue committed, not from its transaction.
    assert note.pid == client.app.state.runtime.wakeups.notifier_pid


# ---- outbox paging and filters


async def test_outbox_pages_by_cursor_newest_first_without_repeats(client: Client, db: Any) -> None:
    made = [add_outbox_row(db, f"conv-{n % 2}", n, "pending", age_seconds=100 - n) for n in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, str | int] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/ops/outbox", headers=OPERATOR, params=params)).json()
        seen += [row["event_id"] for row in page["outbox"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(made))
    assert pages == 3


async def test_rows_of_one_instant_page_in_the_lists_order(client: Client, db: Any) -> None:
    """Rows written by one transaction share created_at: the cursor's tie-breakers keep them apart."""
    for conversation in ("a", "b"):
        for sequence in (1, 2):
            add_outbox_row(db, conversation, sequence, "pending")
    db.execute("UPDATE outbox SET created_at = '2026-01-01T00:00:00Z'")
    everything = [
        r["event_id"] for r in (await client.get("/v1/ops/outbox", headers=OPERATOR)).json()["outbox"]
    ]
    first = (await client.get("/v1/ops/outbox", headers=OPERATOR, params={"limit": 3})).json()
    rest = (
        await client.get(
            "/v1/ops/outbox", headers=OPERATOR, params={"limit": 3, "cursor": first["next_cursor"]}
        )
    ).json()
    assert [r["event_id"] for r in first["outbox"] + rest["outbox"]] == everything
    assert len(everything) == 4 and rest["next_cursor"] is None


async def test_outbox_filters_by_tool_call_id_prefix_and_status(client: Client, db: Any) -> None:
    wanted = add_outbox_row(db, "c", 1, "dead", tool_call_id="demo-1")
    add_outbox_row(db, "c", 2, "pending", tool_call_id="demo-2")
    add_outbox_row(db, "c", 3, "dead", tool_call_id="other-1")
    params = {"status": "dead", "tool_call_id_prefix": "demo-"}
    page = (await client.get("/v1/ops/outbox", headers=OPERATOR, params=params)).json()
    assert [row["event_id"] for row in page["outbox"]] == [wanted]


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "W10"}, "cursor"),  # base64url of "[]"
        # Valid base64url of valid JSON whose conversation id is a lone surrogate (UTF-8 cannot
        # encode it): once a 500 from the database driver.
        ({"cursor": LONE_SURROGATE_CURSOR}, "cursor"),
        ({"cursor": "x" * 2000}, "cursor"),
        ({"tool_call_id_prefix": ""}, "tool_call_id_prefix"),
        ({"tool_call_id_prefix": "a\x00"}, "tool_call_id_prefix"),
    ],
)
async def test_a_bad_cursor_or_prefix_is_422(client: Client, params: dict[str, str], path: str) -> None:
    response = await client.get("/v1/ops/outbox", headers=OPERATOR, params=params)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    assert response.json()["details"][0]["path"] == path


# ---- the overview


async def test_overview_counts_the_last_hour_by_minute(client: Client, db: Any) -> None:
    delivered = add_outbox_row(db, "c", 1, "delivered", attempts=2)
    add_attempt(db, delivered, 1, "retry", status_code=503, minutes_ago=3)
    add_attempt(db, delivered, 2, "delivered", status_code=204, minutes_ago=1)
    dead = add_outbox_row(db, "c", 2, "dead", attempts=1)
    add_attempt(db, dead, 1, "dead", status_code=400, minutes_ago=1)
    old = add_outbox_row(db, "c", 3, "dead", attempts=1, age_seconds=7200)
    add_attempt(db, old, 1, "dead", status_code=400, minutes_ago=90)
    started = (await client.post("/v1/tool-calls", json=start_body("late"), headers=AGENT)).json()
    expire(db, started["operation"]["operation_id"], seconds_ago=0.25)
    await client.get(f"/v1/operations/{started['operation']['operation_id']}", headers=AGENT)

    overview = (await client.get("/v1/ops/overview", headers=OPERATOR)).json()
    hour = overview["last_hour"]
    assert len(hour["minutes"]) == 60
    assert (hour["deliveries"], hour["failures"]) == (1, 2)
    assert sum(m["created"] for m in hour["minutes"]) == 3  # the two rows above and the completed start
    assert sum(m["dead"] for m in hour["minutes"]) == 1
    assert hour["lateness_ms"]["completed"] == 1 and hour["lateness_ms"]["p99"] >= 200
    assert overview["stats"]["outbox"]["by_status"] == {"pending": 1, "delivered": 1, "dead": 2}
    assert isinstance(overview["depth"], list)


# ---- the console's sign-in and cookie


async def test_sign_in_sets_an_httponly_strict_cookie_and_returns_to_the_page(client: Client) -> None:
    response = await client.post(
        "/ops/session", data={"token": OPERATOR_TOKEN, "next": "/ops/trace/a?b=1"}, follow_redirects=False
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/ops/trace/a?b=1"
    set_cookie = response.headers["set-cookie"]
    assert set_cookie.startswith(f"{COOKIE_NAME}=")
    assert "HttpOnly" in set_cookie and "samesite=strict" in set_cookie.lower() and "Path=/" in set_cookie


@pytest.mark.parametrize("next_path", ["//evil.example/x", "https://evil.example/", "/host/", "/ops/\\x", ""])
async def test_sign_in_only_returns_to_the_console(client: Client, next_path: str) -> None:
    response = await client.post(
        "/ops/session", data={"token": OPERATOR_TOKEN, "next": next_path}, follow_redirects=False
    )
    assert response.headers["location"] == "/ops/"


@pytest.mark.parametrize("token", [HOST_TOKEN, "wrong-operator-token-0001", ""])
async def test_sign_in_with_anything_but_the_operator_token_is_refused(client: Client, token: str) -> None:
    response = await client.post("/ops/session", data={"token": token}, follow_redirects=False)
    assert response.status_code == 401
    assert COOKIE_NAME not in response.cookies
    assert "not the operator token" in response.text


@pytest.mark.parametrize(
    "headers",
    [{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Origin": "http://evil.example"}],
)
async def test_sign_in_from_another_site_is_refused(client: Client, headers: dict[str, str]) -> None:
    response = await client.post(
        "/ops/session", data={"token": OPERATOR_TOKEN}, headers=headers, follow_redirects=False
    )
    assert response.status_code == 403
    assert COOKIE_NAME not in response.cookies


async def test_the_cookie_reads_the_ops_api_and_nothing_else(client: Client) -> None:
    cookie = await signed_in(client)
    client.cookies.clear()
    jar = {"Cookie": f"{COOKIE_NAME}={cookie}"}
    assert (await client.get("/v1/ops/stats", headers=jar)).status_code == 200
    assert (
        await client.get("/v1/ops/stats", headers={**jar, "Sec-Fetch-Site": "same-origin"})
    ).status_code == 200
    assert (
        await client.get("/v1/ops/stats", headers={**jar, "Sec-Fetch-Site": "cross-site"})
    ).status_code == 401
    assert (await client.get("/v1/host/conversations/c/workspace", headers=jar)).status_code == 401
    assert (await client.get("/v1/tools", headers=jar)).status_code == 401
    mac_at = cookie.rindex(".") + 1  # change the signature's first character, not its padding bits
    forged = {
        "Cookie": f"{COOKIE_NAME}={cookie[:mac_at]}{'B' if cookie[mac_at] == 'A' else 'A'}{cookie[mac_at + 1 :]}"
    }
    assert (await client.get("/v1/ops/stats", headers=forged)).status_code == 401


async def test_a_requeue_with_the_cookie_needs_same_origin_and_json(client: Client, db: Any) -> None:
    cookie = await signed_in(client)
    client.cookies.clear()
    jar = {"Cookie": f"{COOKIE_NAME}={cookie}"}
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=1)
    refused = [
        {**jar, "Content-Type": "application/json"},  # no Sec-Fetch-Site
        {**jar, "Sec-Fetch-Site": "same-site", "Content-Type": "application/json"},
        {**jar, "Sec-Fetch-Site": "same-origin", "Content-Type": "text/plain"},
        {**jar, "Sec-Fetch-Site": "same-origin"},
        {**jar, **SAME_ORIGIN_JSON, "Origin": "http://evil.example"},
    ]
    for headers in refused:
        assert (await requeue(client, event_id, headers)).status_code == 401, headers
    assert (
        db.execute("SELECT status FROM outbox WHERE event_id = %s", [event_id]).fetchone()["status"] == "dead"
    )
    response = await requeue(
        client, event_id, {**jar, **SAME_ORIGIN_JSON, "Origin": "http://testserver.local"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "pending"


async def test_a_cookie_signed_with_another_audiences_token_is_refused(client: Client) -> None:
    forged = ConsoleSessions([HOST_TOKEN]).issue(HOST_TOKEN)
    headers = {"Cookie": f"{COOKIE_NAME}={forged}"}
    assert (await client.get("/v1/ops/stats", headers=headers)).status_code == 401
    page = await client.get("/ops/", headers=headers)
    assert 'name="token"' in page.text


# ---- the pages


async def test_a_console_page_without_a_session_is_the_sign_in_form(client: Client) -> None:
    response = await client.get("/ops/trace/call-1?x=1")
    assert response.status_code == 200
    assert 'name="token"' in response.text and 'value="/ops/trace/call-1?x=1"' in response.text
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("path", ["/ops/", "/ops/outbox?status=dead", "/ops/operations", "/ops/trace/a/b"])
async def test_every_console_page_is_the_shell_once_signed_in(client: Client, path: str) -> None:
    await signed_in(client)
    response = await client.get(path)
    assert response.status_code == 200
    assert '<script type="module" src="/ops/static/app.js">' in response.text
    assert response.headers["cache-control"] == "no-store"


async def test_console_assets_are_served_and_nothing_else(client: Client) -> None:
    script = await client.get("/ops/static/app.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    again = await client.get("/ops/static/app.js", headers={"If-None-Match": script.headers["etag"]})
    assert again.status_code == 304
    for name in ("index.html", "missing.js", "..%2Fhost%2Fhost.css"):
        assert (await client.get(f"/ops/static/{name}")).status_code == 404


async def test_sign_out_drops_the_cookie(client: Client) -> None:
    await signed_in(client)
    response = await client.post(
        "/ops/sign-out", headers={"Sec-Fetch-Site": "same-origin"}, follow_redirects=False
    )
    assert response.status_code == 303
    assert (
        f"{COOKIE_NAME}=" in response.headers["set-cookie"] and "Max-Age=0" in response.headers["set-cookie"]
    )


async def test_sign_out_ends_the_session_so_a_kept_copy_of_the_cookie_reads_and_writes_nothing(
    client: Client, db: Any
) -> None:
    value = await signed_in(client)
    event_id = add_outbox_row(db, "c", 1, "dead", attempts=25)
    kept = {"Cookie": f"{COOKIE_NAME}={value}"}
    assert (await client.get("/v1/ops/stats", headers=kept)).status_code == 200
    out = await client.post(
        "/ops/sign-out", headers={"Sec-Fetch-Site": "same-origin"}, follow_redirects=False
    )
    assert out.status_code == 303
    client.cookies.clear()
    # The same value, replayed from anywhere (another replica shares the database).
    assert (await client.get("/v1/ops/stats", headers=kept)).status_code == 401
    assert (await requeue(client, event_id, {**kept, **SAME_ORIGIN_JSON})).status_code == 401
    assert 'name="token"' in (await client.get("/ops/", headers=kept)).text
    ended = db.execute("SELECT count(*) AS n FROM console_sessions WHERE revoked_at IS NOT NULL").fetchone()
    assert ended["n"] == 1


async def test_a_cookie_for_a_session_the_database_does_not_know_is_refused(client: Client) -> None:
    # Signed right (under the operator token), but naming no sign-in: as a cookie of a session that
    # was pruned, or one forged by whoever once held the token.
    unknown = ConsoleSessions([OPERATOR_TOKEN]).issue(OPERATOR_TOKEN)
    assert (
        await client.get("/v1/ops/stats", headers={"Cookie": f"{COOKIE_NAME}={unknown}"})
    ).status_code == 401
