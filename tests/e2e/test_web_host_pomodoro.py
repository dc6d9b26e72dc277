"""The Web Host in a real browser: sign-in, the sandboxed Pomodoro, its countdown, reloads, leaving,
completion and closing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import HOST_TOKEN, ServiceProcess
from tests.support.browser import (
    PageProblems,
    app_frame,
    chromium,
    countdown_seconds,
    eventually,
    interrupt_pomodoro,
    module_service,
    operation,
    own_conversation,
    person_session,
    post_message,
    requires_chromium,
    screenshot,
    service_db,
    sign_in,
    start_pomodoro,
    timeline,
    timeline_scroll,
    wait_live,
)

pytestmark = [pytest.mark.e2e, requires_chromium]

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
def browser() -> Iterator[Any]:
    with chromium() as context:
        yield context


service = pytest.fixture(scope="module", name="service")(module_service)
conversation = pytest.fixture(name="conversation")(own_conversation)
db = pytest.fixture(name="db")(service_db)


@pytest.fixture
def host(
    browser: Any, service: ServiceProcess, conversation: str
) -> Iterator[tuple[Any, ServiceProcess, PageProblems]]:
    """A signed-in host page on the module's service; the test fails on any page or console error."""
    page = browser.new_page()
    problems = PageProblems()
    problems.watch(page)
    sign_in(page, service.base_url, conversation)
    wait_live(page)
    yield page, service, problems
    page.wait_for_timeout(200)  # deliver the browser's last events to the listeners
    assert problems.found == []


def snapshot_saved(db: Any, instance_id: str) -> bool:
    row = db.execute("SELECT revision FROM instance_states WHERE instance_id = %s", (instance_id,)).fetchone()
    return bool(row and row["revision"] > 0)


def surface_events(db: Any, instance_id: str) -> list[str]:
    rows = db.execute(
        "SELECT event FROM surface_events WHERE instance_id = %s ORDER BY surface_event_id", (instance_id,)
    ).fetchall()
    return [row["event"] for row in rows]


def test_the_sign_in_form_asks_for_the_token_and_refuses_a_wrong_one(
    browser: Any, service: ServiceProcess, conversation: str
) -> None:
    page = browser.new_page()
    problems = PageProblems()
    response = page.goto(f"{service.base_url}/host/?conversation_id={conversation}")
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

    page.fill("input[name=token]", HOST_TOKEN)  # the backend's credential: not a person's session
    with page.expect_response(f"{service.base_url}/host/session") as refused_host_token:
        page.click("form[data-testid=signin] button[type=submit]")
    assert refused_host_token.value.status == 401

    problems.watch(page)
    page.fill("input[name=token]", person_session(service.base_url, conversation))
    page.click("form[data-testid=signin] button[type=submit]")
    wait_live(page)
    assert page.url == f"{service.base_url}/host/?conversation_id={conversation}"
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


def test_the_ready_sign_in_link_shows_whom_it_signs_in_as_and_signs_in_on_the_click(
    browser: Any, service: ServiceProcess, conversation: str
) -> None:
    page = browser.new_page()
    problems = PageProblems()
    problems.watch(page)
    token = person_session(service.base_url, conversation)
    page.goto(f"{service.base_url}/host/?conversation_id={conversation}#token={token}")
    page.wait_for_selector('[data-testid="signin-preview"]:not([hidden])')
    assert page.locator('[data-testid="signin-subject"]').inner_text() == "a person"
    assert page.locator('[data-testid="signin-conversations"]').inner_text() == f"“{conversation}”"
    assert page.locator('[data-testid="signin-submit"]').inner_text() == "Sign in as a person"
    assert token not in page.evaluate("history.length + location.href")
    page.wait_for_timeout(300)
    assert browser.cookies() == []  # nothing signs in until the person acts
    page.click('[data-testid="signin-submit"]')
    wait_live(page)
    assert page.url == f"{service.base_url}/host/?conversation_id={conversation}"
    page.wait_for_timeout(200)
    assert problems.found == []


def test_a_pomodoro_without_an_activity_says_focus_once(
    host: tuple[Any, ServiceProcess, PageProblems],
    conversation: str,
) -> None:
    page, service, _ = host
    start_pomodoro(service.base_url, conversation, 1500, None)  # type: ignore[arg-type]
    frame = app_frame(page, "pomodoro")
    frame.wait_for_selector('[data-testid="timer"][data-state="focusing"]')
    assert frame.locator('[data-testid="activity"]').inner_text() == "Focus period"
    assert frame.locator('[data-testid="label"]').is_hidden()


def test_signed_in_without_a_conversation_the_page_asks_for_one_instead_of_connecting(
    host: tuple[Any, ServiceProcess, PageProblems],
    conversation: str,
) -> None:
    page, service, _ = host
    page.goto(f"{service.base_url}/host/")
    page.wait_for_selector('[data-testid="choose-conversation"]:not([hidden])')
    assert page.locator('[data-testid="connection"]').inner_text() == "choose a conversation"


def test_a_start_through_the_agent_api_opens_a_sandboxed_pomodoro_counting_down_from_ends_at(
    host: tuple[Any, ServiceProcess, PageProblems], conversation: str, db: Any
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, conversation, 1500, "write report")

    iframe = page.wait_for_selector('iframe[data-app-scope="pomodoro"]')
    assert iframe.get_attribute("sandbox") == "allow-scripts"
    assert iframe.get_attribute("src") == "/apps/pomodoro/"
    frame = app_frame(page, "pomodoro")
    assert frame.evaluate("self.origin") == "null"  # opaque: no same-origin access to the host
    first = countdown_seconds(frame)
    assert 1490 <= first <= 1500
    assert frame.locator('[data-testid="activity"]').inner_text() == "write report"
    eventually(lambda: countdown_seconds(frame) < first, seconds=3)
    assert (
        page.locator('[data-testid="tool-event"] .text').inner_text()
        == "Pomodoro started · 25 min · write report"
    )
    # One Close, the app's own: the workspace bar has none.
    assert frame.locator('[data-testid="close"]').inner_text() == "Close Pomodoro"
    assert page.locator('[data-testid="workspace"] .workspace-bar button:has-text("Close")').count() == 0

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
    host: tuple[Any, ServiceProcess, PageProblems], conversation: str, db: Any
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, conversation, 600, "read")
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
    host: tuple[Any, ServiceProcess, PageProblems], conversation: str, db: Any
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, conversation, 600, "read")
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
    conversation: str,
) -> None:
    page, service, problems = host
    started = start_pomodoro(service.base_url, conversation, 600, "email")
    countdown_seconds(app_frame(page, "pomodoro"))

    # The app may still be saving its snapshot when the person leaves: that save is refused
    # (409 state_readonly, which Chromium logs as a console error) and the app lets it go.
    problems.expect("status of 409 (Conflict)")
    page.click('[data-testid="back-to-interact"]')
    page.wait_for_selector('iframe[data-app-scope="pomodoro"]', state="detached")
    result = page.wait_for_selector('[data-testid="tool-result"][data-state="interrupted"] .text')
    assert result.inner_text().startswith("Pomodoro interrupted, you switched away · ")
    assert result.inner_text().endswith(" of 10 min · email")
    current = operation(service.base_url, started["operation"]["operation_id"])
    assert (current["state"], current["reason"]) == ("interrupted", "user_left_workspace")
    assert page.locator('[data-testid="foreground"]').inner_text() == "Interact"


def test_at_the_deadline_the_runtime_removes_the_app_and_interact_shows_the_completed_result(
    host: tuple[Any, ServiceProcess, PageProblems],
    conversation: str,
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, conversation, 3, "tests")
    frame = app_frame(page, "pomodoro")
    assert countdown_seconds(frame) <= 3

    page.wait_for_selector('iframe[data-app-scope="pomodoro"]', state="detached", timeout=15_000)
    result = page.wait_for_selector('[data-testid="tool-result"][data-state="completed"] .text')
    assert result.inner_text() == "Pomodoro completed · 3 s · tests"
    assert page.locator('[data-testid="interact"]').get_attribute("data-foreground") == "true"
    current = operation(service.base_url, started["operation"]["operation_id"])
    assert (current["state"], current["reason"]) == ("completed", "deadline_reached")
    screenshot(page, "web-host-completed")


def test_the_close_button_in_the_app_closes_it_through_the_host(
    host: tuple[Any, ServiceProcess, PageProblems],
    conversation: str,
    db: Any,
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, conversation, 600, "plan")
    frame = app_frame(page, "pomodoro")
    countdown_seconds(frame)
    # The app saves its snapshot once it shows the period; a close racing that save would make it
    # state_readonly (409), which the app takes quietly but chromium logs as a console error.
    eventually(lambda: snapshot_saved(db, started["instance_id"]))

    frame.click('[data-testid="close"]')
    page.wait_for_selector('iframe[data-app-scope="pomodoro"]', state="detached")
    page.wait_for_selector('[data-testid="tool-result"][data-state="cancelled"]')
    current = operation(service.base_url, started["operation"]["operation_id"])
    assert (current["state"], current["reason"]) == ("cancelled", "app_closed")


def test_opening_the_whiteboard_during_a_focus_is_told_as_switching_away_not_leaving_the_workspace(
    host: tuple[Any, ServiceProcess, PageProblems],
    conversation: str,
) -> None:
    page, service, _ = host
    start_pomodoro(service.base_url, conversation, 600, "sketch")
    countdown_seconds(app_frame(page, "pomodoro"))

    page.click('[data-testid="open-whiteboard"]')
    app_frame(page, "whiteboard")
    result = page.wait_for_selector('[data-testid="tool-result"][data-state="interrupted"] .text')
    assert "you switched away" in result.inner_text()
    assert "workspace" not in result.inner_text()


def test_after_a_reload_the_timeline_is_rebuilt_in_commit_order_as_it_was_live_and_scrolled_to_the_end(
    host: tuple[Any, ServiceProcess, PageProblems], conversation: str, db: Any
) -> None:
    page, service, _ = host
    base = service.base_url
    for n in range(20):  # enough earlier conversation that the timeline scrolls
        post_message(base, conversation, "user" if n % 2 else "agent", f"earlier message {n}")
    post_message(base, conversation, "user", "focus 1 minute on tests")
    started = start_pomodoro(base, conversation, 60, "tests")
    post_message(base, conversation, "agent", "Focus period started: 1 min on tests.")
    # The app has shown the period and saved its snapshot: no save races the stop below.
    eventually(lambda: snapshot_saved(db, started["instance_id"]))
    post_message(base, conversation, "user", "stop")
    interrupt_pomodoro(base, conversation)
    post_message(base, conversation, "agent", "Stopped.")
    page.wait_for_selector('[data-testid="message"][data-role="agent"] .text:text-is("Stopped.")')

    live = timeline(page)
    assert [(kind, who) for kind, who, _, _ in live[-6:]] == [
        ("message", "You"),
        ("tool-event", "Tool"),
        ("message", "Agent"),
        ("message", "You"),
        ("tool-result", "Tool"),
        ("message", "Agent"),
    ]
    assert live[-5][2] == "Pomodoro started · 1 min · tests"
    assert live[-2][2].startswith("Pomodoro stopped by the Agent · ") and live[-2][2].endswith(
        " of 1 min · tests"
    )
    assert [text for _, _, text, _ in live[:20]] == [f"earlier message {n}" for n in range(20)]
    scroll = timeline_scroll(page)
    assert scroll["height"] > scroll["visible"] and scroll["below"] <= 2

    page.reload()
    wait_live(page)
    eventually(lambda: len(timeline(page)) >= len(live))
    page.wait_for_timeout(300)  # anything more that would arrive
    assert timeline(page) == live
    assert timeline_scroll(page)["below"] <= 2
    screenshot(page, "web-host-after-reload")


def test_the_message_box_placeholder_is_shown_whole(
    browser: Any, service: ServiceProcess, conversation: str
) -> None:
    page = browser.new_page()
    sign_in(page, service.base_url, conversation)
    wait_live(page)
    for width in (1280, 820, 400):
        page.set_viewport_size({"width": width, "height": 760})
        room = page.eval_on_selector(
            '[data-testid="message-input"]',
            """input => {
                const style = getComputedStyle(input);
                const context = document.createElement("canvas").getContext("2d");
                context.font = style.font;
                const text = context.measureText(input.placeholder).width;
                const inner = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
                return {text, inner, placeholder: input.placeholder};
            }""",
        )
        assert room["placeholder"]
        assert room["text"] <= room["inner"], (width, room)


def test_times_are_shown_in_the_persons_locale_and_time_zone(
    service: ServiceProcess,
    conversation: str,
) -> None:
    message = post_message(service.base_url, conversation, "agent", "Hallo")
    with chromium(locale="de-DE", timezone_id="Asia/Tokyo") as browser:
        page = browser.new_page()
        sign_in(page, service.base_url, conversation)
        wait_live(page)
        shown = page.wait_for_selector('[data-testid="message"] .at').inner_text()
    sent = datetime.fromisoformat(message["created_at"].replace("Z", "+00:00"))
    assert shown == sent.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%H:%M")
