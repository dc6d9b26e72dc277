"""The Bridge in a real browser: only the attached app iframe's well-formed SDK requests are served;
the Whiteboard keeps its strokes in its own snapshot through the SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ServiceProcess
from tests.support.browser import (
    PageProblems,
    app_frame,
    chromium,
    countdown_seconds,
    eventually,
    module_service,
    operation,
    own_conversation,
    requires_chromium,
    screenshot,
    service_db,
    sign_in,
    start_pomodoro,
    wait_live,
)

pytestmark = [pytest.mark.e2e, requires_chromium]

LISTEN_FOR_REPLIES = """() => {
    window.repliesSeen = [];
    addEventListener("message", (event) => window.repliesSeen.push(event.data));
}"""
FORGED = [
    {"type": "lineup:request", "id": "forged-close", "method": "navigation.close", "params": {}},
    {
        "type": "lineup:request",
        "id": "forged-save",
        "method": "state.save",
        "params": {"data": {"display_state": "completed"}, "expected_revision": 1},
    },
]
MALFORMED = [
    {"type": "lineup:request", "id": "m1", "method": "outbox.write", "params": {}},
    {"type": "lineup:request", "id": "m2", "method": "navigation.close", "params": {"instance_id": "x"}},
    {"type": "lineup:request", "id": "m3", "method": "navigation.close", "params": {}, "token": "x"},
    {
        "type": "lineup:request",
        "id": "m4",
        "method": "state.save",
        "params": {"data": [], "expected_revision": 0},
    },
    {
        "type": "lineup:request",
        "id": "m5",
        "method": "state.save",
        "params": {"data": {}, "expected_revision": 1.5},
    },
    {"type": "lineup:request", "id": 7, "method": "context", "params": {}},
    "navigation.close",
]


service = pytest.fixture(scope="module", name="service")(module_service)
conversation = pytest.fixture(name="conversation")(own_conversation)
db = pytest.fixture(name="db")(service_db)


@pytest.fixture
def host(service: ServiceProcess, conversation: str) -> Iterator[tuple[Any, ServiceProcess, PageProblems]]:
    with chromium() as browser:
        page = browser.new_page()
        problems = PageProblems()
        problems.watch(page)
        sign_in(page, service.base_url, conversation)
        wait_live(page)
        yield page, service, problems
        page.wait_for_timeout(200)
        assert problems.found == []


def ignored(page: Any) -> int:
    return int(page.locator('[data-testid="workspace"]').get_attribute("data-bridge-ignored"))


def snapshot_revision(db: Any, instance_id: str) -> int:
    row = db.execute("SELECT revision FROM instance_states WHERE instance_id = %s", (instance_id,)).fetchone()
    return int(row["revision"])


def test_sdk_messages_from_any_other_window_or_of_the_wrong_shape_are_ignored(
    host: tuple[Any, ServiceProcess, PageProblems], conversation: str, db: Any
) -> None:
    page, service, _ = host
    started = start_pomodoro(service.base_url, conversation, 600, "deep work")
    app = app_frame(page, "pomodoro")
    countdown_seconds(app)
    eventually(lambda: snapshot_revision(db, started["instance_id"]) == 1)
    before = ignored(page)

    # A second sandboxed window running the service's own app page: not the attached iframe.
    page.evaluate("""() => {
        const forger = document.createElement("iframe");
        forger.setAttribute("sandbox", "allow-scripts");
        forger.id = "forger";
        forger.src = "/apps/whiteboard/";
        document.body.append(forger);
    }""")
    forger = page.wait_for_selector("#forger").content_frame()
    forger.wait_for_load_state()
    forger.evaluate(LISTEN_FOR_REPLIES)
    for message in FORGED:
        forger.evaluate("(message) => parent.postMessage(message, '*')", message)
    # The host page's own window, and the real app iframe with malformed requests.
    page.evaluate(LISTEN_FOR_REPLIES)
    page.evaluate("(message) => window.postMessage(message, '*')", FORGED[0])
    app.evaluate(LISTEN_FOR_REPLIES)
    for malformed in MALFORMED:
        app.evaluate("(message) => parent.postMessage(message, '*')", malformed)

    # The forger's own SDK asked for its state too: also ignored.
    expected = before + 1 + len(FORGED) + 1 + len(MALFORMED)
    eventually(lambda: ignored(page) >= expected)
    page.wait_for_timeout(500)
    assert forger.evaluate("window.repliesSeen") == []
    assert app.evaluate("window.repliesSeen") == []
    current = operation(service.base_url, started["operation"]["operation_id"])
    assert current["state"] == "focusing"
    assert snapshot_revision(db, started["instance_id"]) == 1
    # The attached app is still served.
    assert app.evaluate("lineup.context().then((context) => context.operation.state)") == "focusing"
    assert page.locator('iframe[data-app-scope="pomodoro"]').count() == 1


def test_sdk_calls_reject_with_the_contract_error_body(
    host: tuple[Any, ServiceProcess, PageProblems],
    conversation: str,
) -> None:
    page, service, problems = host
    problems.expect("status of 409 (Conflict)")
    problems.expect("status of 422 (Unprocessable")
    start_pomodoro(service.base_url, conversation, 600, "deep work")
    app = app_frame(page, "pomodoro")
    countdown_seconds(app)
    rejected = app.evaluate("""async () => {
        const outcome = (promise) => promise.then(
            () => null, (e) => ({name: e.name, error: e.error, revision: e.revision ?? null, body: e.body.error}));
        const current = await lineup.state.get();
        return [
            await outcome(lineup.state.save({remaining_seconds: 5}, current.revision)),
            await outcome(lineup.state.save({display_state: "focusing"}, current.revision + 7)),
            await outcome(lineup.state.save([], 0)),
        ];
    }""")
    assert rejected == [
        {
            "name": "LineupError",
            "error": "state_schema_violation",
            "revision": None,
            "body": "state_schema_violation",
        },
        {"name": "LineupError", "error": "revision_conflict", "revision": 1, "body": "revision_conflict"},
        {"name": "LineupError", "error": "invalid_request", "revision": None, "body": "invalid_request"},
    ]


def test_a_window_opened_from_the_host_cannot_even_reach_it(
    host: tuple[Any, ServiceProcess, PageProblems],
    conversation: str,
) -> None:
    page, service, _ = host
    start_pomodoro(service.base_url, conversation, 600, "deep work")
    countdown_seconds(app_frame(page, "pomodoro"))
    with page.context.expect_page() as opened:
        page.evaluate("() => { window.open('/apps/whiteboard/', 'forger'); }")
    popup = opened.value
    popup.wait_for_load_state()
    # The host page is Cross-Origin-Opener-Policy: same-origin, the app page is sandboxed.
    assert popup.evaluate("window.opener") is None
    popup.close()


def test_the_whiteboard_keeps_its_strokes_in_its_own_snapshot(
    host: tuple[Any, ServiceProcess, PageProblems], conversation: str, db: Any
) -> None:
    page, _, _ = host
    page.click('[data-testid="open-whiteboard"]')
    board = app_frame(page, "whiteboard")
    board.wait_for_selector('[data-testid="status"]:text("0 strokes")')
    instance_id = page.locator('iframe[data-app-scope="whiteboard"]').get_attribute("data-instance-id")

    box = board.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + 40, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(box["x"] + 200, box["y"] + 120, steps=12)
    page.mouse.up()
    board.wait_for_selector('[data-testid="status"]:text("1 stroke")')
    row = db.execute("SELECT data FROM instance_states WHERE instance_id = %s", (instance_id,)).fetchone()
    [stroke] = row["data"]["strokes"]
    assert (stroke["color"], stroke["width"]) == ("#1f2937", 3)
    assert len(stroke["points"]) >= 2
    screenshot(page, "web-host-whiteboard")

    page.reload()
    wait_live(page)
    app_frame(page, "whiteboard").wait_for_selector('[data-testid="status"]:text("1 stroke")')
