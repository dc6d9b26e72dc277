"""``interact.ask`` answered through the MCP client (elicitation), against a real ``serve``: at
2025-11-25 the SDK's own ``ClientSession`` with an elicitation callback; at 2026-07-28 the tasks
extension's ``input_required`` and ``tasks/update``. The answer is decided as the Host's is: one
winner, one outbox row, the loser told the winner's answer."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Self

import httpx
import mcp_types as types
import psycopg
import pytest
from mcp.client import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from psycopg.rows import dict_row

from harness import processes
from harness.database import DatabaseFactory, with_database
from harness.mcp import TASKS, bound, modern_wire
from tests.conftest import AGENT_TOKEN, HOST, ServiceProcess

pytestmark = pytest.mark.e2e

Elicit = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]]


class PatientService(ServiceProcess):
    """The tests' service, given longer to start on a machine shared with other work."""

    def start(self) -> Self:
        processes.ServiceProcess.start(self)
        self.wait_http(f"{self.base_url}/healthz", 180.0)
        return self


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    name = database_factory.create()
    process = PatientService(
        with_database(database_factory.server, name), tmp_path_factory.mktemp("mcp-elicitation")
    )
    try:
        yield process.start()
    finally:
        if process.process is not None:
            process.stop()
        database_factory.drop(name)


def conversation() -> str:
    return f"elicit-{uuid.uuid4()}"


def outbox_results(service: ServiceProcess, cid: str) -> list[dict[str, Any]]:
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as db:
        rows = db.execute("SELECT payload FROM outbox WHERE conversation_id = %s", [cid]).fetchall()
    return [row["payload"]["result"] for row in rows]


@contextlib.asynccontextmanager
async def eliciting_session(base_url: str, elicit: Elicit) -> AsyncIterator[ClientSession]:
    """A 2025-11-25 session of the SDK's client that declares elicitation (it does when given a
    callback) and holds the standalone GET stream open."""

    async def callback(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await elicit(params)

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    async with http, streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write):
        dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
        async with ClientSession(dispatcher=dispatcher, elicitation_callback=callback) as session:
            await session.initialize()
            yield session


async def host_answer(service: ServiceProcess, call_id: str, text: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(
            f"{service.base_url}/v1/host/interactions/{call_id}/answer", json={"answer": text}, headers=HOST
        )


def ask(choices: list[str] | None = None) -> dict[str, Any]:
    return {"prompt": "Tea or coffee?", **({"choices": choices} if choices is not None else {})}


async def test_a_client_declaring_elicitation_is_asked_and_its_answer_is_the_calls_result(
    service: ServiceProcess,
) -> None:
    cid, call_id = conversation(), f"ask-{uuid.uuid4()}"
    asked: list[types.ElicitRequestParams] = []

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "tea"})

    async with eliciting_session(service.base_url, elicit) as session:
        result = await session.call_tool("interact.ask", ask(["tea", "coffee"]), meta=bound(cid, call_id))
    late = await host_answer(service, call_id, "coffee")
    assert len(asked) == 1 and isinstance(asked[0], types.ElicitRequestFormParams)
    assert asked[0].message == "Tea or coffee?"
    assert asked[0].requested_schema["properties"]["answer"]["enum"] == ["tea", "coffee"]
    assert result.is_error is False
    assert result.structured_content is not None and result.structured_content["answer"] == "tea"
    assert outbox_results(service, cid) == [result.structured_content]
    # The Host answering after is told the first answer, as when two Host answers race.
    assert late.status_code == 200 and late.json()["answer"] == "tea"


async def test_a_free_text_question_is_a_string_of_the_answers_length(service: ServiceProcess) -> None:
    cid = conversation()
    asked: list[types.ElicitRequestParams] = []

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"answer": "green tea, please"})

    async with eliciting_session(service.base_url, elicit) as session:
        result = await session.call_tool("interact.ask", ask(), meta=bound(cid))
    assert isinstance(asked[0], types.ElicitRequestFormParams)
    schema = asked[0].requested_schema["properties"]["answer"]
    assert schema["type"] == "string" and "enum" not in schema and schema["maxLength"] == 2000
    assert result.structured_content is not None
    assert result.structured_content["answer"] == "green tea, please"
    assert outbox_results(service, cid) == [result.structured_content]


async def test_the_host_answering_first_ends_the_call_with_its_answer(service: ServiceProcess) -> None:
    cid, call_id = conversation(), f"ask-{uuid.uuid4()}"
    asked = asyncio.Event()
    release = asyncio.Event()

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await release.wait()  # the person is slow to answer in the client
        return types.ElicitResult(action="accept", content={"answer": "tea"})

    async with eliciting_session(service.base_url, elicit) as session:
        call = asyncio.create_task(
            session.call_tool("interact.ask", ask(["tea", "coffee"]), meta=bound(cid, call_id))
        )
        await asyncio.wait_for(asked.wait(), 30)
        by_host = await host_answer(service, call_id, "coffee")
        result = await asyncio.wait_for(call, 30)
        release.set()
    assert by_host.status_code == 200 and by_host.json()["answer"] == "coffee"
    assert result.structured_content is not None and result.structured_content["answer"] == "coffee"
    assert outbox_results(service, cid) == [result.structured_content]


async def race_once(service: ServiceProcess) -> None:
    """The client's answer and the Host's sent at once: one winner, one outbox row, and both sides
    report the winner's answer."""
    cid, call_id = conversation(), f"ask-{uuid.uuid4()}"
    asked = asyncio.Event()
    go = asyncio.Event()

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await go.wait()
        return types.ElicitResult(action="accept", content={"answer": "tea"})

    async with eliciting_session(service.base_url, elicit) as session:
        call = asyncio.create_task(
            session.call_tool("interact.ask", ask(["tea", "coffee"]), meta=bound(cid, call_id))
        )
        await asyncio.wait_for(asked.wait(), 30)
        go.set()
        by_host = await host_answer(service, call_id, "coffee")
        result = await asyncio.wait_for(call, 30)
    assert by_host.status_code == 200
    assert result.structured_content is not None
    winner = result.structured_content["answer"]
    assert winner in ("tea", "coffee") and by_host.json()["answer"] == winner
    assert outbox_results(service, cid) == [result.structured_content]


async def test_racing_answers_decide_once(service: ServiceProcess) -> None:
    for _ in range(8):
        await race_once(service)


async def test_a_declined_question_stays_open_for_the_host(service: ServiceProcess) -> None:
    cid, call_id = conversation(), f"ask-{uuid.uuid4()}"

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with eliciting_session(service.base_url, elicit) as session:
        result = await session.call_tool("interact.ask", ask(["tea", "coffee"]), meta=bound(cid, call_id))
    assert result.structured_content is not None and result.structured_content["status"] == "accepted"
    assert outbox_results(service, cid) == []
    answered = await host_answer(service, call_id, "coffee")
    assert answered.status_code == 200 and answered.json()["answer"] == "coffee"
    assert [row["answer"] for row in outbox_results(service, cid)] == ["coffee"]


async def test_an_answer_outside_the_choices_is_invalid_params_and_records_nothing(
    service: ServiceProcess,
) -> None:
    cid = conversation()

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "water"})

    async with eliciting_session(service.base_url, elicit) as session:
        with pytest.raises(Exception, match="one of the offered choices"):
            await session.call_tool("interact.ask", ask(["tea", "coffee"]), meta=bound(cid))
    assert outbox_results(service, cid) == []


# At 2026-07-28: the tasks extension's input_required, answered with tasks/update.

ELICITING: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}, "elicitation": {}},
}


def modern_ask(cid: str, call_id: str) -> dict[str, Any]:
    return {
        "name": "interact.ask",
        "arguments": ask(["tea", "coffee"]),
        "_meta": {**bound(cid, call_id), **ELICITING},
    }


async def test_a_waiting_question_is_input_required_and_tasks_update_answers_it(
    service: ServiceProcess,
) -> None:
    cid, call_id = conversation(), f"ask-{uuid.uuid4()}"
    async with modern_wire(service.base_url) as wire:
        created = await wire.result("tools/call", modern_ask(cid, call_id))
        task_id = created["taskId"]
        waiting = await wire.result("tasks/get", {"taskId": task_id, "_meta": ELICITING})
        undeclared = await wire.result("tasks/get", {"taskId": task_id})
        response = {"action": "accept", "content": {"answer": "tea"}}
        updated = await wire.result(
            "tasks/update", {"taskId": task_id, "inputResponses": {"answer": response}, "_meta": ELICITING}
        )
        done = await wire.result("tasks/get", {"taskId": task_id, "_meta": ELICITING})
    late = await host_answer(service, call_id, "coffee")
    assert created["resultType"] == "task"
    assert waiting["status"] == "input_required"
    request = waiting["inputRequests"]["answer"]
    assert request["method"] == "elicitation/create" and request["params"]["message"] == "Tea or coffee?"
    assert request["params"]["requestedSchema"]["properties"]["answer"]["enum"] == ["tea", "coffee"]
    assert undeclared["status"] == "working" and "inputRequests" not in undeclared
    assert updated["resultType"] == "complete"
    assert done["status"] == "completed" and done["result"]["structuredContent"]["answer"] == "tea"
    assert outbox_results(service, cid) == [done["result"]["structuredContent"]]
    assert late.status_code == 200 and late.json()["answer"] == "tea"


async def test_a_declined_input_response_leaves_the_question_waiting(service: ServiceProcess) -> None:
    cid, call_id = conversation(), f"ask-{uuid.uuid4()}"
    async with modern_wire(service.base_url) as wire:
        task_id = (await wire.result("tools/call", modern_ask(cid, call_id)))["taskId"]
        declined = {"answer": {"action": "decline"}, "other-key": {"action": "accept", "content": {}}}
        await wire.result("tasks/update", {"taskId": task_id, "inputResponses": declined, "_meta": ELICITING})
        still = await wire.result("tasks/get", {"taskId": task_id, "_meta": ELICITING})
    assert still["status"] == "input_required"
    assert outbox_results(service, cid) == []


async def test_tasks_update_racing_the_host_decides_once(service: ServiceProcess) -> None:
    for _ in range(8):
        cid, call_id = conversation(), f"ask-{uuid.uuid4()}"
        async with modern_wire(service.base_url) as wire:
            task_id = (await wire.result("tools/call", modern_ask(cid, call_id)))["taskId"]
            response = {"answer": {"action": "accept", "content": {"answer": "tea"}}}
            _, by_host = await asyncio.gather(
                wire.result(
                    "tasks/update", {"taskId": task_id, "inputResponses": response, "_meta": ELICITING}
                ),
                host_answer(service, call_id, "coffee"),
            )
            done = await wire.result("tasks/get", {"taskId": task_id, "_meta": ELICITING})
        winner = done["result"]["structuredContent"]["answer"]
        assert by_host.status_code == 200 and by_host.json()["answer"] == winner
        assert outbox_results(service, cid) == [done["result"]["structuredContent"]]
