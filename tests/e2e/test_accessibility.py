"""axe-core over every page a person or an operator meets, in real chromium: the front door, the
sign-in pages, the Web Host (signed in, with messages, with a running Pomodoro, with the
Whiteboard — each app's frame checked too), the operator console's pages and the Pomodoro's MCP
App View. None may have a serious or critical violation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.e2e.test_mcp_apps_view import show as show_view
from tests.e2e.test_mcp_apps_view import start as start_view
from tests.support import ops_console
from tests.support.axe import Violation, audit, blocking, source
from tests.support.axe import _check as check_frame
from tests.support.browser import (
    app_frame,
    chromium,
    countdown_seconds,
    eventually,
    interrupt_pomodoro,
    post_message,
    requires_chromium,
    sign_in,
    start_pomodoro,
    wait_live,
)
from tests.support.mcp_apps import AppsHost
from tests.support.ops_console import DESKTOP, Stack, start_and_stop

pytestmark = [pytest.mark.e2e, requires_chromium]

stack = pytest.fixture(scope="module", name="stack")(ops_console.stack)
browser = pytest.fixture(scope="module", name="browser")(ops_console.browser)
page = pytest.fixture(name="page")(ops_console.page)


@pytest.fixture(scope="module", autouse=True)
def axe_installed() -> None:
    source()  # installs it, or skips the module saying why


def report(found: list[Violation]) -> None:
    """Every violation on the run's output (the minor and moderate ones too), then the check."""
    for violation in found:
        print(violation)
    assert blocking(found) == [], "\n".join(str(v) for v in blocking(found))


def test_the_front_door_and_the_sign_in_pages(stack: Stack) -> None:
    found: list[Violation] = []
    with chromium() as context:
        tab = context.new_page()
        for path, ready in (
            ("/", '[data-testid="front-door"]'),
            ("/host/?conversation_id=a11y", 'form[data-testid="signin"]'),
            ("/ops/", '[data-testid="signin"]'),
        ):
            tab.goto(f"{stack.base_url}{path}")
            tab.wait_for_selector(ready)
            found += audit(tab, path)
    report(found)


@pytest.mark.parametrize("width", [DESKTOP["width"], 360])
def test_the_web_host_signed_in_with_messages_a_running_pomodoro_and_the_whiteboard(
    stack: Stack, width: int
) -> None:
    base, conversation = stack.base_url, f"a11y-{uuid.uuid4().hex[:8]}"
    found: list[Violation] = []
    with chromium(viewport={"width": width, "height": 800}) as context:
        tab = context.new_page()
        sign_in(tab, base, conversation)
        wait_live(tab)
        found += audit(tab, f"host {width}px, signed in")

        post_message(base, conversation, "user", "focus 25 minutes on writing")
        post_message(base, conversation, "agent", "Started a 25 minute focus period on writing.")
        post_message(base, conversation, "user", "how long is left?")
        eventually(lambda: tab.locator('[data-testid="message"]').count() == 3)
        found += audit(tab, f"host {width}px, with messages")

        start_pomodoro(base, conversation, 1500, "writing")
        countdown_seconds(app_frame(tab, "pomodoro"))
        tab.wait_for_selector('[data-testid="tool-event"]')
        found += audit(tab, f"host {width}px, a running Pomodoro")

        interrupt_pomodoro(base, conversation)
        tab.wait_for_selector('[data-testid="tool-result"]')
        tab.click('[data-testid="open-whiteboard"]')
        app_frame(tab, "whiteboard").wait_for_selector("body *")
        tab.wait_for_timeout(300)
        found += audit(tab, f"host {width}px, the Whiteboard")
    report(found)


def test_the_operator_consoles_pages(page: Any, stack: Stack) -> None:
    start_and_stop(stack.base_url, "a11y-trace-1", "a11y-console")
    found: list[Violation] = []
    for path, ready in (
        ("/ops/", '[data-testid="ops-overview"] [data-testid="count-dead"]'),
        ("/ops/outbox", '[data-testid="outbox-row"]'),
        ("/ops/outbox?status=dead", '[data-testid="outbox-row"][data-status="dead"]'),
        ("/ops/outbox?conversation=nobody-here", '[data-testid="outbox-empty"]'),
        ("/ops/operations", '[data-testid="operation-row"]'),
        ("/ops/tool-calls", '[data-testid="trace-link"], a[href^="/ops/trace/"]'),
        ("/ops/trace/a11y-trace-1?conversation_id=a11y-console", '[data-testid="trace-answer"]'),
    ):
        page.goto(f"{stack.base_url}{path}")
        page.wait_for_selector(ready)
        page.wait_for_timeout(300)
        found += audit(page, path)
    report(found)


def test_the_pomodoro_mcp_app_view(stack: Stack, browser: Any) -> None:
    """The View alone (the host page around it is the test's own)."""
    with AppsHost(stack.base_url) as host:
        call = start_view(host, f"a11y-view-{uuid.uuid4().hex[:8]}", "writing")
        tab = browser.new_page()
        try:
            show_view(tab, host, call)
            [frame] = [f for f in tab.frames if f is not tab.main_frame]
            found = check_frame(frame, "MCP App View (ui://pomodoro/timer)")
        finally:
            tab.close()
    report(found)
