"""MCP calls that wait, against a real ``serve`` running the conformance fixture app, with the SDK's
own client at 2025-11-25 (its standalone stream open): a short operation answered in its own call
with progress (``service.mcp.progress``; the fixture ``test-tool-with-progress`` declares
``operation.await_in_call_seconds``) — increasing ``notifications/progress``, then the ending the
relay delivers; and a Tool's input rounds (``service.mcp.input_required``), which that revision has
no ``input_required`` for, asked over the session before the one decision."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import psycopg
import pytest
from mcp.client import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import INVALID_PARAMS
from psycopg.rows import dict_row

from harness.database import DatabaseFactory, with_database
from harness.mcp import bound
from service.db import code
from tests.conftest import AGENT_TOKEN, ServiceProcess
from tests.e2e.test_mcp_elicitation import PatientService

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"
WITH_PROGRESS = "conformance_test-tool-with-progress"  # declares await_in_call_seconds 10
SLOW_COMPUTE = "conformance_slow-compute"  # declares none


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    name = database_factory.create()
    url = with_database(database_factory.server, name)
    with psycopg.connect(url, autocommit=True) as db:
        db.execute((FIXTURES / "decisions.sql").read_text())
        code.declare_tools(db, code.declared_tools([FIXTURES]), only_these=False)
    process = PatientService(url, tmp_path_factory.mktemp("mcp-progress"), APP_FOLDERS=str(FIXTURES))
    try:
        yield process.start()
    finally:
        if process.process is not None:
            process.stop()
        database_factory.drop(name)


@contextlib.asynccontextmanager
async def session(base_url: str, **callbacks: Any) -> AsyncIterator[ClientSession]:
    """A 2025-11-25 session of the SDK's client (no tasks), its standalone GET stream open; with
    ``callbacks`` (``elicitation_callback`` …) it declares what they answer."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    async with http, streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write):
        dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
        async with ClientSession(dispatcher=dispatcher, **callbacks) as client:
            await client.initialize()
            yield client


def outbox_results(service: ServiceProcess, cid: str) -> list[dict[str, Any]]:
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as db:
        rows = db.execute("SELECT payload FROM outbox WHERE conversation_id = %s", [cid]).fetchall()
    return [row["payload"]["result"] for row in rows]


async def test_a_short_operation_is_answered_in_its_call_with_increasing_progress(
    service: ServiceProcess,
) -> None:
    cid, call_id = f"progress-{uuid.uuid4()}", f"call-{uuid.uuid4()}"
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with session(service.base_url) as client:
        result = await client.call_tool(
            WITH_PROGRESS, {}, progress_callback=on_progress, meta=bound(cid, call_id)
        )
        replayed = await client.call_tool(WITH_PROGRESS, {}, meta=bound(cid, call_id))

    ending = result.structured_content
    assert result.is_error is False and ending is not None
    assert (ending["state"], ending["reason"], ending["focused_seconds"]) == (
        "completed",
        "deadline_reached",
        2,
    )
    assert result.meta is not None and result.meta["io.lineup/tool_call_id"] == call_id
    # The very result the relay delivers, queued once.
    assert outbox_results(service, cid) == [ending]
    # At least three, strictly increasing, each of the two seconds, the last the whole of it.
    progress = [value for value, _, _ in heard]
    assert len(progress) >= 3, heard
    assert progress == sorted(set(progress)), heard
    assert {total for _, total, _ in heard} == {2.0}
    assert progress[-1] == 2.0
    # Asked again (the same tool_call_id), the call answers the same ending, at once.
    assert replayed.structured_content == ending


async def test_a_call_without_a_progress_token_is_answered_its_ending_and_hears_nothing(
    service: ServiceProcess,
) -> None:
    cid = f"progress-{uuid.uuid4()}"
    async with session(service.base_url) as client:
        result = await client.call_tool(WITH_PROGRESS, {}, meta=bound(cid))
    assert result.structured_content is not None
    assert result.structured_content["state"] == "completed"
    assert outbox_results(service, cid) == [result.structured_content]


async def test_a_tool_that_declares_no_wait_answers_its_acceptance_at_once(service: ServiceProcess) -> None:
    cid = f"progress-{uuid.uuid4()}"
    heard: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(progress)

    async with session(service.base_url) as client:
        result = await client.call_tool(
            SLOW_COMPUTE, {"seconds": 1}, progress_callback=on_progress, meta=bound(cid)
        )
    assert result.structured_content is not None
    assert result.structured_content["status"] == "accepted"
    assert result.meta is not None and result.meta["io.lineup/http_status"] == 202
    assert heard == []


MULTIPLE = "conformance_test-input-required-result-multiple-inputs"  # a form, a sampling, roots/list
MULTI_ROUND = "conformance_test-input-required-result-multi-round"  # a form, then another


async def test_a_tools_input_rounds_are_asked_over_the_session_at_2025_11_25_before_it_decides(
    service: ServiceProcess,
) -> None:
    asked: list[str] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Hello there"), model="test-model"
        )

    async def roots(context: ClientRequestContext) -> types.ListRootsResult:
        asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work")])

    cid = f"rounds-{uuid.uuid4()}"
    async with session(
        service.base_url, elicitation_callback=elicit, sampling_callback=sample, list_roots_callback=roots
    ) as client:
        result = await client.call_tool(MULTIPLE, {}, meta=bound(cid))
    assert sorted(asked) == ["What is your name?", "roots", "sampling"]
    given = result.structured_content
    assert given is not None and given["status"] == "answered"
    assert given["input"]["user_name"]["content"] == {"name": "Ada"}
    assert given["input"]["greeting"]["content"]["text"] == "Hello there"
    assert given["input"]["client_roots"]["roots"] == [{"uri": "file:///work"}]


async def test_a_client_asked_rounds_in_turn_and_one_it_cannot_run_is_not_asked(
    service: ServiceProcess,
) -> None:
    asked: list[str] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        content = {"color": "teal"} if "color" in params.message else {"name": "Ada"}
        return types.ElicitResult(action="accept", content=content)

    async with session(service.base_url, elicitation_callback=elicit) as client:
        two = await client.call_tool(MULTI_ROUND, {}, meta=bound(f"rounds-{uuid.uuid4()}"))
        # A client that declares neither sampling nor roots is asked only the form.
        asked.clear()
        multiple = await client.call_tool(MULTIPLE, {}, meta=bound(f"rounds-{uuid.uuid4()}"))
    assert two.structured_content is not None
    assert two.structured_content["input"]["step1"]["content"] == {"name": "Ada"}
    assert two.structured_content["input"]["step2"]["content"] == {"color": "teal"}
    assert asked == ["What is your name?"]
    assert multiple.structured_content is not None
    assert set(multiple.structured_content["input"]) == {"user_name"}


async def test_an_answer_that_does_not_match_the_form_is_refused_and_nothing_is_decided(
    service: ServiceProcess,
) -> None:
    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": 42})

    cid = f"rounds-{uuid.uuid4()}"
    async with session(service.base_url, elicitation_callback=elicit) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool(MULTI_ROUND, {}, meta=bound(cid))
    assert refused.value.error.code == INVALID_PARAMS
    with psycopg.connect(service.database_url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM tool_calls WHERE conversation_id = %s", [cid]).fetchone() == (
            0,
        )


async def test_a_sampling_request_is_built_from_the_calls_argument(service: ServiceProcess) -> None:
    prompts: list[str] = []

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        prompts.append(content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-model"
        )

    async with session(service.base_url, sampling_callback=sample) as client:
        result = await client.call_tool(
            "conformance_test-sampling",
            {"prompt": "The capital of France?"},
            meta=bound(f"rounds-{uuid.uuid4()}"),
        )
    assert prompts == ["The capital of France?"]
    assert result.structured_content is not None
    assert result.structured_content["input"]["llm"]["content"]["text"] == "Paris"
