"""A capability minted under a person's session lives as long as that session, and a session mints
a bounded number; one minted with HOST_TOKEN keeps the instance's life."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from harness.calls import start_body
from service.app import create_app
from service.manifests import Registry
from tests.conftest import AGENT, HOST, make_settings
from tests.integration.test_host_sessions import bearer, mint

Client = AsyncTestClient[Any]


async def capability(client: Client, instance_id: str, headers: dict[str, str]) -> Any:
    return await client.post(f"/v1/host/instances/{instance_id}/capability", json={}, headers=headers)


def sdk(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def focusing(client: Client, conversation_id: str) -> str:
    started = await client.post("/v1/tool-calls", json=start_body(conversation_id), headers=AGENT)
    assert started.status_code == 202, started.text
    return str(started.json()["instance_id"])


async def test_a_capability_minted_under_a_session_ends_with_it_everywhere_on_the_sdk(
    client: Client, db: Any
) -> None:
    instance_id = await focusing(client, "alice")
    session = await mint(client, "alice")
    minted = await capability(client, instance_id, bearer(session))
    assert minted.status_code == 200, minted.text
    token = minted.json()["capability"]
    backends = (await capability(client, instance_id, HOST)).json()["capability"]
    assert (await client.get("/v1/sdk/context", headers=sdk(token))).status_code == 200

    revoked = await client.delete(f"/v1/host/sessions/{session['session_id']}", headers=HOST)
    assert revoked.status_code == 204
    for method, path in [
        ("GET", "/v1/sdk/context"),
        ("GET", "/v1/sdk/state"),
        ("POST", "/v1/sdk/navigation/close"),
    ]:
        refused = await client.request(
            method, path, headers=sdk(token), json={} if method == "POST" else None
        )
        assert refused.status_code == 401, (path, refused.text)
        assert refused.json()["error"] == "unauthorized"
    # The focusing Pomodoro was not closed by the dead capability; HOST_TOKEN's still reads.
    assert db.execute("SELECT state FROM operations").fetchone()["state"] == "focusing"
    assert (await client.get("/v1/sdk/context", headers=sdk(backends))).status_code == 200


async def test_a_capability_of_an_expired_session_is_refused(client: Client, db: Any) -> None:
    instance_id = await focusing(client, "alice")
    session = await mint(client, "alice")
    token = (await capability(client, instance_id, bearer(session))).json()["capability"]
    db.execute(
        "UPDATE host_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second'"
    )
    assert (await client.get("/v1/sdk/context", headers=sdk(token))).status_code == 401


async def test_a_session_mints_a_bounded_number_of_capabilities(
    database_url: str, registry: Registry, db: Any
) -> None:
    app = create_app(make_settings(database_url, capabilities_per_session=2), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        instance_id = await focusing(client, "alice")
        session = await mint(client, "alice")
        for _ in range(2):
            assert (await capability(client, instance_id, bearer(session))).status_code == 200
        refused = await capability(client, instance_id, bearer(session))
        assert refused.status_code == 429
        assert refused.json()["error"] == "too_many_requests"
        assert "2 capabilities" in refused.json()["message"]
        # Another session, and the backend, are not held back by it.
        other = await mint(client, "alice")
        assert (await capability(client, instance_id, bearer(other))).status_code == 200
        assert (await capability(client, instance_id, HOST)).status_code == 200
    assert db.execute("SELECT count(*) AS n FROM capabilities").fetchone()["n"] == 4
