"""``bench.thinnest_http``, the floor ``bench.tool_cycles --thinnest`` measures ``serve`` against,
answers the bench's cycles as ``serve`` does: the same status codes and the same answers, through
the same statement, so the two phases do the same writes."""

from __future__ import annotations

from typing import Any

import httpx
from litestar.testing import AsyncTestClient

from bench.thinnest_http import ThinApp
from harness.calls import interrupt_body, start_body
from tests.conftest import AGENT


def _shape(answer: httpx.Response) -> tuple[int, str, list[str]]:
    body = answer.json()
    return answer.status_code, body["status"], sorted(body)


async def test_thinnest_http_answers_a_cycle_as_serve_does(
    database_url: str, client: AsyncTestClient[Any]
) -> None:
    app = ThinApp(database_url, pool_size=1)
    await app.pool.open(wait=True)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://thin") as thin:
            thin_start = await thin.post("/v1/tool-calls", json=start_body("thin-1"))
            thin_interrupt = await thin.post("/v1/tool-calls", json=interrupt_body("thin-1"))
            again = await thin.post("/v1/tool-calls", json=interrupt_body("thin-1"))
    finally:
        await app.pool.close()
    serve_start = await client.post("/v1/tool-calls", json=start_body("serve-1"), headers=AGENT)
    serve_interrupt = await client.post("/v1/tool-calls", json=interrupt_body("serve-1"), headers=AGENT)
    serve_again = await client.post("/v1/tool-calls", json=interrupt_body("serve-1"), headers=AGENT)

    assert _shape(thin_start) == _shape(serve_start) == (202, "accepted", sorted(serve_start.json()))
    assert _shape(thin_interrupt) == _shape(serve_interrupt)
    assert thin_interrupt.json()["status"] == "interrupted"
    assert _shape(again) == _shape(serve_again)  # nothing to interrupt any more: the decision ran again
    assert again.json()["status"] != "interrupted"
