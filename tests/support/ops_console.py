"""The operator console's browser tests' stack (one service, one relay, a local Agent that answers
400 to some results, 503 twice to others, 204 to the rest), the signed-in page, and their helpers.

The fixtures are plain functions here; each test module makes them its own with ``pytest.fixture``
(a stack per module).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from harness.database import DatabaseFactory, with_database
from harness.processes import free_port, spawn, stop, wait_http
from harness.receiver import Delivery, Receiver, Reply, new_secret
from tests.conftest import AGENT, OPERATOR, OPERATOR_TOKEN, ROOT, ServiceProcess
from tests.support.browser import PageProblems, chromium, eventually, screenshot

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


TRACE_URL_TEMPLATE = "http://jaeger.example:16686/trace/{trace_id}"


@dataclass
class Stack:
    service: ServiceProcess
    receiver: Receiver
    relay_metrics: str
    refuse_dead: dict[str, bool] = field(default_factory=lambda: {"on": True})

    @property
    def base_url(self) -> str:
        return self.service.base_url


def answer(refuse: dict[str, bool]) -> Any:
    def responder(delivery: Delivery, earlier: int) -> Reply:
        call = str(delivery.payload.get("tool_call_id", ""))
        if call.startswith("dead-") and refuse["on"]:
            return Reply(400, body=b'{"error":"unknown_conversation"}')
        if call.startswith("flaky-") and earlier < 2:
            return Reply(503, body=b"upstream unavailable")
        if call.startswith("gone-"):
            return Reply(410, body=b"gone")
        return Reply(204)

    return responder


def tool_call(
    base_url: str, tool_call_id: str, conversation_id: str, tool: str, arguments: dict[str, Any]
) -> Any:
    body = {
        "tool_call_id": tool_call_id,
        "conversation_id": conversation_id,
        "tool": tool,
        "arguments": arguments,
    }
    response = httpx.post(f"{base_url}/v1/tool-calls", json=body, headers=AGENT, timeout=10)
    assert response.status_code in (200, 202), response.text
    return response.json()


def start_and_stop(base_url: str, start_id: str, conversation_id: str) -> None:
    arguments = {"duration_seconds": 1500, "activity": f"work on {conversation_id}"}
    tool_call(base_url, start_id, conversation_id, "pomodoro.start", arguments)
    tool_call(base_url, f"stop-{uuid.uuid4()}", conversation_id, "pomodoro.interrupt", {})


def outbox(base_url: str, **params: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{base_url}/v1/ops/outbox", headers=OPERATOR, params=params, timeout=10)
    rows: list[dict[str, Any]] = response.json()["outbox"]
    return rows


def stack(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    name = database_factory.create()
    url = with_database(database_factory.server, name)
    logs = tmp_path_factory.mktemp("ops-console")
    secret = new_secret()
    refuse = {"on": True}
    relay: subprocess.Popen[bytes] | None = None
    # The console links a call's trace to this (tests/e2e/test_ops_console.py, the trace id).
    service = ServiceProcess(url, logs, TRACE_URL_TEMPLATE=TRACE_URL_TEMPLATE)
    with Receiver([secret], responder=answer(refuse)) as receiver:
        try:
            port = free_port()
            while port == service.port:  # the service listens only once started
                port = free_port()
            env = {
                "DATABASE_URL": url,
                "AGENT_WEBHOOK_URL": receiver.url,
                "WEBHOOK_SECRET": secret,
                "RELAY_ID": "relay-console",
                "RELAY_BACKOFF_BASE_SECONDS": "0.3",
                "RELAY_BACKOFF_MAX_SECONDS": "0.6",
                "RELAY_POLL_INTERVAL_SECONDS": "0.2",
                "RELAY_METRICS_PORT": str(port),
            }
            # The database is a migrated clone: the relay needs nothing of the service, so both
            # start side by side.
            relay = spawn(["-m", "relay"], env, logs / "relay.log")
            service.start()
            wait_http(f"http://127.0.0.1:{port}/readyz", process=relay)
            base = service.base_url
            for n in range(3):
                start_and_stop(base, f"call-{n}-{uuid.uuid4().hex[:6]}", "ops-steady")
            start_and_stop(base, "flaky-1", "ops-flaky")
            start_and_stop(base, "dead-1", "ops-dead")
            tool_call(base, "focus-1", "ops-focus", "pomodoro.start", {"duration_seconds": 3600})
            tool_call(base, "deadline-1", "ops-deadline", "pomodoro.start", {"duration_seconds": 1})
            eventually(lambda: len(outbox(base, status="delivered")) == 5 and outbox(base, status="dead"), 20)
            yield Stack(service, receiver, f"http://127.0.0.1:{port}", refuse)
        finally:
            if relay is not None:
                stop(relay)
            service.stop() if service.process is not None else None
            database_factory.drop(name)


def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium() as context:
        yield context


def page(browser: Any, stack: Stack) -> Iterator[Any]:
    """A page of the signed-in console (signing in through the form once per module)."""
    problems = PageProblems()
    tab = browser.new_page()
    problems.watch(tab)
    tab.set_viewport_size(DESKTOP)
    tab.goto(f"{stack.base_url}/ops/")
    if tab.locator('[data-testid="signin"]').count():
        tab.fill("input[name=token]", OPERATOR_TOKEN)
        tab.click('[data-testid="signin"] button[type=submit]')
    tab.wait_for_selector('[data-testid="ops-overview"] [data-testid="count-dead"]')
    yield tab
    tab.close()
    assert problems.found == []


def keep(page: Any, name: str) -> None:
    """A screenshot in test-artifacts/, and in the folder ``OPS_CONSOLE_SCREENSHOTS`` names."""
    path = screenshot(page, name)
    folder = os.environ.get("OPS_CONSOLE_SCREENSHOTS")
    if folder:
        (ROOT / folder).mkdir(exist_ok=True)
        (ROOT / folder / path.name).write_bytes(path.read_bytes())


def text(page: Any, testid: str) -> str:
    value: str = page.locator(f'[data-testid="{testid}"]').first.inner_text()
    return value


def delivery_state(base_url: str) -> dict[str, Any]:
    state: dict[str, Any] = httpx.get(f"{base_url}/v1/ops/delivery", headers=OPERATOR, timeout=10).json()
    return state
