"""The MCP face of a real ``serve`` process, driven by the ``mcp`` SDK's own client over HTTP:
the token check, tools/list, and tools/call sharing one answer per tool_call_id with REST."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any, cast

import httpx
import mcp_types as types
import psycopg
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from harness.mcp import INITIALIZE, bound, mcp_session
from service.manifests import Registry
from service.version import __version__
from tests.conftest import AGENT, AGENT_TOKEN, HOST, HOST_TOKEN, ROOT, ServiceProcess, service_on_own_database

pytestmark = pytest.mark.e2e

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """One service for the module; each test works in conversations of its own."""
    with service_on_own_database(database_factory, tmp_path_factory.mktemp("mcp")) as process:
        yield process


@pytest.fixture
def db(service: ServiceProcess) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def conversation() -> str:
    return f"mcp-{uuid.uuid4()}"


def rest_call(service: ServiceProcess, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{service.base_url}/v1/tool-calls", json=body, headers=AGENT, timeout=10)


def start_arguments(seconds: int = 1500) -> dict[str, Any]:
    return {"duration_seconds": seconds, "activity": "write report"}


def test_without_the_agent_token_the_handshake_is_401_before_any_json_rpc(service: ServiceProcess) -> None:
    url = f"{service.base_url}/mcp"
    oversized = {"Authorization": "Bearer " + "A" * 4_000_000}  # refused before any hash or parse
    for headers in (
        {},
        {"Authorization": f"Bearer {HOST_TOKEN}"},
        {"Authorization": "Bearer not-a-token"},
        oversized,
    ):
        answer = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=10)
        assert answer.status_code == 401
        assert answer.json()["error"] == "unauthorized" and answer.json()["message"]
        assert answer.headers["www-authenticate"].startswith("Bearer")
    accepted = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **AGENT}, timeout=10)
    assert accepted.status_code == 200
    assert accepted.json()["result"]["protocolVersion"] == "2025-11-25"
    assert accepted.headers["mcp-session-id"]


async def test_the_sdk_client_connects_with_the_agent_token_and_fails_without(
    service: ServiceProcess,
) -> None:
    async with mcp_session(service.base_url) as mcp:
        assert mcp.session.protocol_version == "2025-11-25"
        assert mcp.session.server_info is not None and mcp.session.server_info.name == "lineup-runtime"
        assert mcp.session.server_info.version == __version__
        capabilities = mcp.session.server_capabilities
        assert capabilities is not None and capabilities.tools is not None and capabilities.tasks is not None
    with pytest.raises(Exception) as refused:  # noqa: PT011 - the SDK wraps the 401 in its own error
        async with mcp_session(service.base_url, token=HOST_TOKEN):
            pass
    assert "401" in repr(refused.value) or "error response" in repr(refused.value).lower()


async def test_tools_list_is_the_manifests_tools_with_their_input_schemas(service: ServiceProcess) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        rest = (await http.get(f"{service.base_url}/v1/tools", headers=AGENT)).json()["tools"]
    async with mcp_session(service.base_url) as mcp:
        everything = (await mcp.session.list_tools()).tools
    # The apps' tools, then operation_status (how a long call ended, for a client without tasks).
    assert everything[-1].name == "operation_status"
    listed = everything[:-1]
    # Listed under provider-safe names; the manifest's (REST's) name is the title and in _meta.
    assert [tool.title for tool in listed] == [tool["name"] for tool in rest]
    assert [tool.name for tool in listed] == [tool["name"].replace(".", "_") for tool in rest]
    for tool, manifest in zip(listed, rest, strict=True):
        assert tool.meta is not None and tool.meta["io.lineup/tool"] == manifest["name"]
        assert tool.input_schema == manifest["input_schema"]
        assert tool.description == manifest["description"]
    by_name = {tool.name: tool for tool in listed}
    interrupt = by_name["pomodoro_interrupt"].annotations
    assert interrupt is not None and interrupt.read_only_hint is False and interrupt.idempotent_hint is True
    execution = by_name["pomodoro_start"].execution
    assert execution is not None and execution.task_support == "optional"
    assert by_name["pomodoro_interrupt"].execution is None


PROVIDER_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.mark.parametrize("apps", [False, True], ids=["plain", "renders-mcp-apps"])
def test_every_listed_tool_name_is_one_every_model_provider_accepts(
    service: ServiceProcess, apps: bool
) -> None:
    """OpenAI's API (and those compatible with it) and Anthropic's refuse a request whose function
    names do not match the pattern; an agent framework hands every listed name to its model."""
    capabilities: dict[str, Any] = (
        {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}
        if apps
        else {}
    )
    opened = httpx.post(
        f"{service.base_url}/mcp",
        json={
            **INITIALIZE,
            "params": {**cast(dict[str, Any], INITIALIZE["params"]), "capabilities": capabilities},
        },
        headers={**MCP_HEADERS, **AGENT},
        timeout=10,
    )
    session = {**MCP_HEADERS, **AGENT, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    listed = httpx.post(
        f"{service.base_url}/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        headers=session,
        timeout=10,
    ).json()["result"]["tools"]
    assert len(listed) == (8 if apps else 4)
    for tool in listed:
        assert PROVIDER_SAFE.match(tool["name"]), tool["name"]
        assert tool["title"] == tool["_meta"]["io.lineup/tool"]


async def test_a_tool_answers_alike_by_its_listed_name_and_by_its_manifest_name(
    service: ServiceProcess,
) -> None:
    cid, call_id = conversation(), f"start-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        listed = await mcp.call(
            "pomodoro_start", start_arguments(), conversation_id=cid, tool_call_id=call_id
        )
        dotted = await mcp.call(
            "pomodoro.start", start_arguments(), conversation_id=cid, tool_call_id=call_id
        )
        assert listed.is_error is False and listed.structured_content["status"] == "accepted"
        assert dotted.structured_content == listed.structured_content  # one call, replayed
        assert dotted.content == listed.content
        interrupt_id = f"interrupt-{uuid.uuid4()}"
        ended = await mcp.call("pomodoro_interrupt", {}, conversation_id=cid, tool_call_id=interrupt_id)
        again = await mcp.call("pomodoro.interrupt", {}, conversation_id=cid, tool_call_id=interrupt_id)
        assert ended.is_error is False and ended.structured_content["status"] == "interrupted"
        assert again.structured_content == ended.structured_content and again.content == ended.content


async def test_start_answers_the_rest_body_as_structured_content(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    cid, call_id = conversation(), f"start-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        result = await mcp.call(
            "pomodoro.start", start_arguments(), conversation_id=cid, tool_call_id=call_id
        )
    body = result.structured_content
    assert result.is_error is False
    assert body["status"] == "accepted" and body["tool_call_id"] == call_id
    assert body["operation"]["state"] == "focusing" and body["operation"]["duration_seconds"] == 1500
    assert result.meta is not None
    assert result.meta["io.lineup/tool_call_id"] == call_id and result.meta["io.lineup/http_status"] == 202
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.splitlines()[0].startswith("A 1500-second focus period started")
    row = db.execute("SELECT * FROM operations WHERE conversation_id = %s", [cid]).fetchone()
    assert row is not None and str(row["operation_id"]) == body["operation"]["operation_id"]
    assert row["tool_call_id"] == call_id


async def test_the_same_tool_call_id_over_mcp_and_rest_is_one_answer_one_operation(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    cid, call_id = conversation(), f"start-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        first = await mcp.call("pomodoro.start", start_arguments(), conversation_id=cid, tool_call_id=call_id)
        again = await mcp.call("pomodoro.start", start_arguments(), conversation_id=cid, tool_call_id=call_id)
    rest = rest_call(
        service,
        {
            "tool_call_id": call_id,
            "conversation_id": cid,
            "tool": "pomodoro.start",
            "arguments": start_arguments(),
        },
    )
    assert rest.status_code == 202
    assert first.structured_content == again.structured_content == rest.json()
    assert db.execute(
        "SELECT count(*) AS n FROM operations WHERE conversation_id = %s", [cid]
    ).fetchone() == {"n": 1}
    assert db.execute(
        "SELECT count(*) AS n FROM tool_calls WHERE tool_call_id = %s", [call_id]
    ).fetchone() == {"n": 1}


async def test_a_call_first_made_over_rest_replays_over_mcp(service: ServiceProcess) -> None:
    cid, call_id = conversation(), f"start-{uuid.uuid4()}"
    body = {
        "tool_call_id": call_id,
        "conversation_id": cid,
        "tool": "pomodoro.start",
        "arguments": start_arguments(),
    }
    rest = rest_call(service, body)
    async with mcp_session(service.base_url) as mcp:
        replayed = await mcp.call(
            "pomodoro.start", start_arguments(), conversation_id=cid, tool_call_id=call_id
        )
    assert replayed.structured_content == rest.json()
    assert replayed.meta is not None and replayed.meta["io.lineup/http_status"] == 202


async def test_the_same_tool_call_id_with_other_arguments_is_idempotency_key_reused(
    service: ServiceProcess,
) -> None:
    cid, call_id = conversation(), f"start-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        await mcp.call("pomodoro.start", start_arguments(1500), conversation_id=cid, tool_call_id=call_id)
        reused = await mcp.call(
            "pomodoro.start", start_arguments(600), conversation_id=cid, tool_call_id=call_id
        )
    assert reused.is_error is True
    assert reused.structured_content["error"] == "idempotency_key_reused"
    assert reused.meta is not None and reused.meta["io.lineup/http_status"] == 409
    body = {
        "tool_call_id": call_id,
        "conversation_id": cid,
        "tool": "pomodoro.start",
        "arguments": start_arguments(600),
    }
    assert rest_call(service, body).json()["error"] == "idempotency_key_reused"


async def test_a_second_start_is_operation_already_focusing(service: ServiceProcess) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        first = await mcp.call("pomodoro.start", start_arguments(), conversation_id=cid)
        second = await mcp.call("pomodoro.start", start_arguments(), conversation_id=cid)
    assert second.is_error is True
    assert second.structured_content["error"] == "operation_already_focusing"
    assert second.structured_content["operation_id"] == first.structured_content["operation"]["operation_id"]


async def test_invalid_arguments_are_an_error_result_with_details_and_record_nothing(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    cid, call_id = conversation(), f"start-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        invalid = await mcp.call(
            "pomodoro.start", {"duration_seconds": "soon"}, conversation_id=cid, tool_call_id=call_id
        )
        nul = await mcp.call(
            "pomodoro.start", {"duration_seconds": 60, "activity": "a\x00b"}, conversation_id=cid
        )
        corrected = await mcp.call(
            "pomodoro.start", start_arguments(), conversation_id=cid, tool_call_id=call_id
        )
    assert invalid.is_error is True
    assert invalid.structured_content["error"] == "invalid_arguments"
    assert invalid.structured_content["details"][0]["path"] == "arguments.duration_seconds"
    assert invalid.meta is not None and invalid.meta["io.lineup/http_status"] == 422
    assert nul.is_error is True and nul.structured_content["error"] == "invalid_request"
    assert corrected.is_error is False and corrected.structured_content["status"] == "accepted"
    assert db.execute(
        "SELECT count(*) AS n FROM operations WHERE conversation_id = %s", [cid]
    ).fetchone() == {"n": 1}


async def test_a_call_without_its_conversation_is_invalid_params(service: ServiceProcess) -> None:
    async with mcp_session(service.base_url) as mcp:
        with pytest.raises(MCPError) as missing:
            await mcp.session.call_tool("pomodoro.interrupt", {})
        with pytest.raises(MCPError) as empty:
            await mcp.session.call_tool("pomodoro.interrupt", {}, meta=bound(""))
        with pytest.raises(MCPError) as not_a_string:
            await mcp.session.call_tool(
                "pomodoro.interrupt",
                {},
                meta=cast(
                    types.RequestParamsMeta, {"io.lineup/conversation_id": "c", "io.lineup/tool_call_id": 7}
                ),
            )
    assert missing.value.code == empty.value.code == not_a_string.value.code == -32602
    assert "io.lineup/conversation_id" in missing.value.message


async def test_ids_that_cannot_travel_in_a_header_or_a_path_are_invalid_params_as_over_rest(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        with pytest.raises(MCPError) as line_break:
            await mcp.session.call_tool("pomodoro.interrupt", {}, meta=bound(cid, "call\r\n1"))
        with pytest.raises(MCPError) as slash:
            await mcp.session.call_tool("pomodoro.interrupt", {}, meta=bound("a/b"))
    assert line_break.value.code == slash.value.code == -32602
    assert "printable ASCII" in line_break.value.message
    recorded = db.execute("SELECT count(*) AS n FROM tool_calls WHERE conversation_id = %s", [cid]).fetchone()
    assert recorded == {"n": 0}


async def test_an_unknown_tool_is_a_protocol_error_over_mcp_and_404_over_rest(
    service: ServiceProcess,
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        with pytest.raises(MCPError) as unknown:
            await mcp.call("pomodoro.pause", {}, conversation_id=cid)
    assert unknown.value.code == -32602 and unknown.value.message == "Unknown tool: pomodoro.pause"
    rest = rest_call(
        service,
        {
            "tool_call_id": f"t-{uuid.uuid4()}",
            "conversation_id": cid,
            "tool": "pomodoro.pause",
            "arguments": {},
        },
    )
    assert rest.status_code == 404 and rest.json()["error"] == "unknown_tool"


async def test_interrupt_is_interrupted_then_operation_already_final(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        started = await mcp.call("pomodoro.start", start_arguments(), conversation_id=cid)
        stopped = await mcp.call("pomodoro.interrupt", {}, conversation_id=cid)
        again = await mcp.call("pomodoro.interrupt", {}, conversation_id=cid)
    operation_id = started.structured_content["operation"]["operation_id"]
    assert stopped.structured_content["status"] == "interrupted"
    assert stopped.structured_content["operation_id"] == operation_id
    assert again.structured_content["status"] == "operation_already_final"
    assert again.structured_content["final_state"] == "interrupted"
    assert again.is_error is False
    rows = db.execute("SELECT * FROM outbox WHERE conversation_id = %s", [cid]).fetchall()
    assert len(rows) == 1 and rows[0]["payload"]["result"]["reason"] == "agent_interrupt"


async def test_without_a_tool_call_id_the_server_makes_one_and_rest_can_replay_it(
    service: ServiceProcess,
) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        result = await mcp.call("pomodoro.start", start_arguments(), conversation_id=cid)
    assert result.meta is not None
    made = result.meta["io.lineup/tool_call_id"]
    assert made.startswith("mcp-") and result.structured_content["tool_call_id"] == made
    body = {
        "tool_call_id": made,
        "conversation_id": cid,
        "tool": "pomodoro.start",
        "arguments": start_arguments(),
    }
    assert rest_call(service, body).json() == result.structured_content


async def test_a_2026_client_calls_the_same_tools_without_a_session(
    service: ServiceProcess, registry: Registry
) -> None:
    cid = conversation()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})
    transport = streamable_http_client(f"{service.base_url}/mcp", http_client=http)
    async with http, Client(transport) as client:
        assert client.protocol_version == "2026-07-28"
        assert [tool.name for tool in (await client.list_tools()).tools] == [
            *(name.replace(".", "_") for name in sorted(registry.tools)),
            "operation_status",
        ]
        started = await client.call_tool("pomodoro_start", start_arguments(), meta=bound(cid))
        stopped = await client.call_tool("pomodoro.interrupt", {}, meta=bound(cid))
    assert started.structured_content["status"] == "accepted"
    assert stopped.structured_content["status"] == "interrupted"


def readme_python_client() -> str:
    section = (ROOT / "README.md").read_text().split("## Connect an MCP client", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_readmes_python_client_calls_a_tool(service: ServiceProcess) -> None:
    code = readme_python_client().replace("http://localhost:8000", service.base_url)
    code = code.replace('"conv-3"', f'"{conversation()}"').replace('"call-3"', f'"readme-{uuid.uuid4()}"')
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "AGENT_TOKEN": AGENT_TOKEN, "LINEUP_URL": service.base_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "'status': 'accepted'" in done.stdout, done.stdout


def test_a_wrong_token_is_401_and_the_right_one_400_without_a_session(service: ServiceProcess) -> None:
    # The README's check of a token, for when the Inspector hides the 401 behind an OAuth error.
    right = httpx.get(f"{service.base_url}/mcp", headers=AGENT, timeout=10)
    wrong = httpx.get(f"{service.base_url}/mcp", headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert (right.status_code, wrong.status_code) == (400, 401)


async def test_operation_status_answers_the_latest_operation_and_once_ended_the_relays_result(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    """The ending for a client without tasks: the same result object (and operation_id and
    tool_call_id) the relay delivers to the Agent's webhook."""
    cid, call_id = conversation(), f"start-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        nothing = await mcp.call("operation_status", {}, conversation_id=cid)
        assert nothing.is_error is False and nothing.structured_content is not None
        assert (
            nothing.structured_content["operation_id"] is None
            and nothing.structured_content["result"] is None
        )
        started = await mcp.call(
            "pomodoro_start", start_arguments(), conversation_id=cid, tool_call_id=call_id
        )
        operation_id = started.structured_content["operation"]["operation_id"]
        running = (
            await mcp.call("operation_status", {"wait_seconds": 0}, conversation_id=cid)
        ).structured_content
        assert (running["operation_id"], running["tool"], running["tool_call_id"]) == (
            operation_id,
            "pomodoro.start",
            call_id,
        )
        assert (running["state"], running["result"]) == ("focusing", None)
        await mcp.call("pomodoro_interrupt", {}, conversation_id=cid)
        ended = await mcp.call("operation_status", {}, conversation_id=cid)
        with pytest.raises(MCPError, match="wait_seconds"):
            await mcp.session.call_tool("operation_status", {"wait_seconds": 5}, meta=bound(cid))
        with pytest.raises(MCPError):
            await mcp.session.call_tool("operation_status", {}, meta=None)  # no conversation
    assert ended.structured_content["state"] == "interrupted"
    (row,) = db.execute(
        "SELECT payload, operation_id FROM outbox WHERE conversation_id = %s AND tool_call_id = %s",
        [cid, call_id],
    ).fetchall()
    assert ended.structured_content["result"] == row["payload"]["result"]
    assert (
        ended.structured_content["operation_id"] == str(row["operation_id"]) == row["payload"]["operation_id"]
    )
    assert "count this result once" in ended.content[0].text  # type: ignore[union-attr]


async def test_operation_status_answers_a_question_with_the_persons_answer_and_any_call_by_its_id(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    """interact.ask, for a client without tasks or elicitation: the question is the conversation's
    latest call, pending until the person answers at the Host, then answered with the result the
    relay delivers, under its tool_call_id; an earlier call is read by its own id."""
    cid, start_id, ask_id = conversation(), f"start-{uuid.uuid4()}", f"ask-{uuid.uuid4()}"
    async with mcp_session(service.base_url) as mcp:
        await mcp.call("pomodoro_start", start_arguments(), conversation_id=cid, tool_call_id=start_id)
        asked = await mcp.call(
            "interact_ask",
            {"prompt": "Tea or coffee?", "choices": ["tea", "coffee"]},
            conversation_id=cid,
            tool_call_id=ask_id,
        )
        assert asked.structured_content is not None and asked.structured_content["status"] == "accepted"
        waiting = (await mcp.call("operation_status", {}, conversation_id=cid)).structured_content
        assert waiting is not None
        assert (waiting["tool"], waiting["tool_call_id"], waiting["state"]) == (
            "interact.ask",
            ask_id,
            "pending",
        )
        assert (waiting["operation_id"], waiting["ends_at"], waiting["result"]) == (None, None, None)
        named = (
            await mcp.call("operation_status", {"tool_call_id": start_id}, conversation_id=cid)
        ).structured_content
        assert named is not None
        assert (named["tool"], named["tool_call_id"], named["state"]) == (
            "pomodoro.start",
            start_id,
            "focusing",
        )
        unknown = (
            await mcp.call("operation_status", {"tool_call_id": "never-made"}, conversation_id=cid)
        ).structured_content
        assert unknown is not None and unknown["tool_call_id"] is None and unknown["result"] is None
        with pytest.raises(MCPError, match="tool_call_id"):
            await mcp.session.call_tool("operation_status", {"tool_call_id": "has space"}, meta=bound(cid))
        with pytest.raises(MCPError, match="tool_call_id"):
            await mcp.session.call_tool("operation_status", {"tool_call_id": 7}, meta=bound(cid))

        # The person answers at the Host while the call waits for it.
        waited = asyncio.create_task(
            mcp.call("operation_status", {"tool_call_id": ask_id, "wait_seconds": 4}, conversation_id=cid)
        )
        async with httpx.AsyncClient(base_url=service.base_url, headers=HOST, timeout=10) as host:
            answered = await host.post(
                f"/v1/host/interactions/{ask_id}/answer",
                params={"conversation_id": cid},
                json={"answer": "tea"},
            )
        assert answered.status_code == 200, answered.text
        ended = await waited
        again = await mcp.call("operation_status", {}, conversation_id=cid)
    answer = ended.structured_content
    assert answer is not None and again.structured_content == answer
    assert (answer["state"], answer["tool_call_id"], answer["operation_id"]) == ("answered", ask_id, None)
    (row,) = db.execute(
        "SELECT payload FROM outbox WHERE conversation_id = %s AND tool_call_id = %s", [cid, ask_id]
    ).fetchall()
    assert answer["result"] == row["payload"]["result"] and answer["result"]["answer"] == "tea"
    assert answer["finalized_at"] == answer["result"]["answered_at"]
    assert "the person answered 'tea'; count this result once" in ended.content[0].text  # type: ignore[union-attr]


async def test_operation_status_waits_for_the_ending_woken_not_polling(service: ServiceProcess) -> None:
    cid = conversation()
    async with mcp_session(service.base_url) as mcp:
        await mcp.call("pomodoro_start", start_arguments(seconds=1), conversation_id=cid)
        ended = await mcp.call("operation_status", {"wait_seconds": 4}, conversation_id=cid)
    answer = ended.structured_content
    assert answer["state"] == "completed" and answer["result"]["reason"] == "deadline_reached"
    assert answer["result"]["focused_seconds"] == 1


def test_the_agents_conversation_may_come_from_the_lineup_conversation_id_header(
    service: ServiceProcess, db: psycopg.Connection[dict[str, Any]]
) -> None:
    """For clients that cannot set params._meta (LangChain's MCP adapters): _meta wins when both
    are given, and they must agree."""
    url = f"{service.base_url}/mcp"
    opened = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **AGENT}, timeout=10)
    session = {**MCP_HEADERS, **AGENT, "Mcp-Session-Id": opened.headers["mcp-session-id"]}

    def call(name: str, arguments: dict[str, Any], meta: dict[str, Any] | None, **headers: str) -> Any:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta is not None:
            params["_meta"] = meta
        message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
        return httpx.post(url, json=message, headers={**session, **headers}, timeout=10).json()

    cid = conversation()
    started = call("pomodoro_start", start_arguments(), None, **{"Lineup-Conversation-Id": cid})
    assert started["result"]["structuredContent"]["status"] == "accepted", started
    row = db.execute("SELECT conversation_id FROM operations WHERE conversation_id = %s", [cid]).fetchone()
    assert row is not None
    both = call("operation_status", {}, {"io.lineup/conversation_id": cid}, **{"Lineup-Conversation-Id": cid})
    assert both["result"]["structuredContent"]["conversation_id"] == cid
    disagree = call(
        "pomodoro_interrupt",
        {},
        {"io.lineup/conversation_id": conversation()},
        **{"Lineup-Conversation-Id": cid},
    )
    assert disagree["error"]["code"] == -32602 and "different conversations" in disagree["error"]["message"]
    malformed = call("pomodoro_interrupt", {}, None, **{"Lineup-Conversation-Id": "has space"})
    assert malformed["error"]["code"] == -32602 and "Lineup-Conversation-Id" in malformed["error"]["message"]
    neither = call("pomodoro_interrupt", {}, None)
    assert neither["error"]["code"] == -32602
    # Nothing was interrupted by the refused calls.
    state = db.execute("SELECT state FROM operations WHERE conversation_id = %s", [cid]).fetchone()
    assert state is not None and state["state"] == "focusing"
