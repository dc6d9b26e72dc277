"""The Pomodoro MCP App in a real MCP Apps host: the MCP Inspector's web UI (npm
``@modelcontextprotocol/inspector``, its own sandbox server) in headless chromium, against a
``serve`` with MCP authorization that the test starts. A person signs in through the Inspector's
OAuth flow and opens ``pomodoro.start`` from its Apps tab: the host reads ``ui://pomodoro/timer``,
renders it in its sandbox iframe, and forwards the View's app-only tool calls to the service."""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from playwright.sync_api import Error
from psycopg.rows import dict_row

from harness import processes
from harness.calls import interrupt_body
from harness.database import DatabaseFactory, with_database
from service.mcp.binding import person_conversation_id
from tests.conftest import AGENT, ServiceProcess
from tests.e2e.test_mcp_oauth import SCOPE
from tests.support.browser import COUNTDOWN, chromium, eventually, requires_chromium, screenshot
from tests.support.inspector import inspector_web, reconnect, sign_in
from tests.support.oidc import AuthorizationServer, authorization_server

pytestmark = [
    pytest.mark.e2e,
    requires_chromium,
    pytest.mark.skipif(shutil.which("npx") is None, reason="the MCP Inspector runs with npx (Node.js)"),
]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inspector-apps")


@pytest.fixture(scope="module")
def idp(logs: Path) -> Iterator[AuthorizationServer]:
    with authorization_server(logs) as server:
        yield server


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, logs: Path, idp: AuthorizationServer
) -> Iterator[ServiceProcess]:
    name = database_factory.create()
    url = with_database(database_factory.server, name)
    process = ServiceProcess(url, logs, MCP_OAUTH_ISSUER=idp.issuer, MCP_OAUTH_SCOPES=SCOPE)
    try:
        processes.ServiceProcess.start(process)
        process.wait_http(f"{process.base_url}/healthz", 90.0)
        yield process
    finally:
        if process.process is not None:
            process.stop()
        database_factory.drop(name)


@pytest.fixture(scope="module")
def inspector(service: ServiceProcess, logs: Path) -> Iterator[str]:
    with inspector_web(f"{service.base_url}/mcp", logs) as url:
        yield url


def query(service: ServiceProcess, sql: str, *args: Any) -> list[dict[str, Any]]:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        return db.execute(sql, list(args)).fetchall()


def latest(service: ServiceProcess, conversation_id: str) -> dict[str, Any]:
    (row,) = query(
        service,
        "SELECT operation_id::text, state, reason, EXTRACT(EPOCH FROM ends_at - statement_timestamp()) AS left_s "
        "FROM operations WHERE conversation_id = %s ORDER BY started_at DESC LIMIT 1",
        conversation_id,
    )
    return row


def delivered(service: ServiceProcess, operation_id: str) -> list[tuple[str, str]]:
    rows = query(service, "SELECT payload FROM outbox WHERE operation_id = %s", operation_id)
    return [(row["payload"]["result"]["state"], row["payload"]["result"]["reason"]) for row in rows]


def in_sandbox(frame: Any) -> bool:
    """A document inside the host's sandbox proxy frame (the View)."""
    parent = frame.parent_frame
    return parent is not None and parent.url.split("?")[0].endswith("/sandbox")


def view(page: Any, activity: str | None = None, seconds: float = 60) -> Any:
    """The View's frame: the document the host's sandbox wrote into its inner iframe (the one
    showing ``activity``, when given: not a View of an earlier call still being torn down).

    It waits with ``page.wait_for_timeout``, never ``time.sleep``: the sync API takes in the
    browser's events — here the frames the host attaches and navigates after the click that opened
    the app returned — only while one of its calls is waiting, so a loop that sleeps between reads
    of ``page.frames`` never sees a frame that came later (what made this test flaky under load)."""

    def timer(frame: Any) -> bool:
        try:
            if not in_sandbox(frame) or frame.query_selector("[data-testid=timer]") is None:
                return False
            shown = frame.query_selector("[data-testid=activity]")
            return activity is None or (shown is not None and shown.inner_text() == activity)
        except Error:  # the frame is being written or torn down
            return False

    deadline = time.monotonic() + seconds
    while (found := next((f for f in page.frames if timer(f)), None)) is None:
        if time.monotonic() > deadline:
            frames = [(f.url[:80], f.parent_frame.url[:80] if f.parent_frame else None) for f in page.frames]
            raise AssertionError(
                f"no View showing {activity!r} within {seconds} s; frames (url, parent): {frames}"
            )
        page.wait_for_timeout(250)
    return found


def open_app(page: Any, seconds: int, activity: str) -> Any:
    """The Apps tab's pomodoro.start, its arguments, Open App: the host calls the tool and renders
    its View; the View's frame."""
    page.get_by_text("Apps", exact=True).first.click()
    back = page.get_by_role("button", name="Back to Input")
    if back.count():
        back.click()
    else:
        page.get_by_text("pomodoro.start", exact=True).first.click()
    duration = page.get_by_role("textbox", name=re.compile("^duration_seconds"))
    duration.wait_for()
    page.wait_for_timeout(1000)  # the form settles (it is filled from the tool's schema)
    duration.fill(str(seconds))
    page.get_by_role("textbox", name="activity", exact=True).fill(activity)
    page.get_by_role("button", name="Open App", exact=True).click()
    try:
        return view(page, activity)
    finally:
        screenshot(page, "mcp-apps-inspector-last-open")


def showing(frame: Any, state: str, timeout: float = 30) -> None:
    frame.wait_for_selector(f'[data-testid=timer][data-state="{state}"]', timeout=timeout * 1000)


def countdown_seconds(frame: Any) -> int:
    match = COUNTDOWN.match(frame.inner_text("[data-testid=countdown]"))
    assert match, frame.inner_text("[data-testid=countdown]")
    return int(match[1]) * 60 + int(match[2])


def test_the_pomodoro_view_in_the_inspector_counts_down_survives_reload_and_shows_each_ending(
    inspector: str, service: ServiceProcess, idp: AuthorizationServer, logs: Path
) -> None:
    login = f"apps-{uuid.uuid4().hex[:8]}"
    own = person_conversation_id(idp.issuer, login)
    view_requests: list[str] = []
    with chromium(logs / "chromium") as context:
        context.set_default_timeout(60_000)  # a machine shared with others is slow
        page = context.new_page()
        page.set_viewport_size({"width": 1280, "height": 1100})
        # Every request any frame makes; the View's own document must make none.
        page.on("request", lambda r: view_requests.append(r.url) if in_sandbox(r.frame) else None)
        # A request the sandbox's CSP blocks is never made: the browser says so on the console.
        page.on(
            "console", lambda m: view_requests.append(m.text) if "Content Security Policy" in m.text else None
        )
        sign_in(page, inspector, idp.url, login)

        # pomodoro.start: the timer renders in the host's sandbox with its activity and a countdown
        # that matches ends_at within a second.
        frame = open_app(page, 1500, "inspector app")
        showing(frame, "focusing")
        assert frame.inner_text("[data-testid=activity]") == "inspector app"
        focusing = eventually(
            lambda: latest(service, own)["state"] == "focusing" and latest(service, own), 30
        )
        first = focusing["operation_id"]
        shown, left = countdown_seconds(frame), float(latest(service, own)["left_s"])
        assert abs(shown - left) <= 1.5, (shown, left)
        screenshot(page, "mcp-apps-inspector")

        # Teardown is not leaving: another tab unmounts the View; the period goes on.
        page.get_by_text("Tools", exact=True).first.click()
        page.wait_for_timeout(1000)
        assert not any(in_sandbox(f) for f in page.frames)
        assert latest(service, own)["state"] == "focusing"

        # A reload of the host: the call again shows the period still focusing (the refusal names it).
        page.reload()
        reconnect(page, inspector, idp.url, login)
        frame = open_app(page, 1500, "inspector app")
        showing(frame, "focusing")
        assert latest(service, own)["operation_id"] == first and latest(service, own)["state"] == "focusing"
        assert frame.inner_text("[data-testid=activity]") == "inspector app"

        # The Agent interrupts it: the View shows interrupted.
        stopped = httpx.post(
            f"{service.base_url}/v1/tool-calls", headers=AGENT, json=interrupt_body(own), timeout=10
        )
        assert stopped.json()["status"] == "interrupted"
        showing(frame, "interrupted")
        assert frame.inner_text("[data-testid=status]") == "Interrupted"

        # A short period: the View shows completed, and it is delivered once.
        frame = open_app(page, 2, "short one")
        showing(frame, "completed", 60)
        second = latest(service, own)["operation_id"]
        assert second != first
        eventually(lambda: delivered(service, second), 30)

        # The View's close: cancelled(app_closed), once.
        frame = open_app(page, 1500, "closed one")
        showing(frame, "focusing")
        third = latest(service, own)["operation_id"]
        frame.click("[data-testid=close]")
        showing(frame, "cancelled")
        # What the View's document loaded or fetched by itself, as the browser counts it: nothing.
        assert frame.evaluate("performance.getEntriesByType('resource').map((e) => e.name)") == []
        screenshot(page, "mcp-apps-inspector-closed")
        eventually(lambda: delivered(service, third), 30)
        time.sleep(1)
    assert delivered(service, first) == [("interrupted", "agent_interrupt")]
    assert delivered(service, second) == [("completed", "deadline_reached")]
    assert delivered(service, third) == [("cancelled", "app_closed")]
    assert view_requests == []
