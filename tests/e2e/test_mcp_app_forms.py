"""An app's forms of its own (the Runtime API's ``app_ask``, the conformance fixture app's tools)
answered through the MCP client at 2025-11-25, against a real ``serve``: each form an
``elicitation/create`` with the app's requestedSchema, the answer checked against it (``-32602``,
nothing stored, when it does not fit), a declined form leaving the question open for the Host, and
the call's result the answers, as the outbox row carries them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from harness.database import DatabaseFactory
from harness.mcp import bound
from tests.conftest import HOST, ServiceProcess, service_on_own_database
from tests.e2e.test_mcp_elicitation import eliciting_session, outbox_results

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with service_on_own_database(
        database_factory, tmp_path_factory.mktemp("mcp-app-forms"), APP_FOLDERS=str(FIXTURES)
    ) as process:
        yield process


def conversation() -> str:
    return f"forms-{uuid.uuid4()}"


async def test_two_forms_are_elicited_in_turn_and_the_result_is_their_answers(
    service: ServiceProcess,
) -> None:
    cid = conversation()
    asked: list[types.ElicitRequestParams] = []

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        schema: Any = params.requested_schema  # type: ignore[union-attr]
        content = {"name": "Ada"} if "name" in schema["properties"] else {"confirm": True}
        return types.ElicitResult(action="accept", content=content)

    async with eliciting_session(service.base_url, elicit) as session:
        result = await session.call_tool("conformance.multi-input", {}, meta=bound(cid))
    assert [params.message for params in asked] == ["Your name?", "Go ahead?"]
    answers = {"name": {"name": "Ada"}, "confirm": {"confirm": True}}
    assert result.structured_content is not None
    assert (result.structured_content["state"], result.structured_content["answers"]) == ("answered", answers)
    (delivered,) = outbox_results(service, cid)
    assert delivered == result.structured_content


async def test_an_answer_outside_the_form_is_invalid_params_and_records_nothing(
    service: ServiceProcess,
) -> None:
    cid = conversation()

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"untitledSingle": "option9"})

    async with eliciting_session(service.base_url, elicit) as session:
        with pytest.raises(Exception, match="each answer must fit its form"):
            await session.call_tool("conformance.test-elicitation-sep1330-enums", {}, meta=bound(cid))
    assert outbox_results(service, cid) == []


async def test_a_declined_form_stays_open_for_the_host(service: ServiceProcess) -> None:
    cid = conversation()

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with eliciting_session(service.base_url, elicit) as session:
        result = await session.call_tool("conformance.confirm-delete", {"filename": "c.txt"}, meta=bound(cid))
    assert result.structured_content is not None
    assert result.structured_content["status"] == "accepted"
    call_id = result.structured_content["tool_call_id"]
    async with httpx.AsyncClient(base_url=service.base_url, headers=HOST) as host:
        answered = await host.post(
            f"/v1/host/interactions/{call_id}/answers", json={"answers": {"confirm": {"confirm": False}}}
        )
    assert (answered.status_code, answered.json()["status"]) == (200, "answered")
    (delivered,) = outbox_results(service, cid)
    assert delivered["answers"] == {"confirm": {"confirm": False}}
