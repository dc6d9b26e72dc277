"""The operator console in Chromium, against one real service, one relay and a local Agent that
answers 400 to some results (dead rows), 503 twice to others (retries), 204 to the rest (the stack
of ``tests.support.ops_console``): sign in, the overview updating itself, the outbox filtered, a
dead row requeued, a trace's timeline, the operations by state, every page at a desktop's and a
phone's width, and delivery control from the overview: pausing and resuming delivery, recovering
dead rows after a dry run, and what retention keeps. Every test of the module shares the stack,
each with calls of its own.

``OPS_CONSOLE_SCREENSHOTS=docs`` also writes the overview and a trace to ``docs/`` (how the
screenshots there were made).
"""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from tests.conftest import OPERATOR_TOKEN
from tests.support import ops_console
from tests.support.browser import PageProblems, chromium, eventually, requires_chromium
from tests.support.ops_console import (
    DESKTOP,
    PHONE,
    Stack,
    delivery_state,
    keep,
    outbox,
    start_and_stop,
    text,
)

pytestmark = [pytest.mark.e2e, requires_chromium]

stack = pytest.fixture(scope="module", name="stack")(ops_console.stack)
browser = pytest.fixture(scope="module", name="browser")(ops_console.browser)
page = pytest.fixture(name="page")(ops_console.page)


def test_sign_in_is_refused_without_the_operator_token_and_lands_where_it_was_asked(
    stack: Stack,
) -> None:
    with chromium() as context:
        tab = context.new_page()
        tab.goto(f"{stack.base_url}/ops/trace/dead-1")
        tab.fill("input[name=token]", "not-the-operator-token-1")
        tab.click('[data-testid="signin"] button[type=submit]')
        assert "not the operator token" in tab.locator('[role="alert"]').inner_text()
        tab.fill("input[name=token]", OPERATOR_TOKEN)
        tab.click('[data-testid="signin"] button[type=submit]')
        tab.wait_for_selector('[data-testid="trace"][data-tool-call-id="dead-1"]')
        cookie = next(c for c in context.cookies() if c["name"] == "lineup_ops_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"


def test_a_link_with_the_token_in_its_fragment_fills_it_in_drops_it_and_waits_for_the_click(
    stack: Stack,
) -> None:
    with chromium() as context:
        tab = context.new_page()
        tab.goto(f"{stack.base_url}/ops/#token={quote(OPERATOR_TOKEN, safe='')}")
        tab.wait_for_selector('[data-testid="signin-preview"]:not([hidden])')
        assert tab.url.rstrip("/") == f"{stack.base_url}/ops"  # no fragment, no token
        assert context.cookies() == []
        tab.click('[data-testid="signin-submit"]')
        tab.wait_for_selector('[data-testid="ops-overview"] [data-testid="count-dead"]')
        assert [c["name"] for c in context.cookies()] == ["lineup_ops_session"]


def test_the_overview_shows_the_numbers_and_charts_and_updates_itself(page: Any, stack: Stack) -> None:
    # As many as the API counts (the requeue test, in whatever order it runs, revives the one).
    assert text(page, "count-dead") == str(len(outbox(stack.base_url, status="dead")))
    assert int(text(page, "deliveries-hour")) >= 5
    assert int(text(page, "failures-hour")) >= 3  # two 503s and one 400
    assert page.locator('[data-testid="chart-deliveries"] rect.ok').count() >= 1
    assert page.locator('[data-testid="chart-deliveries"] rect.bad').count() >= 1
    assert page.locator('[data-testid="chart-lateness"] rect.late').count() == 4
    eventually(lambda: text(page, "lateness-p99") != "\u2013", 10)
    delivered = int(text(page, "count-delivered"))
    page.evaluate("window.sameDocument = true")
    start_and_stop(stack.base_url, f"call-live-{uuid.uuid4().hex[:6]}", "ops-steady")
    eventually(lambda: int(text(page, "count-delivered")) == delivered + 1, 15)
    assert page.evaluate("window.sameDocument") is True  # updated in place, not reloaded
    assert page.locator('[data-testid="live"][data-state="live"]').count() == 1
    keep(page, "ops-overview")


def test_the_outbox_filters_and_a_dead_row_is_requeued_in_place(page: Any, stack: Stack) -> None:
    page.click('.nav a[data-view="outbox"]')
    page.wait_for_selector('[data-testid="outbox-row"]')
    assert page.locator('[data-testid="outbox-row"]').count() >= 7
    page.select_option('[data-testid="outbox-filters"] select[name=status]', "dead")
    page.fill('[data-testid="outbox-filters"] input[name=tool_call]', "dead-")
    page.click('[data-testid="outbox-filters"] button[type=submit]')
    eventually(lambda: page.locator('[data-testid="outbox-row"]').count() == 1)
    assert "status=dead" in page.url and "tool_call=dead-" in page.url
    row = page.locator('[data-testid="outbox-row"]')
    assert row.get_attribute("data-status") == "dead"
    event_id = row.get_attribute("data-event-id")
    assert "unknown_conversation" in row.inner_text()

    stack.refuse_dead["on"] = False
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.evaluate("window.sameDocument = true")
    page.click('[data-testid="requeue"]')
    page.wait_for_selector(f'[data-event-id="{event_id}"][data-status="pending"]', timeout=3000)
    assert "Requeued" in page.locator(".notice.ok").inner_text()
    assert asked and event_id in asked[0]
    stack.receiver.wait_for_accepted([str(event_id)])
    # Refreshed in place: the row is delivered now, so the dead filter no longer lists it.
    page.wait_for_selector('[data-testid="outbox-empty"]', timeout=10_000)
    assert page.evaluate("window.sameDocument") is True
    [requeued] = [r for r in outbox(stack.base_url, tool_call_id_prefix="dead-1")]
    assert (requeued["status"], requeued["event_id"]) == ("delivered", event_id)


def test_a_trace_shows_the_answer_the_operation_and_each_attempt_as_a_timeline(page: Any) -> None:
    page.click('.nav a[data-view="outbox"]')
    page.fill('[data-testid="outbox-filters"] input[name=tool_call]', "flaky-")
    page.click('[data-testid="outbox-filters"] button[type=submit]')
    eventually(lambda: page.locator('[data-testid="outbox-row"]').count() == 1)
    page.click('[data-testid="outbox-row"] [data-testid="trace-link"]')
    page.wait_for_selector('[data-testid="trace"][data-tool-call-id="flaky-1"] [data-testid="attempt"]')
    # The link names the row's conversation: a tool_call_id is unique per conversation.
    assert "/ops/trace/flaky-1?conversation_id=" in page.url
    assert "202" in text(page, "trace-answer")
    assert page.locator('[data-testid="trace-operation"][data-state="completed"]').count() == 0
    assert page.locator('[data-testid="trace-operation"][data-state="interrupted"]').count() == 1
    outcomes = page.locator('[data-testid="attempt"]').evaluate_all(
        "items => items.map(i => i.dataset.outcome)"
    )
    assert outcomes == ["retry", "retry", "delivered"]
    assert "HTTP 503" in page.locator('[data-testid="attempt"]').first.inner_text()
    assert page.locator('[data-testid="trace-outbox"][data-status="delivered"]').count() == 1
    keep(page, "ops-trace")


def test_a_trace_shows_the_calls_trace_id_linked_to_the_tracing_ui(page: Any, stack: Stack) -> None:
    trace_id = uuid.uuid4().hex
    page.goto(f"{stack.base_url}/ops/trace/focus-1?conversation_id=ops-focus")
    page.wait_for_selector('[data-testid="trace"][data-tool-call-id="focus-1"] [data-testid="trace-answer"]')
    assert text(page, "trace-id") == "not traced"
    # The W3C traceparent stored with the call, as a traced serve stores it.
    with psycopg.connect(stack.service.database_url, autocommit=True) as db:
        db.execute(
            "UPDATE tool_calls SET traceparent = %s WHERE tool_call_id = 'focus-1'",
            [f"00-{trace_id}-00f067aa0ba902b7-01"],
        )
    page.reload()
    page.wait_for_selector('[data-testid="trace-answer"] [data-testid="trace-url"]')
    assert text(page, "trace-id") == trace_id
    link = page.locator('[data-testid="trace-url"]')
    assert link.get_attribute("href") == ops_console.TRACE_URL_TEMPLATE.replace("{trace_id}", trace_id)
    assert link.get_attribute("rel") == "noopener noreferrer"


def test_the_operations_list_filters_by_state(page: Any) -> None:
    page.click('.nav a[data-view="operations"]')
    page.wait_for_selector('[data-testid="operation-row"]')
    page.select_option('[data-testid="operations-filters"] select[name=state]', "focusing")
    page.click('[data-testid="operations-filters"] button[type=submit]')
    eventually(lambda: page.locator('[data-testid="operation-row"]').count() == 1)
    assert page.locator('[data-testid="operation-row"]').get_attribute("data-state") == "focusing"
    assert "focus-1" in page.locator('[data-testid="operation-row"]').inner_text()


def test_interrupt_calls_are_listed_among_the_tool_calls_and_lead_to_their_trace(page: Any) -> None:
    page.click('.nav a[data-view="tool-calls"]')
    page.wait_for_selector('[data-testid="tool-call-row"][data-tool="pomodoro.interrupt"]')
    page.select_option('[data-testid="tool-calls-filters"] select[name=tool]', "pomodoro.interrupt")
    page.click('[data-testid="tool-calls-filters"] button[type=submit]')
    eventually(lambda: page.locator('[data-testid="tool-call-row"][data-tool="pomodoro.start"]').count() == 0)
    row = page.locator('[data-testid="tool-call-row"]').first
    assert "interrupted" in row.inner_text()
    tool_call_id = row.get_attribute("data-tool-call-id")
    row.locator("a").click()
    page.wait_for_selector(
        f'[data-testid="trace"][data-tool-call-id="{tool_call_id}"] [data-testid="trace-answer"]'
    )
    assert page.locator('[data-testid="trace-operation"][data-state="interrupted"]').count() == 1


def test_times_name_their_date_and_zone_counts_their_plural_and_charts_their_scale(
    page: Any, stack: Stack
) -> None:
    eventually(lambda: text(page, "lateness-p99") != "\u2013", 10)
    assert re.fullmatch(r"live · updated \d\d:\d\d:\d\d UTC", text(page, "live"))
    hint = page.locator('[data-testid="lateness-p99"] + .hint').inner_text()
    assert re.fullmatch(r"over (1 deadline|\d+ deadlines)", hint), hint
    scale = [page.locator(f'[data-testid="{end}"]').text_content() for end in ("scale-min", "scale-max")]
    assert scale[0] == "0 ms" and str(scale[1]).endswith(" ms"), scale
    dash = page.locator('[data-testid="chart-depth"] .series.dead')
    if dash.count():  # two samples at least (15 s apart)
        assert dash.evaluate("e => getComputedStyle(e).strokeDasharray") != "none"
    page.goto(f"{stack.base_url}/ops/outbox")
    page.wait_for_selector('[data-testid="outbox-row"] time')
    for shown in page.locator('[data-testid="outbox-row"] time').all_inner_texts():
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", shown), shown
    headers = page.locator('[data-testid="outbox-table"] th').all_inner_texts()
    assert "Attempts" in headers and "Att." not in headers
    assert " · result " in page.locator('[data-testid="outbox-row"]').first.inner_text()


def test_a_trace_of_an_id_used_in_two_conversations_asks_for_one_and_the_list_link_names_it(
    page: Any, browser: Any, stack: Stack
) -> None:
    # A tool_call_id is unique per conversation: two conversations' "twice-1".
    for conversation in ("ops-twice-a", "ops-twice-b"):
        start_and_stop(stack.base_url, "twice-1", conversation)
    problems = PageProblems()
    problems.expect("status of 409 (Conflict)")  # the console's read, refused as ambiguous
    tab = browser.new_page()  # signed in: the page fixture's session
    problems.watch(tab)
    tab.goto(f"{stack.base_url}/ops/trace/twice-1")
    tab.wait_for_selector('[data-testid="trace-ambiguous"]')
    assert "made in 2 conversations" in tab.locator('[data-testid="trace-ambiguous"]').inner_text()
    links = tab.locator('[data-testid="trace-conversation"]')
    assert links.all_inner_texts() == ["ops-twice-a", "ops-twice-b"]
    links.nth(1).click()
    tab.wait_for_selector('[data-testid="trace"][data-tool-call-id="twice-1"] [data-testid="trace-answer"]')
    assert tab.url.endswith("/ops/trace/twice-1?conversation_id=ops-twice-b")
    tab.close()
    assert problems.found == []

    page.goto(f"{stack.base_url}/ops/tool-calls?conversation=ops-twice-b")
    page.click('a[href^="/ops/trace/twice-1"]')
    page.wait_for_selector('[data-testid="trace"][data-tool-call-id="twice-1"] [data-testid="trace-answer"]')
    assert page.url.endswith("/ops/trace/twice-1?conversation_id=ops-twice-b")
    assert "work on ops-twice-b" in page.locator('[data-testid="trace"]').inner_text()


def test_a_trace_address_that_is_not_percent_encoding_says_so_and_a_dot_id_is_no_broken_link(
    page: Any, stack: Stack
) -> None:
    page.goto(f"{stack.base_url}/ops/trace/%E0%A4%A")
    assert "not valid percent-encoding" in page.locator('[data-testid="trace"] .notice').inner_text()
    # ".." was a tool_call_id under the earlier id rule: a list shows it, not as a link (a browser
    # would resolve it out of the address).
    with psycopg.connect(stack.service.database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, outcome, response)"
            " VALUES ('..', 'ops-legacy', 'pomodoro.interrupt', 'x', 'no_active_focusing_operation',"
            ' \'{"tool_call_id": "..", "status": "no_active_focusing_operation"}\')'
            " ON CONFLICT DO NOTHING"
        )
    page.goto(f"{stack.base_url}/ops/tool-calls?conversation=ops-legacy")
    page.wait_for_selector('[data-testid="tool-call-row"][data-tool-call-id=".."]')
    assert page.locator('[data-testid="tool-call-row"] a[href]').count() == 0


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280x800", "phone"])
def test_every_page_fits_the_screen(page: Any, stack: Stack, size: dict[str, int]) -> None:
    page.set_viewport_size(size)
    for path, ready in [
        ("/ops/", '[data-testid="chart-deliveries"]'),
        ("/ops/outbox", '[data-testid="outbox-row"]'),
        ("/ops/operations", '[data-testid="operation-row"]'),
        ("/ops/tool-calls", '[data-testid="tool-call-row"]'),
        ("/ops/trace/flaky-1", '[data-testid="attempt"]'),
    ]:
        page.goto(f"{stack.base_url}{path}")
        page.wait_for_selector(ready)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow}px wider than {size['width']}px"
        assert page.locator(ready).first.is_visible()


# Delivery control from the overview.


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
    # Dates are UTC, in the form every time of the console is shown; another form is refused.
    page.fill(f'{recover} input[name="since"]', "yesterday")
    page.click('[data-testid="recover-dry-run"]')
    eventually(lambda: "is not a UTC time like 2026-12-01 14:03" in text(page, "recover-result"), 5)
    created = dead["created_at"]  # RFC 3339 UTC: the row's minute, as the person would type it
    page.fill(f'{recover} input[name="since"]', "")
    page.fill(f'{recover} input[name="until"]', f"{created[:10]} {created[11:16]}")
    page.click('[data-testid="recover-dry-run"]')
    eventually(lambda: "0 dead row(s) match" in text(page, "recover-result"), 5)  # before its minute
    page.fill(f'{recover} input[name="until"]', "")
    page.fill(f'{recover} input[name="since"]', f"{created[:10]} {created[11:16]}")
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
