"""MCP Apps on the wire of a real ``serve``: the ``io.modelcontextprotocol/ui`` extension, the
``ui://pomodoro/timer`` resource built from the Web Host's Pomodoro surface, and the View's app-only
tools, bound by the server to the call's conversation and operation through the View token it
minted into that call's result — never by anything the View names."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import psycopg
import pytest
from psycopg.rows import dict_row

from harness import processes
from harness.database import DatabaseFactory
from harness.mcp import modern_wire
from service.manifests import Registry
from service.mcp.app_resource import APP_SCOPE, MCP_APPS_SDK, surface_file
from service.mcp.view_tokens import ViewTokens
from tests.conftest import AGENT, HOST_SESSION_SECRET, ROOT, ServiceProcess, service_on_own_database
from tests.support.mcp_apps import (
    APP_MIME_TYPE,
    CONVERSATION,
    POMODORO_URI,
    UI,
    VIEW_TOKEN,
    AppsHost,
    Opened,
    RpcError,
)

pytestmark = pytest.mark.e2e

READ, CLOSE = "pomodoro_app_read", "pomodoro_app_close"  # as listed (service.tool_names)
SNAPSHOT, SAVE = "pomodoro_app_snapshot", "pomodoro_app_save_snapshot"
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
    # At 2025-11-25 too (that revision's wire model has no extensions member: the server adds it).
    assert "resources" in host.initialized["capabilities"]
    assert host.initialized["capabilities"]["extensions"][UI] == {"mimeTypes": [APP_MIME_TYPE]}
    async with modern_wire(service.base_url) as wire:
        discovered = (await wire.result("server/discover", {}))["capabilities"]
    assert discovered["extensions"][UI] == {"mimeTypes": [APP_MIME_TYPE]}
    assert "resources" in discovered


def test_pomodoro_start_names_its_view_and_only_an_apps_client_lists_the_app_only_tools(
    service: ServiceProcess, host: AppsHost, registry: Registry
) -> None:
    tools = {tool["name"]: tool for tool in host.request("tools/list", {})["tools"]}
    assert tools["pomodoro_start"]["_meta"]["ui"]["resourceUri"] == POMODORO_URI
    assert tools["pomodoro_interrupt"]["_meta"] == {"io.lineup/tool": "pomodoro.interrupt"}
    for name in APP_TOOLS:
        assert tools[name]["_meta"]["ui"]["visibility"] == ["app"]
        assert tools[name]["title"] == tools[name]["_meta"]["io.lineup/tool"] == name.replace("_", ".", 2)
        assert "view_token" in tools[name]["inputSchema"]["required"]
        assert "operation_id" not in tools[name]["inputSchema"]["properties"]
    with AppsHost(service.base_url, apps=False) as plain:
        listed = {tool["name"] for tool in plain.request("tools/list", {})["tools"]}
    # The Agent's Tools (what the registry runs), listed provider-safe, then operation_status.
    assert listed == {name.replace(".", "_") for name in registry.tools} | {"operation_status"}


def test_the_resource_is_the_web_hosts_surface_in_one_document_with_no_network(host: AppsHost) -> None:
    (listed,) = host.request("resources/list", {})["resources"]
    assert (listed["uri"], listed["mimeType"]) == (POMODORO_URI, APP_MIME_TYPE)
    (content,) = host.request("resources/read", {"uri": POMODORO_URI})["contents"]
    assert (content["uri"], content["mimeType"]) == (POMODORO_URI, APP_MIME_TYPE)
    csp = content["_meta"]["ui"]["csp"]
    assert csp == {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
    html = content["text"]
    # The Web Host's own files, whole, inline: the two surfaces cannot drift.
    surface = ROOT / "service" / "apps" / "pomodoro" / "surface"
    sdk = MCP_APPS_SDK.read_text().replace(APP_SCOPE, "pomodoro")
    for source in (surface_file(surface, "pomodoro.css"), surface_file(surface, "pomodoro.js"), sdk):
        assert source in html
    assert 'data-testid="countdown"' in html
    # Nothing to load: no src, no href, no URL of any kind.
    assert not re.search(r"\b(src|href)\s*=", html)
    assert "lineup-sdk.js" not in html and "http://" not in html and "https://" not in html


def test_the_resource_is_byte_identical_and_a_view_token_good_on_every_replica(
    service: ServiceProcess, host: AppsHost, logs: Path
) -> None:
    first = host.request("resources/read", {"uri": POMODORO_URI})
    opened = host.open(conversation())
    (logs / "replica").mkdir(exist_ok=True)
    replica = ServiceProcess(service.database_url, logs / "replica")
    try:
        processes.ServiceProcess.start(replica)  # and waits longer than 20 s: a loaded machine is slow
        replica.wait_http(f"{replica.base_url}/healthz", 90.0)
        with AppsHost(replica.base_url) as other:
            second = other.request("resources/read", {"uri": POMODORO_URI})
            # A token minted by another process (started before this one) opens its operation here.
            read = other.view(READ, {"view_token": opened.token})["structuredContent"]
    finally:
        replica.stop()
    assert second == first
    assert read["operation"]["operation_id"] == opened.operation_id
    assert host.request("resources/read", {"uri": POMODORO_URI}) == first


def test_an_unknown_resource_is_resource_not_found(host: AppsHost) -> None:
    with pytest.raises(RpcError) as raised:
        host.request("resources/read", {"uri": "ui://pomodoro/other"})
    assert raised.value.code == -32002


def test_the_start_result_carries_the_view_token_in_its_meta_only_and_the_rest_body_unchanged(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid = conversation()
    meta = {CONVERSATION: cid, "io.lineup/tool_call_id": f"{cid}-start"}
    arguments = {"duration_seconds": 1500, "activity": "write report"}
    result = host.call("pomodoro.start", arguments, meta)
    operation_id = result["structuredContent"]["operation"]["operation_id"]
    token = result["_meta"][VIEW_TOKEN]
    assert ViewTokens.operation_of(token) == uuid.UUID(operation_id)
    # The REST face answers the same call with exactly the structuredContent, and no token.
    rest = httpx.post(
        f"{service.base_url}/v1/tool-calls",
        headers=AGENT,
        json={
            "tool_call_id": f"{cid}-start",
            "conversation_id": cid,
            "tool": "pomodoro.start",
            "arguments": arguments,
        },
        timeout=10,
    )
    assert rest.status_code == 202 and rest.json() == result["structuredContent"]
    assert token not in rest.text
    # A replay answers the same token; a client that renders no MCP App gets none.
    assert host.call("pomodoro.start", arguments, meta)["_meta"][VIEW_TOKEN] == token
    with AppsHost(service.base_url, apps=False) as plain:
        replayed = plain.call("pomodoro.start", arguments, meta)
    assert replayed["structuredContent"] == result["structuredContent"]
    assert VIEW_TOKEN not in replayed["_meta"]
    # A second start is refused naming the focusing period, with that period's token: a View
    # rendered beside the refusal shows the period that is running.
    refused = host.call("pomodoro.start", arguments, {CONVERSATION: cid})
    assert refused["structuredContent"]["error"] == "operation_already_focusing"
    assert refused["_meta"][VIEW_TOKEN] == token


def test_a_start_run_as_a_task_carries_the_view_token_and_so_does_the_tasks_result(host: AppsHost) -> None:
    cid = conversation()
    params = {
        "name": "pomodoro.start",
        "arguments": {"duration_seconds": 1500},
        "_meta": {CONVERSATION: cid},
        "task": {},
    }
    created = host.request("tools/call", params)
    task_id, token = created["task"]["taskId"], created["_meta"][VIEW_TOKEN]
    assert ViewTokens.operation_of(token) == uuid.UUID(task_id)
    host.call("pomodoro.interrupt", {}, {CONVERSATION: cid})
    final = host.request("tasks/result", {"taskId": task_id})
    assert final["_meta"][VIEW_TOKEN] == token
    read = host.view(READ, {"view_token": token})["structuredContent"]
    assert (read["operation"]["operation_id"], read["operation"]["state"]) == (task_id, "interrupted")


def test_the_view_reads_its_operation_with_the_server_clock(host: AppsHost) -> None:
    cid = conversation()
    opened = host.open(cid, activity="inspector view")
    result = host.view(READ, {"view_token": opened.token})
    assert result["isError"] is False
    context = result["structuredContent"]
    assert context["status"] == "open" and context["conversation_id"] == cid
    assert context["operation"]["operation_id"] == opened.operation_id
    assert (context["operation"]["state"], context["operation"]["activity"]) == ("focusing", "inspector view")
    assert context["operation"]["ends_at"] > context["server_time"] > context["operation"]["started_at"]
    # The text is a sentence for a person; the View reads the structure.
    ends_at = context["operation"]["ends_at"]
    assert result["content"] == [{"type": "text", "text": f"The focus period is focusing until {ends_at}."}]


async def test_an_app_only_call_answers_a_call_tool_result_at_both_revisions(
    service: ServiceProcess, host: AppsHost
) -> None:
    # The View's tools are answered above the SDK's generic tools/call checks: their answers must
    # still be each revision's CallToolResult, and malformed requests its -32602.
    opened = host.open(conversation())
    legacy = host.view(READ, {"view_token": opened.token})
    assert "resultType" not in legacy
    types.CallToolResult.model_validate(legacy)
    async with modern_wire(service.base_url) as wire:
        modern = await wire.result("tools/call", {"name": READ, "arguments": {"view_token": opened.token}})
        malformed = await wire.error("tools/call", {"name": READ, "arguments": [opened.token]})
        unknown_argument = await wire.error(
            "tools/call", {"name": READ, "arguments": {"view_token": opened.token, "operation_id": "x"}}
        )
    assert modern["resultType"] == "complete"
    assert modern["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "lineup-runtime"
    types.CallToolResult.model_validate(modern)
    assert modern["structuredContent"]["operation"] == legacy["structuredContent"]["operation"]
    assert malformed["code"] == unknown_argument["code"] == -32602
    with pytest.raises(RpcError) as refused:
        host.request("tools/call", {"name": READ, "arguments": {"view_token": opened.token}, "_meta": "x"})
    assert refused.value.code == -32602


def test_the_views_close_is_the_lifecycle_close_and_ends_the_period_cancelled_once(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid = conversation()
    opened = host.open(cid)
    closed = host.view(CLOSE, {"view_token": opened.token})["structuredContent"]
    assert closed["status"] == "closed" and closed["operation"]["state"] == "cancelled"
    again = host.view(CLOSE, {"view_token": opened.token})["structuredContent"]
    assert again["operation"] == closed["operation"]
    assert operation(service, opened.operation_id) == {"state": "cancelled", "reason": "app_closed"}
    read = host.view(READ, {"view_token": opened.token})["structuredContent"]
    assert read["status"] == "closed" and read["operation"]["reason"] == "app_closed"
    deadline = time.monotonic() + 10
    while not results(service, cid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(r["state"], r["reason"]) for r in results(service, cid)] == [("cancelled", "app_closed")]


def test_the_snapshot_keeps_its_schema_size_revision_and_is_read_only_after_close(host: AppsHost) -> None:
    opened = host.open(conversation())
    token = opened.token
    empty = host.view(SNAPSHOT, {"view_token": token})["structuredContent"]
    assert (empty["revision"], empty["readonly"]) == (0, False)
    snapshot = {"operation_id": opened.operation_id, "display_state": "focusing", "activity": "write report"}
    saved = host.view(SAVE, {"view_token": token, "expected_revision": 0, "data": snapshot})
    assert saved["structuredContent"] == {"revision": 1}
    stale = host.view(SAVE, {"view_token": token, "expected_revision": 0, "data": snapshot})
    assert stale["isError"] and stale["structuredContent"]["error"] == "revision_conflict"
    bad = host.view(SAVE, {"view_token": token, "expected_revision": 1, "data": {"remaining": 5}})
    assert bad["isError"] and bad["structuredContent"]["error"] == "state_schema_violation"
    big = {"activity": "x" * 5000}
    too_large = host.view(SAVE, {"view_token": token, "expected_revision": 1, "data": big})
    assert too_large["isError"] and too_large["structuredContent"]["error"] == "state_too_large"
    host.view(CLOSE, {"view_token": token})
    kept = host.view(SNAPSHOT, {"view_token": token})["structuredContent"]
    assert (kept["revision"], kept["readonly"], kept["data"]) == (1, True, snapshot)
    late = host.view(SAVE, {"view_token": token, "expected_revision": 1, "data": snapshot})
    assert late["isError"] and late["structuredContent"]["error"] == "state_readonly"


def test_a_view_of_an_old_result_shows_its_own_final_period_and_never_touches_the_next(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid = conversation()
    old = host.open(cid)
    host.call("pomodoro.interrupt", {}, {CONVERSATION: cid})
    new = host.open(cid)
    stale = host.view(READ, {"view_token": old.token})["structuredContent"]
    assert stale["status"] == "closed" == instance_status(service, old.operation_id)
    assert (stale["operation"]["operation_id"], stale["operation"]["state"]) == (
        old.operation_id,
        "interrupted",
    )
    host.view(CLOSE, {"view_token": old.token})
    assert operation(service, new.operation_id) == {"state": "focusing", "reason": None}
    assert host.view(READ, {"view_token": new.token})["structuredContent"]["status"] == "open"
    assert instance_status(service, new.operation_id) == "open"


def test_reading_an_overdue_period_settles_it_completed_as_every_read_does(host: AppsHost) -> None:
    opened = host.open(conversation(), seconds=1)
    time.sleep(1.2)
    read = host.view(READ, {"view_token": opened.token})["structuredContent"]
    assert (read["operation"]["state"], read["operation"]["reason"], read["status"]) == (
        "completed",
        "deadline_reached",
        "closed",
    )


def arguments_of(name: str, token: str) -> dict[str, Any]:
    return {"view_token": token, **({"expected_revision": 0, "data": {}} if name == SAVE else {})}


def test_a_request_naming_another_conversation_than_the_tokens_reaches_nothing(host: AppsHost) -> None:
    opened = host.open(conversation())
    for name in sorted(APP_TOOLS):
        result = host.view(name, arguments_of(name, opened.token), {CONVERSATION: conversation()})
        assert result["isError"] and result["structuredContent"]["error"] == "unknown_operation", name


def test_a_view_token_opens_its_own_operation_and_nothing_the_view_names(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid = conversation()
    mine, theirs = host.open(cid), host.open(conversation())
    version, _, mac = mine.token.split(".")
    keys = ViewTokens([HOST_SESSION_SECRET])  # the tests' service derives its key from this secret
    assert keys.mint(cid, mine.operation_id) == mine.token  # so the forgeries below are exact
    forged = {
        "another operation under my MAC": f"{version}.{theirs.operation_id}.{mac}",
        "my operation, minted for another conversation": keys.mint(conversation(), mine.operation_id),
        "their operation, minted for my conversation": keys.mint(cid, theirs.operation_id),
        "an unknown operation": keys.mint(cid, str(uuid.uuid4())),
        "my operation under another key": ViewTokens(["another-key-" + "Qw9Er8Ty7Ui6Op5As4" * 2]).mint(
            cid, mine.operation_id
        ),
        "one character of the MAC changed": f"{version}.{mine.operation_id}.{mac[:-1]}{'B' if mac[-1] == 'A' else 'A'}",
    }
    malformed: dict[str, Any] = {
        "no token, the operation's id": {"operation_id": theirs.operation_id},
        "my token and their operation's id": {"view_token": mine.token, "operation_id": theirs.operation_id},
        "a truncated token": {"view_token": mine.token[:-1]},
        "the bare operation id": {"view_token": theirs.operation_id},
        "a number": {"view_token": 7},
        "nothing": {},
    }
    for name in sorted(APP_TOOLS):
        for what, token in forged.items():
            assert token is not None
            result = host.view(name, arguments_of(name, token))
            assert result["isError"], (name, what)
            assert result["structuredContent"]["error"] == "unknown_operation", (name, what)
        for what, arguments in malformed.items():
            extra = {"expected_revision": 0, "data": {}} if name == SAVE else {}
            with pytest.raises(RpcError) as refused:
                host.view(name, {**arguments, **extra})
            assert refused.value.code == -32602, (name, what)
    assert operation(service, mine.operation_id) == {"state": "focusing", "reason": None}
    assert operation(service, theirs.operation_id) == {"state": "focusing", "reason": None}


def test_a_token_of_a_closed_operation_reads_read_only_refuses_writes_and_closes_idempotently(
    service: ServiceProcess, host: AppsHost
) -> None:
    cid = conversation()
    opened = host.open(cid)
    host.view(SAVE, {"view_token": opened.token, "expected_revision": 0, "data": {"activity": "kept"}})
    host.call("pomodoro.interrupt", {}, {CONVERSATION: cid})
    read = host.view(READ, {"view_token": opened.token})["structuredContent"]
    assert (read["status"], read["operation"]["state"]) == ("closed", "interrupted")
    kept = host.view(SNAPSHOT, {"view_token": opened.token})["structuredContent"]
    assert (kept["revision"], kept["readonly"], kept["data"]) == (1, True, {"activity": "kept"})
    late = host.view(SAVE, {"view_token": opened.token, "expected_revision": 1, "data": {"activity": "no"}})
    assert late["isError"] and late["structuredContent"]["error"] == "state_readonly"
    first = host.view(CLOSE, {"view_token": opened.token})["structuredContent"]
    again = host.view(CLOSE, {"view_token": opened.token})["structuredContent"]
    assert first == again and first["operation"]["state"] == "interrupted"
    assert operation(service, opened.operation_id) == {"state": "interrupted", "reason": "agent_interrupt"}
    deadline = time.monotonic() + 10
    while not results(service, cid) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    assert [(r["state"], r["reason"]) for r in results(service, cid)] == [("interrupted", "agent_interrupt")]


def crafted(opened: Opened, other: Opened) -> list[dict[str, Any]]:
    """Arguments a View (or anyone with the host's credentials) might try."""
    version, operation_id, mac = opened.token.split(".")
    tokens: list[Any] = [
        opened.token,
        other.token,
        f"{version}.{other.operation_id}.{mac}",
        opened.token[:-2],
        opened.token + "A",
        operation_id,
        "not-a-token",
        7,
        None,
        [opened.token],
    ]
    extra: list[dict[str, Any]] = [
        {"operation_id": other.operation_id},
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
    arguments: list[dict[str, Any]] = [
        {},
        {"operation_id": operation_id},
        *({"view_token": t} for t in tokens),
    ]
    arguments += [{"view_token": opened.token, **more} for more in extra]
    for data in snapshots:
        for revision in (0, 1, -1, 1.0, "0", 2**40):
            arguments.append({"view_token": opened.token, "expected_revision": revision, "data": data})
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
    other = host.open(elsewhere)
    metas: list[dict[str, Any] | None] = [None, {CONVERSATION: cid}, {"io.lineup/tool_call_id": "x-1"}]
    for name in (READ, SNAPSHOT, SAVE):
        opened = host.open(cid)
        for arguments in crafted(opened, other):
            for meta in metas:
                assert attempt(host, name, arguments, meta) in (None, -32602), (name, arguments)
                assert operation(service, opened.operation_id) == {"state": "focusing", "reason": None}, (
                    name,
                    arguments,
                )
        host.call("pomodoro.interrupt", {}, {CONVERSATION: cid})
    opened = host.open(cid)
    for arguments in crafted(opened, other):
        assert attempt(host, CLOSE, arguments, {CONVERSATION: cid}) in (None, -32602), arguments
        assert operation(service, opened.operation_id)["state"] in ("focusing", "cancelled"), arguments
    assert operation(service, opened.operation_id) == {"state": "cancelled", "reason": "app_closed"}
    # The other conversation's period: its own token was among the arguments, but under a request
    # naming this conversation it reached nothing.
    assert operation(service, other.operation_id) == {"state": "focusing", "reason": None}
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        endings = db.execute(
            "SELECT state, reason FROM operations WHERE conversation_id = %s AND state <> 'focusing'", [cid]
        ).fetchall()
    # Three periods the Agent interrupted between the rounds, and the one the close ended.
    assert sorted((row["state"], row["reason"]) for row in endings) == [
        ("cancelled", "app_closed"),
        *[("interrupted", "agent_interrupt")] * 3,
    ]
