"""The Pomodoro View (``ui://pomodoro/timer`` as ``resources/read`` serves it) in headless chromium,
inside the smallest MCP Apps host: a page that puts the document in a ``sandbox="allow-scripts"``
iframe, answers ``ui/initialize``, sends the call's tool input and result, and forwards the View's
``tools/call`` to a real ``serve`` (with the Agent's token, as a host does with its own). What the
host gives the View is chosen by the test: an old result, a teardown."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from tests.conftest import ServiceProcess, service_on_own_database
from tests.support.browser import chromium, requires_chromium
from tests.support.mcp_apps import CONVERSATION, POMODORO_URI, VIEW_TOKEN, AppsHost

pytestmark = [pytest.mark.e2e, requires_chromium]

HOST_PAGE = """<!doctype html>
<html><body>
<iframe id="view" sandbox="allow-scripts" style="width: 600px; height: 500px"></iframe>
<script>
const frame = document.getElementById("view");
window.received = [];
const post = (message) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");
window.addEventListener("message", async (event) => {
  if (event.source !== frame.contentWindow) return;
  const message = event.data;
  window.received.push(message);
  if (message.method === "ui/initialize") {
    post({ id: message.id, result: {
      protocolVersion: "2026-01-26", hostInfo: { name: "test-host", version: "0" },
      hostCapabilities: { serverTools: {} },
      hostContext: { theme: "dark", displayMode: "inline", locale: "en-US" } } });
  } else if (message.method === "ui/notifications/initialized") {
    post({ method: "ui/notifications/tool-input", params: { arguments: window.call.arguments } });
    post({ method: "ui/notifications/tool-result", params: window.call.result });
  } else if (message.method === "tools/call") {
    post({ id: message.id, result: JSON.parse(await window.forward(JSON.stringify(message.params))) });
  } else if (message.id !== undefined && message.method === undefined) {
    window.answers = [...(window.answers || []), message];
  }
});
window.teardown = () => post({ id: "teardown", method: "ui/resource-teardown", params: {} });
window.open_view = (html) => { frame.srcdoc = html; };
</script>
</body></html>
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-apps-view")


@pytest.fixture(scope="module")
def service(database_factory: DatabaseFactory, logs: Path) -> Iterator[ServiceProcess]:
    with service_on_own_database(database_factory, logs) as process:
        yield process


@pytest.fixture
def host(service: ServiceProcess) -> Iterator[AppsHost]:
    with AppsHost(service.base_url) as opened:
        yield opened


def state(service: ServiceProcess, operation_id: str) -> tuple[str, str | None]:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        row = db.execute(
            "SELECT state, reason FROM operations WHERE operation_id = %s", [operation_id]
        ).fetchone()
    assert row is not None
    return row["state"], row["reason"]


def start(host: AppsHost, conversation_id: str, activity: str) -> dict[str, Any]:
    """``pomodoro.start`` as the model calls it; the call as a host keeps it (arguments, result)."""
    arguments = {"duration_seconds": 1500, "activity": activity}
    result = host.call("pomodoro.start", arguments, {CONVERSATION: conversation_id})
    assert result["structuredContent"]["status"] == "accepted"
    return {"arguments": arguments, "result": result}


def show(page: Any, host: AppsHost, call: dict[str, Any]) -> tuple[Any, list[str]]:
    """The host page with the View of ``call``; the View's frame, and the tools it has called (as
    they are called). Each call must hand back the View token of ``call``'s result, and nothing
    that names an operation."""
    forwarded: list[str] = []
    token = call["result"]["_meta"][VIEW_TOKEN]

    def forward(params: str) -> str:
        decoded = json.loads(params)
        forwarded.append(decoded["name"])
        arguments = decoded.get("arguments") or {}
        assert arguments.get("view_token") == token and "operation_id" not in arguments, arguments
        return json.dumps(host.call(decoded["name"], arguments, decoded.get("_meta")))

    page.expose_function("forward", forward)
    page.set_content(HOST_PAGE)
    page.evaluate("(call) => { window.call = call; }", call)
    (content,) = host.request("resources/read", {"uri": POMODORO_URI})["contents"]
    page.evaluate("(html) => window.open_view(html)", content["text"])
    page.wait_for_function("document.getElementById('view').contentDocument === null")  # sandboxed: opaque
    frame = page.frame_locator("#view")
    frame.locator("[data-testid=timer]").wait_for()
    return frame, forwarded


def test_a_view_of_an_old_accepted_result_shows_that_periods_final_state_and_reopens_nothing(
    service: ServiceProcess, host: AppsHost, logs: Path
) -> None:
    cid = f"view-{uuid.uuid4()}"
    old = start(host, cid, "the old one")
    host.call("pomodoro.interrupt", {}, {CONVERSATION: cid})
    new = start(host, cid, "the new one")
    new_id = new["result"]["structuredContent"]["operation"]["operation_id"]
    with chromium(logs / "chromium-stale") as context:
        page = context.new_page()
        frame, forwarded = show(page, host, old)
        frame.locator('[data-testid=timer][data-state="interrupted"]').wait_for()
        assert frame.locator("[data-testid=activity]").inner_text() == "the old one"
        assert frame.locator("[data-testid=status]").inner_text() == "Interrupted"
        assert frame.locator("[data-testid=close]").is_disabled()
        page.wait_for_timeout(2500)  # a re-read cadence: a final period is not read again and again
    assert set(forwarded) == {"pomodoro_app_read"}, forwarded
    assert state(service, new_id) == ("focusing", None)


def test_a_teardown_is_not_leaving_and_the_view_speaks_the_hosts_context(
    service: ServiceProcess, host: AppsHost, logs: Path
) -> None:
    call = start(host, f"view-{uuid.uuid4()}", "torn down")
    operation_id = call["result"]["structuredContent"]["operation"]["operation_id"]
    with chromium(logs / "chromium-teardown") as context:
        page = context.new_page()
        frame, forwarded = show(page, host, call)
        frame.locator('[data-testid=timer][data-state="focusing"]').wait_for()
        assert frame.locator("html").get_attribute("data-theme") == "dark"
        received = page.evaluate("window.received.map((m) => m.method)")
        assert received[:2] == ["ui/initialize", "ui/notifications/initialized"]
        page.evaluate("window.teardown()")
        page.wait_for_function("(window.answers || []).some((a) => a.id === 'teardown' && a.result)")
        page.evaluate("document.getElementById('view').remove()")
        page.wait_for_timeout(1000)
    assert "pomodoro_app_close" not in forwarded
    assert state(service, operation_id) == ("focusing", None)
