"""The whole loop in a browser: the person types to the demo Agent, the Agent calls the Tool API, the
Pomodoro opens, and the result the relay delivers comes back as the Agent's reply."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.processes import free_port, spawn, stop, wait_http
from harness.receiver import new_secret
from tests.conftest import AGENT_TOKEN, HOST_TOKEN, ServiceProcess
from tests.support.browser import (
    PageProblems,
    app_frame,
    chromium,
    countdown_seconds,
    eventually,
    requires_chromium,
    screenshot,
    sign_in,
    timeline,
    timeline_scroll,
    wait_live,
)
from tests.support.logs import at_least, named

pytestmark = [pytest.mark.e2e, requires_chromium]

CONVERSATION = "demo-web"


class Stack:
    """The service, a relay and the demo Agent following ``CONVERSATION``."""

    def __init__(self, service: ServiceProcess, logs: Path) -> None:
        self.service = service
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> Stack:
        secret, agent_port = new_secret(), free_port()
        agent = spawn(
            ["-m", "demo_agent", "--port", str(agent_port)],
            {
                "WEBHOOK_SECRET": secret,
                "LINEUP_URL": self.service.base_url,
                "AGENT_TOKEN": AGENT_TOKEN,
                "HOST_TOKEN": HOST_TOKEN,
                "DEMO_CONVERSATIONS": CONVERSATION,
            },
            self.logs / "demo-agent.log",
        )
        self.processes.append(agent)
        relay = spawn(
            ["-m", "relay"],
            {
                "DATABASE_URL": self.service.database_url,
                "AGENT_WEBHOOK_URL": f"http://127.0.0.1:{agent_port}/webhooks/lineup",
                "WEBHOOK_SECRET": secret,
                "RELAY_METRICS_PORT": "0",
                "RELAY_POLL_INTERVAL_SECONDS": "0.2",
            },
            self.logs / "relay.log",
        )
        self.processes.append(relay)
        wait_http(f"http://127.0.0.1:{agent_port}/healthz", process=agent)
        eventually(lambda: named(self.agent_log(), "following"), seconds=15)
        return self

    def agent_log(self) -> str:
        return (self.logs / "demo-agent.log").read_text(errors="replace")

    def stop(self) -> None:
        for process in self.processes:
            stop(process)


@pytest.fixture
def stack(service_process: Callable[..., ServiceProcess], tmp_path: Path) -> Iterator[Stack]:
    running = Stack(service_process(), tmp_path)
    try:
        yield running.start()
    finally:
        running.stop()


def agent_says(page: Any, text: str) -> Any:
    return page.wait_for_selector(f'[data-testid="message"][data-role="agent"] .text:text-is("{text}")')


def type_message(page: Any, text: str) -> None:
    page.fill('[data-testid="message-input"]', text)
    page.press('[data-testid="message-input"]', "Enter")


def test_typing_to_the_demo_agent_starts_a_real_focus_period_and_its_result_comes_back(
    stack: Stack, db: Any
) -> None:
    with chromium() as browser:
        page = browser.new_page()
        problems = PageProblems()
        problems.watch(page)
        sign_in(page, stack.service.base_url, CONVERSATION)
        wait_live(page)

        type_message(page, "focus 1 minute on tests")
        agent_says(page, "Focus period started: 1 min on tests. I'll tell you when it ends.")
        countdown = countdown_seconds(app_frame(page, "pomodoro"))
        assert 55 <= countdown <= 60
        [operation] = db.execute(
            "SELECT state, duration_seconds, activity, tool_call_id FROM operations WHERE conversation_id = %s",
            (CONVERSATION,),
        ).fetchall()
        assert (operation["state"], operation["duration_seconds"], operation["activity"]) == (
            "focusing",
            60,
            "tests",
        )
        assert operation["tool_call_id"].startswith("demo-")

        type_message(page, "how long is left?")
        page.wait_for_selector('[data-testid="message"][data-role="agent"] .text:has-text("left on tests")')
        screenshot(page, "web-host-demo-agent-focusing")

        type_message(page, "stop")
        page.wait_for_selector('iframe[data-app-scope="pomodoro"]', state="detached")
        stopped = page.wait_for_selector(
            '[data-testid="message"][data-role="agent"] .text:has-text("Stopped: you focused")'
        )
        assert stopped.inner_text().endswith("of 1 min on tests.")
        # The relay's signed webhook reached the Agent, which told the stop once, from its receipt.
        eventually(lambda: named(stack.agent_log(), "tool_result"))
        page.wait_for_timeout(500)
        rows = timeline(page)
        assert [(kind, who) for kind, who, _, _ in rows[-3:]] == [
            ("message", "You"),
            ("tool-result", "Tool"),
            ("message", "Agent"),
        ]
        assert rows[-3][2] == "stop" and rows[-1][2] == stopped.inner_text()
        assert (
            sum("interrupted" in text or "Stopp" in text for _, who, text, _ in rows if who == "Agent") == 1
        )
        assert "UTC" not in " ".join(text for _, _, text, _ in rows)
        screenshot(page, "web-host-demo-agent-result")

        page.reload()
        wait_live(page)
        eventually(lambda: len(timeline(page)) >= len(rows))
        assert timeline(page) == rows
        assert timeline_scroll(page)["below"] <= 2
        page.wait_for_timeout(200)
        assert problems.found == []


def test_the_demo_agent_started_before_the_service_waits_for_it_quietly(
    tmp_path: Path, database_url: str
) -> None:
    service = ServiceProcess(database_url, tmp_path)  # its port is chosen, nothing listens there yet
    agent_port = free_port()
    agent = spawn(
        ["-m", "demo_agent", "--port", str(agent_port)],
        {
            "WEBHOOK_SECRET": new_secret(),
            "LINEUP_URL": service.base_url,
            "AGENT_TOKEN": AGENT_TOKEN,
            "HOST_TOKEN": HOST_TOKEN,
            "DEMO_CONVERSATIONS": CONVERSATION,
        },
        tmp_path / "demo-agent.log",
    )
    try:
        # Up (its /readyz asks start with its server), then refused at 0, 0.1, 0.3 and 0.7 s.
        wait_http(f"http://127.0.0.1:{agent_port}/healthz", process=agent)
        time.sleep(0.8)
        assert agent.poll() is None
        service.start()
        eventually(lambda: named((tmp_path / "demo-agent.log").read_text(), "following"), seconds=20)
    finally:
        stop(agent)
        if service.process is not None:
            service.stop()
    log = (tmp_path / "demo-agent.log").read_text()
    assert at_least(log, "warning") == [], log
    assert "All connection attempts failed" not in log
