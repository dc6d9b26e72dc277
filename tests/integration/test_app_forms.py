"""An app's question of its own forms (the Runtime API's ``app_ask``), asked by the conformance
fixture app's tools (tests/fixtures/conformance_app/): a durable row answered once per form — over
REST (the Host's ``/answers``) and over MCP (2026-07-28 tasks' ``input_required`` and
``tasks/update``) racing —, every answer checked against its form, and the call's one result in the
outbox once the last form is answered."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.mcp import TASKS, ModernWire
from service.app import create_app
from service.db import code
from service.manifests import ManifestError, Registry
from service.settings import Settings
from tests.conftest import AGENT, AGENT_TOKEN, HOST, registry_with
from tests.support.outbox import outbox_rows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"
Client = AsyncTestClient[Any]
ELICITS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}


@pytest.fixture
def fixtures_registry(db: Any) -> Registry:
    db.execute((FIXTURES / "decisions.sql").read_text())
    code.declare_tools(db, code.declared_tools([FIXTURES]), only_these=False)
    return registry_with(FIXTURES)


@pytest.fixture
async def client(settings: Settings, fixtures_registry: Registry) -> AsyncIterator[Client]:
    async with AsyncTestClient(app=create_app(settings, fixtures_registry, sweeper=False)) as client:
        yield client


async def ask(client: Client, conversation_id: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {
        "tool_call_id": f"ask-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": tool,
        "arguments": arguments,
    }
    asked = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert asked.status_code == 202, asked.text
    return dict(asked.json())


async def answer(client: Client, tool_call_id: str, answers: Any) -> Any:
    return await client.post(
        f"/v1/host/interactions/{tool_call_id}/answers", json={"answers": answers}, headers=HOST
    )


def results(db: Any, tool_call_id: str) -> list[dict[str, Any]]:
    return [row for row in outbox_rows(db).values() if row["tool_call_id"] == tool_call_id]


async def test_the_form_is_asked_as_its_manifest_declares_it(client: Client, db: Any) -> None:
    asked = await ask(client, "conv-form", "conformance.test-elicitation", {"message": "Who are you?"})
    question = asked["interaction"]
    assert (question["status"], question["prompt"], question["answers"]) == ("pending", "Who are you?", {})
    form = question["forms"]["form"]
    assert form["message"] == "Who are you?"
    assert form["requestedSchema"]["required"] == ["username", "email"]
    pending = (await client.get("/v1/host/conversations/conv-form/workspace", headers=HOST)).json()
    (listed,) = pending["pending_interactions"]
    assert listed["forms"] == question["forms"]
    assert results(db, asked["tool_call_id"]) == []


async def test_a_rest_answer_decides_it_once_and_the_outbox_carries_the_result(
    client: Client, db: Any
) -> None:
    asked = await ask(client, "conv-form-rest", "conformance.test-elicitation", {"message": "Who?"})
    call_id = asked["tool_call_id"]
    first = await answer(client, call_id, {"form": {"username": "ada", "email": "ada@example.org"}})
    assert first.status_code == 200, first.text
    receipt = first.json()
    assert (receipt["status"], receipt["answers"]) == (
        "answered",
        {"form": {"username": "ada", "email": "ada@example.org"}},
    )
    again = await answer(client, call_id, {"form": {"username": "bob", "email": "bob@example.org"}})
    assert again.json() == receipt  # the first answer's receipt
    (row,) = results(db, call_id)
    assert (row["tool"], row["payload"]["tool"]) == ("conformance.test-elicitation",) * 2
    assert row["payload"]["result"] == {
        "state": "answered",
        "answers": {"form": {"username": "ada", "email": "ada@example.org"}},
        "answered_at": receipt["answered_at"],
    }


async def test_answers_that_do_not_fit_their_form_are_refused_and_never_stored(
    client: Client, db: Any
) -> None:
    asked = await ask(client, "conv-form-bad", "conformance.test-elicitation-sep1330-enums", {})
    call_id = asked["tool_call_id"]
    wrong = [
        ({"form": {"untitledSingle": "option9"}}, "answers.form.untitledSingle"),
        ({"form": {"titledSingle": "value9"}}, "answers.form.titledSingle"),
        ({"form": {"untitledMulti": ["option1", "nope"]}}, "answers.form.untitledMulti[1]"),
        ({"form": {"titledMulti": "value1"}}, "answers.form.titledMulti"),
        ({"other": {"x": 1}}, "answers.other"),
    ]
    for answers, path in wrong:
        refused = await answer(client, call_id, answers)
        assert (refused.status_code, refused.json()["error"]) == (422, "invalid_answer"), answers
        assert path in [detail["path"] for detail in refused.json()["details"]], refused.json()
    not_an_object = await answer(client, call_id, {"form": "option1"})
    assert not_an_object.status_code == 422
    text = await client.post(f"/v1/host/interactions/{call_id}/answer", json={"answer": "yes"}, headers=HOST)
    assert (text.status_code, text.json()["error"]) == (422, "invalid_answer")
    row = db.execute("SELECT status, answers, answer FROM interactions WHERE tool_call_id = %s", (call_id,))
    assert row.fetchone() == {"status": "pending", "answers": None, "answer": None}
    assert results(db, call_id) == []

    defaults = await ask(client, "conv-form-bad", "conformance.test-elicitation-sep1034-defaults", {})
    typed = await answer(client, defaults["tool_call_id"], {"form": {"age": 2.5, "verified": "yes"}})
    assert {detail["path"] for detail in typed.json()["details"]} == {
        "answers.form.age",
        "answers.form.verified",
    }
    # interact.ask's own question takes no forms.
    plain = await client.post(
        "/v1/tool-calls",
        json={
            "tool_call_id": "ask-plain",
            "conversation_id": "conv-form-bad",
            "tool": "interact.ask",
            "arguments": {"prompt": "Tea?"},
        },
        headers=AGENT,
    )
    assert plain.status_code == 202
    forms_to_text = await answer(client, "ask-plain", {"form": {"x": 1}})
    assert (forms_to_text.status_code, forms_to_text.json()["error"]) == (422, "invalid_answer")


async def test_only_declared_properties_are_kept(client: Client, db: Any) -> None:
    asked = await ask(client, "conv-form-keep", "conformance.confirm-delete", {"filename": "a.txt"})
    receipt = (await answer(client, asked["tool_call_id"], {"confirm": {"confirm": True, "why": "x"}})).json()
    assert receipt["answers"] == {"confirm": {"confirm": True}}


def modern(client: Client) -> ModernWire:
    wire = ModernWire(client, "/mcp")
    wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    return wire


async def mcp_call(
    wire: ModernWire, name: str, arguments: dict[str, Any], conversation_id: str
) -> dict[str, Any]:
    meta = {
        "io.lineup/conversation_id": conversation_id,
        "io.lineup/tool_call_id": f"mcp-{uuid.uuid4()}",
        "io.modelcontextprotocol/clientCapabilities": ELICITS,
    }
    return await wire.result("tools/call", {"name": name, "arguments": arguments, "_meta": meta})


async def task_get(wire: ModernWire, task_id: str) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/clientCapabilities": ELICITS}
    return await wire.result("tasks/get", {"taskId": task_id, "_meta": meta})


async def test_two_forms_at_once_over_tasks_each_answered_once(client: Client, db: Any) -> None:
    wire = modern(client)
    created = await mcp_call(wire, "conformance.multi-input", {}, "conv-form-mcp")
    assert created["resultType"] == "task"
    task = await task_get(wire, created["taskId"])
    assert task["status"] == "input_required"
    assert set(task["inputRequests"]) == {"name", "confirm"}
    assert task["inputRequests"]["name"]["params"]["requestedSchema"]["required"] == ["name"]

    # An answer that does not fit is -32602, and nothing is stored.
    bad = await wire.error(
        "tasks/update",
        {
            "taskId": created["taskId"],
            "inputResponses": {"name": {"action": "accept", "content": {"name": 7}}},
        },
    )
    assert bad["code"] == -32602
    ok = {
        "taskId": created["taskId"],
        "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
    }
    assert (await wire.result("tasks/update", ok))["resultType"] == "complete"
    task = await task_get(wire, created["taskId"])
    assert (task["status"], set(task["inputRequests"])) == ("input_required", {"confirm"})
    (call_id,) = [row["tool_call_id"] for row in db.execute("SELECT tool_call_id FROM interactions")]
    assert results(db, call_id) == []
    # A declined form changes nothing.
    declined = {"taskId": created["taskId"], "inputResponses": {"confirm": {"action": "decline"}}}
    assert (await wire.result("tasks/update", declined))["resultType"] == "complete"
    assert (await task_get(wire, created["taskId"]))["status"] == "input_required"

    # The last form: by MCP and by REST at once; one wins, the other gets the first's receipt.
    by_mcp = {
        "taskId": created["taskId"],
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
    }
    _, by_rest = await asyncio.gather(
        wire.result("tasks/update", by_mcp), answer(client, call_id, {"confirm": {"confirm": False}})
    )
    assert by_rest.status_code == 200
    done = await task_get(wire, created["taskId"])
    assert done["status"] == "completed"
    answers = done["result"]["structuredContent"]["answers"]
    assert answers["name"] == {"name": "Ada"}
    assert by_rest.json()["answers"] == answers
    (row,) = results(db, call_id)
    assert row["payload"]["result"]["answers"] == answers


@pytest.mark.parametrize("round", range(3))
async def test_rest_answers_racing_decide_once(client: Client, db: Any, round: int) -> None:
    asked = await ask(client, f"conv-form-race-{round}", "conformance.confirm-delete", {"filename": "b.txt"})
    call_id = asked["tool_call_id"]
    receipts = await asyncio.gather(
        *(answer(client, call_id, {"confirm": {"confirm": choice}}) for choice in (True, False) * 4)
    )
    assert {receipt.status_code for receipt in receipts} == {200}
    assert len({str(receipt.json()["answers"]) for receipt in receipts}) == 1
    (row,) = results(db, call_id)
    assert row["payload"]["result"]["answers"] == receipts[0].json()["answers"]


def test_a_form_that_breaks_mcps_restricted_schema_refuses_the_manifest(tmp_path: Path) -> None:
    import json
    import shutil

    folder = tmp_path / "conformance_app"
    shutil.copytree(FIXTURES, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    tool = next(tool for tool in manifest["tools"] if tool["name"] == "conformance.confirm-delete")
    for broken in (
        {"type": "object", "properties": {"confirm": {"type": "object"}}},
        {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["other"]},
        {"type": "object", "properties": {"s": {"type": "string", "enum": ["a"], "default": "b"}}},
        {"type": "object", "properties": {"s": {"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}}},
    ):
        tool["forms"] = {"confirm": broken}
        (folder / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(ManifestError):
            registry_with(folder)
