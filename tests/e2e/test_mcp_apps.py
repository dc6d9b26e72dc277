"""MCP Apps on the wire of a real ``serve``: the ``io.modelcontextprotocol/ui`` extension, the
``ui://pomodoro/timer`` resource built from the Web Host's Pomodoro surface, and the View's app-only
tools, bound by the server to the operation the View was given."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from harness.mcp import modern_wire
from service.mcp.app_resource import MCP_APPS_SDK, surface_file
from tests.conftest import ServiceProcess, service_on_own_database
from tests.support.mcp_apps import APP_MIME_TYPE, CONVERSATION, POMODORO_URI, UI, AppsHost, RpcError

pytestmark = pytest.mark.e2e

READ, CLOSE = "pomodoro.app.read", "pomodoro.app.close"
SNAPSHOT, SAVE = "pomodoro.app.snapshot", "pomodoro.app.save_snapshot"
APP_TOOLS = {CLOSE, READ, SAVE, SNAPSHOT}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-apps")


@pytest.fixture(scope="module")
def service(database_factory: DatabaseFactory, logs: Path) -> Iterator[ServiceProcess]:
    with service_on_own_database(database_factory, logs) as process:
        yield process


@pytest.fixture
def host(service: ServiceProcess) -> Iterator[AppsHost]:
    with AppsHost(service.base_url) as opened:
        yield opened


def conversation() -> str:
    return f"apps-{uuid.uuid4()}"


def operation(service: ServiceProcess, operation_id: str) -> dict[str, Any]:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        row = db.execute(
            "SELECT state, reason FROM operations WHERE operation_id = %s", [operation_id]
        ).fetchone()
    assert row is not None
    return row


def instance_status(service: ServiceProcess, operation_id: str) -> str:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        row = db.execute(
            "SELECT i.status FROM app_instances i JOIN operations o USING (instance_id) WHERE o.operation_id = %s",
            [operation_id],
        ).fetchone()
    assert row is not None
    return str(row["status"])


def results(service: ServiceProcess, conversation_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        rows = db.execute("SELECT payload FROM outbox WHERE conversation_id = %s", [conversation_id])
        return [row["payload"]["result"] for row in rows.fetchall()]


async def test_the_server_declares_the_ui_extension_and_resources(
    service: ServiceProcess, host: AppsHost
) -> None:
    # At 2025-11-25 the wire's capabilities have no extensions member; resources are there.
    assert "resources" in host.initialized["capabilities"]
    async with modern_wire(service.base_url) as wire:
        discovered = (await wire.result("server/discover", {}))["capabilities"]
    assert discovered["extensions"][UI] == {"mimeTypes": [APP_MIME_TYPE]}
    assert "resources" in discovered


def test_pomodoro_start_names_its_view_and_only_an_apps_client_lists_the_app_only_tools(
    service: ServiceProcess, host: AppsHost
) -> None:
    tools = {tool["name"]: tool for tool in host.request("tools/list", {})["tools"]}
    assert tools["pomodoro.start"]["_meta"]["ui"]["resourceUri"] == POMODORO_URI
    assert "_meta" not in tools["pomodoro.interrupt"]
    for name in APP_TOOLS:
        assert tools[name]["_meta"]["ui"]["visibility"] == ["app"]
        assert "operation_id" in tools[name]["inputSchema"]["required"]
    with AppsHost(service.base_url, apps=False) as plain:
        listed = {tool["name"] for tool in plain.request("tools/list", {})["tools"]}
    assert listed == {"interact.ask", "pomodoro.interrupt", "pomodoro.start"}


def test_the_resource_is_the_web_hosts_surface_in_one_document_with_no_network(host: AppsHost) -> None:
    (listed,) = host.request("resources/list", {})["resources"]
    assert (listed["uri"], listed["mimeType"]) == (POMODORO_URI, APP_MIME_TYPE)
    (content,) = host.request("resources/read", {"uri": POMODORO_URI})["contents"]
    assert (content["uri"], content["mimeType"]) == (POMODORO_URI, APP_MIME_TYPE)
    csp = content["_meta"]["ui"]["csp"]
    assert csp == {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
    html = content["text"]
    # The Web Host's own files, whole, inline: the two surfaces cannot drift.
    for source in (surface_file("pomodoro.css"), surface_file("pomodoro.js"), MCP_APPS_SDK.read_text()):
        assert source in html
    assert 'data-testid="countdown"' in html
    # Nothing to load: no src, no href, no URL of any kind.
    assert not re.search(r"\b(src|href)\s*=", html)
    assert "lineup-sdk.js" not in html and "http://" not in html and "https://" not in html


def test_the_resource_is_byte_identical_on_every_replica(
    service: ServiceProcess, host: AppsHost, logs: Path
) -> None:
    first = host.request("resources/read", {"uri": POMODORO_URI})
    (logs / "replica").mkdir(exist_ok=True)
    replica = ServiceProcess(service.database_url, logs / "replica").start()
    try:
        with AppsHost(replica.base_url) as other:
            second = other.request("resources/read", {"uri": POMODORO_URI})
    finally:
        replica.stop()
    assert second == first
    assert host.request("resources/read", {"uri": POMODORO_URI}) == first


def test_an_unknown_resource_is_resource_not_found(host: AppsHost) -> None:
    with pytest.raises(RpcError) as raised:
        host.request("resources/read", {"uri": "ui://pomodoro/other"})
    assert raised.value.code == -32002


def test_the_view_reads_its_operation_with_the_server_clock(host: AppsHost) -> None:
    cid = conversation()
    operation_id = host.start(cid, activity="inspector view")
    result = host.view(READ, {"operation_id": operation_id})
    assert result["isError"] is False
    context = result["structuredContent"]
    assert context["status"] == "open" and context["conversation_id"] == cid
    assert context["operation"]["operation_id"] == operation_id
    assert (context["operation"]["state"], context["operation"]["activity"]) == ("focusing", "inspector view")
    assert context["operation"]["ends_at"] > context["server_time"] > context["operation"]["started_at"]


def test_the_views_close_is_the_lifecycle_close_and_ends_the_period_cancelled_once(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid = conversation()
    operation_id = host.start(cid)
    closed = host.view(CLOSE, {"operation_id": operation_id})["structuredContent"]
    assert closed["status"] == "closed" and closed["operation"]["state"] == "cancelled"
    again = host.view(CLOSE, {"operation_id": operation_id})["structuredContent"]
    assert again["operation"] == closed["operation"]
    assert operation(service, operation_id) == {"state": "cancelled", "reason": "app_closed"}
    read = host.view(READ, {"operation_id": operation_id})["structuredContent"]
    assert read["status"] == "closed" and read["operation"]["reason"] == "app_closed"
    deadline = time.monotonic() + 10
    while not results(service, cid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(r["state"], r["reason"]) for r in results(service, cid)] == [("cancelled", "app_closed")]


def test_the_snapshot_keeps_its_schema_size_revision_and_is_read_only_after_close(host: AppsHost) -> None:
    operation_id = host.start(conversation())
    empty = host.view(SNAPSHOT, {"operation_id": operation_id})["structuredContent"]
    assert (empty["revision"], empty["readonly"]) == (0, False)
    snapshot = {"operation_id": operation_id, "display_state": "focusing", "activity": "write report"}
    saved = host.view(SAVE, {"operation_id": operation_id, "expected_revision": 0, "data": snapshot})
    assert saved["structuredContent"] == {"revision": 1}
    stale = host.view(SAVE, {"operation_id": operation_id, "expected_revision": 0, "data": snapshot})
    assert stale["isError"] and stale["structuredContent"]["error"] == "revision_conflict"
    bad = host.view(SAVE, {"operation_id": operation_id, "expected_revision": 1, "data": {"remaining": 5}})
    assert bad["isError"] and bad["structuredContent"]["error"] == "state_schema_violation"
    big = {"activity": "x" * 5000}
    too_large = host.view(SAVE, {"operation_id": operation_id, "expected_revision": 1, "data": big})
    assert too_large["isError"] and too_large["structuredContent"]["error"] == "state_too_large"
    host.view(CLOSE, {"operation_id": operation_id})
    kept = host.view(SNAPSHOT, {"operation_id": operation_id})["structuredContent"]
    assert (kept["revision"], kept["readonly"], kept["data"]) == (1, True, snapshot)
    late = host.view(SAVE, {"operation_id": operation_id, "expected_revision": 1, "data": snapshot})
    assert late["isError"] and late["structuredContent"]["error"] == "state_readonly"


def test_a_view_of_an_old_result_shows_its_own_final_period_and_never_touches_the_next(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid = conversation()
    old = host.start(cid)
    host.call("pomodoro.interrupt", {}, {CONVERSATION: cid})
    new = host.start(cid)
    stale = host.view(READ, {"operation_id": old})["structuredContent"]
    assert stale["status"] == "closed" == instance_status(service, old)
    assert (stale["operation"]["operation_id"], stale["operation"]["state"]) == (old, "interrupted")
    host.view(CLOSE, {"operation_id": old})
    assert operation(service, new) == {"state": "focusing", "reason": None}
    assert host.view(READ, {"operation_id": new})["structuredContent"]["status"] == "open"
    assert instance_status(service, new) == "open"


def test_reading_an_overdue_period_settles_it_completed_as_every_read_does(host: AppsHost) -> None:
    operation_id = host.start(conversation(), seconds=1)
    time.sleep(1.2)
    read = host.view(READ, {"operation_id": operation_id})["structuredContent"]
    assert (read["operation"]["state"], read["operation"]["reason"], read["status"]) == (
        "completed",
        "deadline_reached",
        "closed",
    )


def test_an_operation_of_another_conversation_is_unknown_when_the_request_names_one(host: AppsHost) -> None:
    operation_id = host.start(conversation())
    for name in sorted(APP_TOOLS):
        arguments: dict[str, Any] = {"operation_id": operation_id}
        if name == SAVE:
            arguments |= {"expected_revision": 0, "data": {}}
        result = host.view(name, arguments, {CONVERSATION: conversation()})
        assert result["isError"] and result["structuredContent"]["error"] == "unknown_operation", name
    assert host.view(READ, {"operation_id": str(uuid.uuid4())})["structuredContent"]["error"] == (
        "unknown_operation"
    )


def crafted(operation_id: str, other: str) -> list[dict[str, Any]]:
    """Arguments a View (or anyone with the host's credentials) might try."""
    ids: list[Any] = [operation_id, other, str(uuid.uuid4()), "not-a-uuid", 7, None, [operation_id]]
    extra: list[dict[str, Any]] = [
        {"state": "completed"},
        {"state": "interrupted", "reason": "agent_interrupt"},
        {"reason": "deadline_reached", "finalized": True},
        {"ends_at": "2000-01-01T00:00:00Z", "duration_seconds": 1},
        {"conversation_id": "someone-else", "instance_id": str(uuid.uuid4())},
    ]
    snapshots = [
        {"operation_id": operation_id, "display_state": "completed"},
        {"display_state": "interrupted", "ends_at": "2000-01-01T00:00:00Z"},
        {"state": "completed", "reason": "deadline_reached"},
    ]
    arguments: list[dict[str, Any]] = [{}, *({"operation_id": value} for value in ids)]
    arguments += [{"operation_id": operation_id, **more} for more in extra]
    for data in snapshots:
        for revision in (0, 1, -1, 1.0, "0", 2**40):
            arguments.append({"operation_id": operation_id, "expected_revision": revision, "data": data})
    return arguments


def attempt(host: AppsHost, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None) -> int | None:
    """The JSON-RPC error code of the call, or None when it answered a tool result."""
    try:
        host.view(name, arguments, meta)
    except RpcError as refused:
        return refused.code if isinstance(refused.code, int) else 0
    return None


def test_no_app_only_tool_ends_a_period_other_than_closed_whatever_its_arguments(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid, elsewhere = conversation(), conversation()
    other = host.start(elsewhere)
    metas: list[dict[str, Any] | None] = [None, {CONVERSATION: cid}, {"io.lineup/tool_call_id": "x-1"}]
    for name in (READ, SNAPSHOT, SAVE):
        operation_id = host.start(cid)
        for arguments in crafted(operation_id, other):
            for meta in metas:
                assert attempt(host, name, arguments, meta) in (None, -32602), (name, arguments)
                assert operation(service, operation_id) == {"state": "focusing", "reason": None}, (
                    name,
                    arguments,
                )
        host.call("pomodoro.interrupt", {}, {CONVERSATION: cid})
    operation_id = host.start(cid)
    for arguments in crafted(operation_id, other):
        assert attempt(host, CLOSE, arguments, {CONVERSATION: cid}) in (None, -32602), arguments
        assert operation(service, operation_id)["state"] in ("focusing", "cancelled"), arguments
    assert operation(service, operation_id) == {"state": "cancelled", "reason": "app_closed"}
    assert operation(service, other) == {"state": "focusing", "reason": None}
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        endings = db.execute(
            "SELECT state, reason FROM operations WHERE conversation_id = %s AND state <> 'focusing'", [cid]
        ).fetchall()
    # Three periods the Agent interrupted between the rounds, and the one the close ended.
    assert sorted((row["state"], row["reason"]) for row in endings) == [
        ("cancelled", "app_closed"),
        *[("interrupted", "agent_interrupt")] * 3,
    ]
