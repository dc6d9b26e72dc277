"""SIGTERM: the service stops taking work, finishes the request in flight, and exits 0."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import psycopg
import pytest

from harness.calls import start_body
from tests.conftest import AGENT

pytestmark = pytest.mark.e2e


def test_a_request_in_flight_at_sigterm_completes_and_the_service_exits_0(
    service_process: Any, database_url: str
) -> None:
    service = service_process()
    with httpx.Client(base_url=service.base_url, timeout=30) as client:
        client.post("/v1/tool-calls", json=start_body("warm-up", duration_seconds=600), headers=AGENT)
        answers: list[httpx.Response] = []
        # Hold the conversation's workspace row so the next start waits inside its transaction.
        with psycopg.connect(database_url) as blocker:
            blocker.execute("INSERT INTO workspaces (conversation_id) VALUES ('in-flight')")
            blocker.commit()
            blocker.execute("SELECT 1 FROM workspaces WHERE conversation_id = 'in-flight' FOR UPDATE")
            caller = threading.Thread(
                target=lambda: answers.append(
                    client.post("/v1/tool-calls", json=start_body("in-flight"), headers=AGENT)
                )
            )
            caller.start()
            time.sleep(0.5)  # the request is now waiting on the row lock
            assert service.process is not None
            service.process.terminate()
            time.sleep(0.5)
            blocker.rollback()  # let it finish
            caller.join(timeout=20)
    assert service.process.wait(timeout=25) == 0
    assert len(answers) == 1
    assert answers[0].status_code == 202, answers[0].text
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{service.base_url}/healthz", timeout=2)
