"""The Web Host in a real browser: sign-in, the sandboxed Pomodoro, its countdown, reloads, leaving,
completion and closing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HOST_TOKEN, ServiceProcess
from tests.support.browser import (
    PageProblems,
    app_frame,
    chromium,
    countdown_seconds,
    eventually,
    operation,
    requires_chromium,
    screenshot,
    sign_in,
    start_pomodoro,
    wait_live,
)

pytestmark = [pytest.mark.e2e, requires_chromium]

CONVERSATION = "web-1"
SET_VISIBILITY = """(state) => {
    Object.defineProperty(document, "visibilityState", {configurable: true, get: () => state});
    document.dispatchEvent(new Event("visibilitychange"));
}"""
LIFECYCLE_EVENTS = """() => {
    document.dispatchEvent(new Event("freeze"));
    document.dispatchEvent(new Event("resume"));
    window.dispatchEvent(new PageTransitionEvent("pagehide", {persisted: true}));
    window.dispatchEvent(new PageTransitionEvent("pageshow", {persisted: true}));
}"""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "profile") as context:
        yield context


@pytest.fixture
def host(
    browser: Any, service_process: Callable[..., ServiceProcess]
) -> Iterator[tuple[Any, ServiceProcess, PageProblems]]:
    """A signed-in host page on a fresh service; the test fails on any page or console error."""
    service = service_process()
    page = browser.new_page()
    problems = PageProblems()
    problems.watch(page)
    sign_in(page, service.base_url, CONVERSATION)
    wait_live(page)
    yield page, service, problems
    page.wait_for_timeout(200)  # deliver the browser's last events to the listeners
    assert problems.found == []


def surface_events(db: Any, instance_id: str) -> list[str]:
    rows = db.execute(
        "SELECT event FROM surface_events WHERE instance_id = %s ORDER BY surface_event_id", (instance_id,)
    ).fetchall()
    return [row["event"] for row in rows]


def test_the_sign_in_form_asks_for_the_token_and_refuses_a_wrong_one(
    browser: Any, service_process: Callable[..., ServiceProcess]
) -> None:
    service = service_process()
    page = browser.new_page()
    problems = PageProblems()
    response = page.goto(f"{service.base_url}/host/?conversation_id={CONVERSATION}")
    assert response.status == 200
    assert page.locator("form[data-testid=signin] input:not([type=hidden])").evaluate_all(
        "inputs => inputs.map(i => i.name)"
    ) == ["token"]
    page.fill("input[name=token]", "not-the-host-token-at-all")
    with page.expect_response(f"{service.base_url}/host/session") as refused:
        page.click("form[data-testid=signin] button[type=submit]")
    assert refused.value.status == 401
    assert page.locator("[role=alert]").inner_text()
    assert browser.cookies() == []

    problems.watch(page)
    page.fill("input[name=token]", HOST_TOKEN)
    page.click("form[data-testid=signin] button[type=submit]")
    wait_live(page)
    assert page.url == f"{service.base_url}/host/?conversation_id={CONVERSATION}"
    [cookie] = browser.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"], cookie["secure"]) == (
        True,
        "Strict",
        "/",
        False,
    )
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
    page.wait_for_timeout(200)
    assert problems.found == []


def test_the_ready_sign_in_link_signs_in_and_keeps_the_token_out_of_the_address_bar(
    browser: Any, service_process: Callable[..., ServiceProcess]
) -> None:
    service = service_process()
    page = browser.new_page()
    problems = PageProblems()
    problems.watch(page)
    page.goto(f"{service.base_url}/host/?conversation_id={CONVERSATION}#token={HOST_TOKEN}")
    wait_live(page)
    assert page.url == f"{service.base_url}/host/?conversation_id={CONVERSATION}"
    assert HOST_TOKEN not in page.evaluate("history.length + location.href")
    page.wait_for_timeout(200)
    assert problems.found == []


def test_a_start_through_the_agent_api_opens_a_sandboxed_pomodoro_counting_down_from_ends_at(
    host: tuple[Any, ServiceProcess, PageProblems], db: Any
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, CONVERSATION, 1500, "write report")

    iframe = page.wait_for_selector('iframe[data-app-scope="pomodoro"]')
    assert iframe.get_attribute("sandbox") == "allow-scripts"
    assert iframe.get_attribute("src") == "/apps/pomodoro/"
    frame = app_frame(page, "pomodoro")
    assert frame.evaluate("self.origin") == "null"  # opaque: no same-origin access to the host
    first = countdown_seconds(frame)
    assert 1490 <= first <= 1500
    assert frame.locator('[data-testid="activity"]').inner_text() == "write report"
    eventually(lambda: countdown_seconds(frame) < first, seconds=3)
    assert page.locator('[data-testid="tool-event"] .text').inner_text().startswith("Focus period started")

    # The app kept its display data in its snapshot: exactly the strict schema, no remaining time.
    snapshot = eventually(
        lambda: db.execute(
            "SELECT data FROM instance_states WHERE instance_id = %s AND revision > 0",
            (started["instance_id"],),
        ).fetchone()
    )
    op = started["operation"]
    assert snapshot["data"] == {
        "activity": "write report",
        "operation_id": op["operation_id"],
        "started_at": op["started_at"],
        "ends_at": op["ends_at"],
        "display_state": "focusing",
    }
    screenshot(page, "web-host-pomodoro-focusing")


def test_a_reload_counts_on_from_the_same_ends_at_and_does_not_interrupt(
    host: tuple[Any, ServiceProcess, PageProblems], db: Any
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, CONVERSATION, 600, "read")
    ends_at = started["operation"]["ends_at"]
    before = countdown_seconds(app_frame(page, "pomodoro"))

    time.sleep(1.1)
    page.reload()
    wait_live(page)
    after = countdown_seconds(app_frame(page, "pomodoro"))
    assert after < before
    assert before - after <= 4  # counted on from the same deadline, not restarted, not reset

    current = operation(service.base_url, started["operation"]["operation_id"])
    assert (current["state"], current["ends_at"]) == ("focusing", ends_at)
    eventually(lambda: "reloaded" in surface_events(db, started["instance_id"]))
    screenshot(page, "web-host-pomodoro-after-reload")


def test_hiding_freezing_and_resuming_the_page_are_reported_and_never_interrupt(
    host: tuple[Any, ServiceProcess, PageProblems], db: Any
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, CONVERSATION, 600, "read")
    countdown_seconds(app_frame(page, "pomodoro"))

    # Headless chromium never hides a page by itself; say so the way a dimming screen would.
    for state in ("hidden", "visible"):
        page.evaluate(SET_VISIBILITY, state)
    eventually(lambda: {"dimmed", "undimmed"} <= set(surface_events(db, started["instance_id"])))
    # Nor does it freeze a visible page or keep one in the back/forward cache: the same events.
    page.evaluate(LIFECYCLE_EVENTS)
    eventually(lambda: surface_events(db, started["instance_id"]).count("unlocked") == 2)
    assert surface_events(db, started["instance_id"]).count("locked") == 2

    current = operation(service.base_url, started["operation"]["operation_id"])
    assert current["state"] == "focusing"
    assert page.locator('iframe[data-app-scope="pomodoro"]').count() == 1


def test_going_back_to_interact_interrupts_the_focus_period(
    host: tuple[Any, ServiceProcess, PageProblems],
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, CONVERSATION, 600, "email")
    countdown_seconds(app_frame(page, "pomodoro"))

    page.click('[data-testid="back-to-interact"]')
    page.wait_for_selector('iframe[data-app-scope="pomodoro"]', state="detached")
    result = page.wait_for_selector('[data-testid="tool-result"][data-state="interrupted"]')
    assert "you left the workspace" in result.inner_text()
    current = operation(service.base_url, started["operation"]["operation_id"])
    assert (current["state"], current["reason"]) == ("interrupted", "user_left_workspace")
    assert page.locator('[data-testid="foreground"]').inner_text() == "Interact"


def test_at_the_deadline_the_runtime_removes_the_app_and_interact_shows_the_completed_result(
    host: tuple[Any, ServiceProcess, PageProblems],
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, CONVERSATION, 3, "tests")
    frame = app_frame(page, "pomodoro")
    assert countdown_seconds(frame) <= 3

    page.wait_for_selector('iframe[data-app-scope="pomodoro"]', state="detached", timeout=15_000)
    result = page.wait_for_selector('[data-testid="tool-result"][data-state="completed"] .text')
    assert result.inner_text() == "Focus period completed (the time was up): 3 s on tests."
    assert page.locator('[data-testid="interact"]').get_attribute("data-foreground") == "true"
    current = operation(service.base_url, started["operation"]["operation_id"])
    assert (current["state"], current["reason"]) == ("completed", "deadline_reached")
    screenshot(page, "web-host-completed")


def test_the_close_button_in_the_app_closes_it_through_the_host(
    host: tuple[Any, ServiceProcess, PageProblems],
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, CONVERSATION, 600, "plan")
    frame = app_frame(page, "pomodoro")
    countdown_seconds(frame)

    frame.click('[data-testid="close"]')
    page.wait_for_selector('iframe[data-app-scope="pomodoro"]', state="detached")
    page.wait_for_selector('[data-testid="tool-result"][data-state="cancelled"]')
    current = operation(service.base_url, started["operation"]["operation_id"])
    assert (current["state"], current["reason"]) == ("cancelled", "app_closed")
