"""The id rule on every face that takes a new id: a tool call (REST), a session's conversations, a
Host write that may open a conversation. Refused with the contract's 422, nothing written; ids
recorded under the earlier rule stay readable where they are named."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import start_body
from tests.conftest import AGENT, HOST
from tests.integration.test_bad_input import row_counts

Client = AsyncTestClient[Any]
UNDELIVERABLE = ["call\r\n1", "call 1", "caf\u00e9", "a/b", "a\\b", "100%", "a?b", "a#b", ".", "..", "\x7f"]


@pytest.mark.parametrize("bad", UNDELIVERABLE)
@pytest.mark.parametrize("field", ["tool_call_id", "conversation_id"])
async def test_a_tool_call_with_an_id_that_cannot_travel_is_422_and_records_nothing(
    client: Client, db: Any, field: str, bad: str
) -> None:
    before = row_counts(db)
    body = {**start_body("conv-ids", tool_call_id="call-ids"), field: bad}
    response = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    (detail,) = response.json()["details"]
    assert detail["path"] == field
    assert "printable ASCII" in detail["message"]
    assert row_counts(db) == before


async def test_every_other_printable_ascii_id_is_taken(client: Client) -> None:
    odd = "!\"$&'()*+,-.:;<=>@[]^_`{|}~...A1"
    response = await client.post(
        "/v1/tool-calls", json=start_body(odd, tool_call_id=odd, duration_seconds=60), headers=AGENT
    )
    assert response.status_code == 202, response.text
    workspace = await client.get(f"/v1/host/conversations/{quote(odd, safe='')}/workspace", headers=HOST)
    assert workspace.json()["focusing_operation"]["tool_call_id"] == odd


async def test_a_session_for_a_conversation_id_that_cannot_travel_is_422(client: Client, db: Any) -> None:
    response = await client.post(
        "/v1/host/sessions", json={"subject": "p", "conversation_ids": ["ok", "not ok"]}, headers=HOST
    )
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["path"] == "conversation_ids[1]"
    assert db.execute("SELECT count(*) AS n FROM host_sessions").fetchone()["n"] == 0


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("POST", "messages", {"role": "user", "text": "hi"}),
        ("POST", "workspace/foreground", {"target": "interact"}),
    ],
)
async def test_a_host_write_that_would_open_such_a_conversation_is_422(
    client: Client, db: Any, method: str, suffix: str, body: dict[str, Any]
) -> None:
    before = row_counts(db)
    response = await client.request(
        method, f"/v1/host/conversations/{quote('conv 1', safe='')}/{suffix}", json=body, headers=HOST
    )
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["path"] == "conversation_id"
    assert row_counts(db) == before


async def test_a_conversation_recorded_under_the_earlier_rule_is_still_read(client: Client, db: Any) -> None:
    legacy = "conv 1 caf\u00e9"
    db.execute("INSERT INTO workspaces (conversation_id) VALUES (%s)", [legacy])
    db.execute(
        "INSERT INTO messages (message_id, conversation_id, role, text) VALUES (gen_random_uuid(), %s, 'user', 'old')",
        [legacy],
    )
    path = f"/v1/host/conversations/{quote(legacy, safe='')}"
    assert (await client.get(f"{path}/workspace", headers=HOST)).status_code == 200
    messages = (await client.get(f"{path}/messages", headers=HOST)).json()["messages"]
    assert [m["text"] for m in messages] == ["old"]
