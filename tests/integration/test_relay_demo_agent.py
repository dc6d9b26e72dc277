"""The demo Agent that `python -m service dev` runs: it accepts what the relay signs, once per event."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from litestar.testing import AsyncTestClient

from demo_agent.app import WEBHOOK_PATH, create_app
from demo_agent.webhooks import ToolResult
from harness.receiver import new_secret
from relay.signing import Signer

PAYLOAD = {
    "event_id": "0b3c6f1e-7c55-4c1b-9d7e-1f0f3a9a2b11",
    "type": "tool.result",
    "tool": "pomodoro.start",
    "tool_call_id": "call-1",
    "conversation_id": "conv-1",
    "operation_id": None,
    "sequence": 1,
    "result": {"state": "completed", "reason": "deadline_reached"},
}


def signed(secrets: list[str], payload: dict[str, Any] = PAYLOAD) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload)
    headers = Signer(secrets).headers(str(payload["event_id"]), body, datetime.now(UTC))
    return body.encode(), {**headers, "content-type": "application/json"}


async def test_a_relay_signed_result_is_accepted_once_and_a_repeat_is_acknowledged() -> None:
    old, new = new_secret(), new_secret()
    received: list[ToolResult] = []

    async def collect(result: ToolResult) -> None:
        received.append(result)

    body, headers = signed([old, new])
    async with AsyncTestClient(app=create_app([new], on_result=collect)) as client:
        first = await client.post(WEBHOOK_PATH, content=body, headers=headers)
        repeat = await client.post(WEBHOOK_PATH, content=body, headers=headers)
    assert (first.status_code, repeat.status_code) == (204, 204)
    assert [r.tool_call_id for r in received] == ["call-1"]
    assert received[0].result == PAYLOAD["result"]


async def test_a_delivery_signed_with_an_unknown_secret_is_refused() -> None:
    body, headers = signed([new_secret()])
    async with AsyncTestClient(app=create_app([new_secret()])) as client:
        response = await client.post(WEBHOOK_PATH, content=body, headers=headers)
    assert response.status_code == 401


async def test_a_body_that_does_not_match_its_webhook_id_is_refused() -> None:
    secret = new_secret()
    body = json.dumps({**PAYLOAD, "event_id": "another"})
    headers = Signer([secret]).headers(str(PAYLOAD["event_id"]), body, datetime.now(UTC))
    async with AsyncTestClient(app=create_app([secret])) as client:
        response = await client.post(WEBHOOK_PATH, content=body.encode(), headers=headers)
    assert response.status_code == 401
