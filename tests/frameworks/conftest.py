"""The frameworks tier's stack: a real ``serve`` and a real relay (delivering to a signed-webhook
receiver that plays the Agent's backend) on a database of their own, shared by the tier's tests; and
the person, who answers the conversation's questions through the Host API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.database import DatabaseFactory, with_database
from harness.processes import RelayProcess, free_port
from harness.receiver import Delivery, Receiver, new_secret
from tests.conftest import AGENT_TOKEN, HOST, ROOT, ServiceProcess

CLIENTS = Path(__file__).parent / "clients"
#: Each framework's own virtual environment, built by `make frameworks` from its pinned
#: requirements (tests/frameworks/requirements/<name>.txt); FastMCP's client is a test dependency
#: of the project, so it runs in the project's own environment.
VENVS = ROOT / ".cache" / "frameworks"
#: The names every model provider accepts for a function (OpenAI's, Anthropic's).
PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class Stack:
    service: ServiceProcess
    receiver: Receiver
    database_url: str

    def wait_delivered(self, conversation_id: str, count: int) -> list[dict[str, Any]]:
        """The webhooks the relay delivered for the conversation (accepted ones, in arrival order),
        once there are ``count`` of them."""

        def delivered(deliveries: list[Delivery]) -> list[dict[str, Any]]:
            return [
                d.payload
                for d in deliveries
                if d.reply.accepted and d.payload["conversation_id"] == conversation_id
            ]

        return delivered(self.receiver.wait_until(lambda d: len(delivered(d)) >= count, timeout=30))


@pytest.fixture(scope="session")
def stack(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("frameworks")
    name = database_factory.create()
    url = with_database(database_factory.server, name)
    secret = new_secret()
    service = ServiceProcess(url, logs)
    started: list[ServiceProcess | RelayProcess] = []
    try:
        with Receiver([secret]) as receiver:
            relay = RelayProcess(
                url, receiver.url, secret, logs / "relay.log", {"RELAY_METRICS_PORT": str(free_port())}
            )
            started.append(relay.start())
            relay.wait_ready(120)
            started.append(service)
            service.start()
            yield Stack(service, receiver, url)
    finally:
        for process in started:
            if process.process is not None and process.process.poll() is None:
                process.stop()
        database_factory.drop(name)


class Person(threading.Thread):
    """Answers every question waiting in the conversation, as a person at the Host would: reads the
    workspace's ``pending_interactions`` and posts the answer to the Host API."""

    def __init__(self, base_url: str, conversation_id: str, answer: str) -> None:
        super().__init__(name=f"person-{conversation_id}", daemon=True)
        self.base_url, self.conversation_id, self.answer = base_url, conversation_id, answer
        self.stopped = threading.Event()
        self.answered: list[dict[str, Any]] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.base_url, headers=HOST, timeout=10) as host:
            while not self.stopped.wait(0.1):
                workspace = host.get(f"/v1/host/conversations/{self.conversation_id}/workspace")
                workspace.raise_for_status()
                for question in workspace.json()["pending_interactions"]:
                    answered = host.post(
                        f"/v1/host/interactions/{question['tool_call_id']}/answer",
                        params={"conversation_id": self.conversation_id},
                        json={"answer": self.answer},
                    )
                    answered.raise_for_status()
                    self.answered.append(answered.json())


def run_loop(
    stack: Stack, python: Path | str, client: str, conversation_id: str
) -> dict[str, dict[str, Any]]:
    """Runs ``clients/<client>.py`` with ``python`` against the stack while the person answers; its
    report, by step."""
    if not Path(python).exists():
        pytest.fail(f"{python} is missing: `make frameworks` builds each framework's environment")
    env = {
        **os.environ,
        "LINEUP_MCP_URL": f"{stack.service.base_url}/mcp",
        "LINEUP_AGENT_TOKEN": AGENT_TOKEN,
        "LINEUP_CONVERSATION_ID": conversation_id,
        "PYTHONPATH": str(CLIENTS),
    }
    person = Person(stack.service.base_url, conversation_id, "tea")
    person.start()
    try:
        done = subprocess.run(
            [str(python), str(CLIENTS / f"{client}.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        person.stopped.set()
        person.join(10)
    assert done.returncode == 0, f"{client} exited {done.returncode}:\n{done.stderr[-4000:]}"
    steps = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {step.pop("step"): step for step in steps}


def framework_python(name: str) -> Path | str:
    return sys.executable if name == "fastmcp" else VENVS / name / "bin" / "python"
