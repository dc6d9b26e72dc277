"""The third security review's findings, black-box against a real ``python -m service serve`` on
loopback: one person's session can no longer write without limit, and ``/metrics`` no longer
answers anyone who reaches the public port once a deployment closes it (METRICS_TOKEN)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import HOST, OPERATOR

pytestmark = pytest.mark.e2e


def test_a_sessions_flood_answers_429_after_the_limit_and_metrics_need_a_token(
    service_process: Any, db: Any
) -> None:
    service = service_process(WRITE_LIMIT_WINDOW_SECONDS="86400", METRICS_TOKEN="metrics-token-for-tests-1")
    with httpx.Client(base_url=service.base_url, timeout=10) as client:
        minted = client.post(
            "/v1/host/sessions", json={"subject": "a person", "conversation_ids": ["conv-bb"]}, headers=HOST
        )
        assert minted.status_code == 201, minted.text
        session = {"Authorization": f"Bearer {minted.json()['session']}"}
        body = {"role": "user", "text": "😀" * 8000}
        codes = [
            client.post("/v1/host/conversations/conv-bb/messages", json=body, headers=session)
            for _ in range(40)
        ]

        refused = client.get("/metrics")
        scraped = client.get("/metrics", headers=OPERATOR)
    statuses = [answer.status_code for answer in codes]
    assert statuses == [201] * 32 + [429] * 8  # 1 MiB of text per window: 32 messages of 32,000 bytes
    assert codes[-1].json()["error"] == "too_many_requests" and int(codes[-1].headers["retry-after"]) >= 1
    assert (
        db.execute("SELECT count(*) AS n FROM messages WHERE conversation_id = 'conv-bb'").fetchone()["n"]
        == 32
    )
    assert refused.status_code == 401 and "lineup_" not in refused.text
    assert scraped.status_code == 200 and "lineup_tool_calls_total" in scraped.text


def test_metrics_refuse_a_public_peer_by_default_and_answer_the_probe_on_loopback(
    service_process: Any,
) -> None:
    # No METRICS_TOKEN and no METRICS_PUBLIC: the contract's plain probe from loopback still reads
    # the page, and a client on the public internet that a proxy on loopback forwards (uvicorn
    # takes its X-Forwarded-For from loopback) is refused like any request without a token.
    service = service_process()
    with httpx.Client(base_url=service.base_url, timeout=10) as client:
        probe = client.get("/metrics")
        forwarded = client.get("/metrics", headers={"X-Forwarded-For": "8.8.8.8"})
        with_token = client.get("/metrics", headers={"X-Forwarded-For": "8.8.8.8", **OPERATOR})
    assert probe.status_code == 200 and "lineup_tool_calls_total" in probe.text
    assert forwarded.status_code == 401 and "lineup_" not in forwarded.text
    assert forwarded.json()["error"] == "unauthorized"
    assert with_token.status_code == 200 and "lineup_" in with_token.text
