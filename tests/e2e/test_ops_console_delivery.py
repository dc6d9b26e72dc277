"""The operator console's delivery control in Chromium, against its own stack
(``tests.support.ops_console``): pausing and resuming delivery, recovering dead rows after a dry
run, and what retention keeps.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support import ops_console
from tests.support.browser import eventually, requires_chromium
from tests.support.ops_console import Stack, delivery_state, outbox, start_and_stop, text

pytestmark = [pytest.mark.e2e, requires_chromium]

stack = pytest.fixture(scope="module", name="stack")(ops_console.stack)
browser = pytest.fixture(scope="module", name="browser")(ops_console.browser)
page = pytest.fixture(name="page")(ops_console.page)


def test_delivery_is_paused_and_resumed_from_the_overview_each_after_a_confirmation(
    page: Any, stack: Stack
) -> None:
    panel = '[data-testid="delivery"]'
    page.wait_for_selector(f'{panel}[data-paused="false"] [data-testid="running"]')
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click('[data-testid="pause"]')
    assert delivery_state(stack.base_url)["paused"] is False  # not confirmed: nothing changed

    page.fill(f'{panel} input[name="reason"]', "Agent deploy")
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.click('[data-testid="pause"]')
    page.wait_for_selector(f'{panel}[data-paused="true"] [data-testid="paused"]')
    assert "Agent deploy" in asked[0] and "Agent deploy" in text(page, "paused")
    state = delivery_state(stack.base_url)
    assert (state["paused"], state["paused_by"], state["reason"]) == (True, "console", "Agent deploy")
    # Every page says so.
    page.click('.nav a[data-view="outbox"]')
    page.wait_for_selector('[data-testid="delivery-flag"][data-paused="true"]:visible')
    assert text(page, "delivery-flag") == "Delivery paused"
    page.click('.nav a[data-view="overview"]')

    # Held while paused, delivered once resumed.
    call_id = f"call-held-{uuid.uuid4().hex[:6]}"
    start_and_stop(stack.base_url, call_id, "ops-held")
    [held] = outbox(stack.base_url, tool_call_id_prefix=call_id)
    eventually(lambda: page.locator('[data-testid="resume"]').is_visible(), 5)
    assert all(d.event_id != held["event_id"] for d in stack.receiver.snapshot())
    page.once("dialog", lambda dialog: dialog.accept())
    page.click('[data-testid="resume"]')
    page.wait_for_selector(f'{panel}[data-paused="false"]')
    stack.receiver.wait_for_accepted([held["event_id"]], timeout=10)
    assert delivery_state(stack.base_url)["paused"] is False


def test_dead_rows_are_recovered_from_the_overview_after_a_dry_run(page: Any, stack: Stack) -> None:
    start_and_stop(stack.base_url, "gone-1", "ops-gone")
    eventually(lambda: outbox(stack.base_url, status="dead", tool_call_id_prefix="gone-"), 15)
    [dead] = outbox(stack.base_url, tool_call_id_prefix="gone-")
    recover = '[data-testid="recover-panel"]'
    page.fill(f'{recover} input[name="last_error_prefix"]', "HTTP 410")
    page.click('[data-testid="recover-dry-run"]')
    eventually(lambda: "1 dead row(s) match" in text(page, "recover-result"), 5)
    assert outbox(stack.base_url, tool_call_id_prefix="gone-")[0]["status"] == "dead"

    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.click('[data-testid="recover"]')
    eventually(lambda: "Requeued 1 of 1" in text(page, "recover-result"), 5)
    assert asked and "Requeue 1 dead row(s)" in asked[0]
    # Sent again under the same webhook-id (the Agent answers 410 again, so it dies again).
    eventually(lambda: sum(d.event_id == dead["event_id"] for d in stack.receiver.snapshot()) == 2, 10)


def test_the_overview_shows_what_retention_keeps_and_the_oldest_rows(page: Any) -> None:
    retention = text(page, "retention")
    assert "Oldest delivered row" in retention
    assert text(page, "oldest-delivered") != "none"
