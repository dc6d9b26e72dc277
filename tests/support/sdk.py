"""Builders for SDK API tests: Pomodoro and Whiteboard instances, capabilities, concurrent calls."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from litestar.testing import AsyncTestClient

from harness.calls import start_body
from tests.conftest import AGENT, HOST

Client = AsyncTestClient[Any]
Call = tuple[str, str, dict[str, str], Any]  # method, path, headers, JSON body (None: no body)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def start_pomodoro(client: Client, conversation_id: str = "conv-1", **kwargs: Any) -> dict[str, Any]:
    response = await client.post("/v1/tool-calls", json=start_body(conversation_id, **kwargs), headers=AGENT)
    assert response.status_code == 202, response.text
    return dict(response.json())


async def open_whiteboard(client: Client, conversation_id: str = "conv-1") -> str:
    response = await client.post(
        f"/v1/host/conversations/{conversation_id}/workspace/foreground",
        json={"target": {"app_scope": "whiteboard"}},
        headers=HOST,
    )
    assert response.status_code == 200, response.text
    foreground = response.json()["foreground"]
    assert foreground["app_scope"] == "whiteboard"
    return str(foreground["instance_id"])


async def mint(client: Client, instance_id: str) -> str:
    response = await client.post(f"/v1/host/instances/{instance_id}/capability", headers=HOST)
    assert response.status_code == 200, response.text
    return str(response.json()["capability"])


async def sdk_headers(client: Client, instance_id: str) -> dict[str, str]:
    return bearer(await mint(client, instance_id))


async def put_state(client: Client, headers: dict[str, str], expected_revision: Any, data: Any) -> Any:
    return await client.put(
        "/v1/sdk/state", json={"expected_revision": expected_revision, "data": data}, headers=headers
    )


async def get_state(client: Client, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.get("/v1/sdk/state", headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def concurrently(client: Client, calls: list[Call]) -> list[httpx.Response]:
    """Send the calls at the same time, through the whole app, on the app's own event loop.

    The test client answers one request at a time (each blocks on the app's loop); here the
    requests are in flight together, so their transactions really overlap in Postgres.
    """

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            return list(
                await asyncio.gather(
                    *(
                        http.request(method, path, headers=headers, json=body)
                        for method, path, headers, body in calls
                    )
                )
            )

    return await asyncio.to_thread(client.blocking_portal.call, run)
