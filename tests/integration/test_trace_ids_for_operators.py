"""The trace id of a recorded call where operators look: the ops API's trace (the console's trace
page reads it) and ``ops trace``, linked through ``TRACE_URL_TEMPLATE``.

The id comes from the W3C ``traceparent`` stored with the call (``tool_calls.traceparent``,
written by the call itself when serve traces: tests/e2e/test_traces_exported.py); a call recorded
without one reads as "not traced". Here it is written by hand."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import start_body
from service.app import create_app
from service.manifests import Registry
from service.settings import SettingsError, load_settings
from service.telemetry import trace_id_of, trace_url
from tests.conftest import AGENT, OPERATOR, make_settings
from tests.support import ops_cli

ops = pytest.fixture(name="ops")(ops_cli.ops)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
TEMPLATE = "http://jaeger.example:16686/trace/{trace_id}"


@pytest.mark.parametrize(
    ("traceparent", "expected"),
    [
        (TRACEPARENT, TRACE_ID),
        (TRACEPARENT.upper().replace("00-", "00-", 1), TRACE_ID),
        (None, None),
        ("", None),
        ("00-" + "0" * 32 + "-00f067aa0ba902b7-01", None),
        ("00-xyz-00f067aa0ba902b7-01", None),
        ("ff-" + TRACE_ID + "-00f067aa0ba902b7-01", None),
        ("garbage", None),
    ],
)
def test_the_trace_id_of_a_traceparent(traceparent: str | None, expected: str | None) -> None:
    assert trace_id_of(traceparent) == expected


def test_the_template_must_name_the_trace_id() -> None:
    assert trace_url(TEMPLATE, TRACE_ID) == f"http://jaeger.example:16686/trace/{TRACE_ID}"
    assert trace_url(TEMPLATE, None) is None and trace_url(None, TRACE_ID) is None
    for bad in ("http://jaeger:16686/trace/", "ftp://x/{trace_id}", "{trace_id}"):
        with pytest.raises(SettingsError, match="TRACE_URL_TEMPLATE"):
            load_settings("ops", database_url="postgresql://u@h/d", trace_url_template=bad)


async def test_the_ops_trace_shows_the_calls_trace_id_and_link_and_not_traced_without_one(
    database_url: str, registry: Registry, db: Any, ops: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(database_url, trace_url_template=TEMPLATE)
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        for call in ("start-traced", "start-untraced"):
            conversation = f"conv-{call}"
            answer = await client.post(
                "/v1/tool-calls", json=start_body(conversation, tool_call_id=call), headers=AGENT
            )
            assert answer.status_code == 202
        # Made while the service did not trace: nothing stored.
        before = (await client.get("/v1/ops/tool-calls/start-traced", headers=OPERATOR)).json()
        assert before["tool_call"]["trace_id"] is None and before["tool_call"]["trace_url"] is None

        db.execute(
            "UPDATE tool_calls SET traceparent = %s WHERE tool_call_id = 'start-traced'", [TRACEPARENT]
        )
        traced = (await client.get("/v1/ops/tool-calls/start-traced", headers=OPERATOR)).json()
        untraced = (await client.get("/v1/ops/tool-calls/start-untraced", headers=OPERATOR)).json()
    assert traced["tool_call"]["trace_id"] == TRACE_ID
    assert traced["tool_call"]["trace_url"] == f"http://jaeger.example:16686/trace/{TRACE_ID}"
    assert untraced["tool_call"]["trace_id"] is None and untraced["tool_call"]["trace_url"] is None

    monkeypatch.setenv("TRACE_URL_TEMPLATE", TEMPLATE)
    code, out, _ = ops("trace", "start-traced")
    assert code == 0
    assert re.search(rf"^  trace +{TRACE_ID}$", out, re.MULTILINE)
    assert re.search(rf"^  trace url +http://jaeger.example:16686/trace/{TRACE_ID}$", out, re.MULTILINE)
    assert json.loads(ops("trace", "start-traced", "--json")[1])["tool_call"]["trace_id"] == TRACE_ID
    code, out, _ = ops("trace", "start-untraced")
    assert code == 0 and re.search(r"^  trace +not traced$", out, re.MULTILINE)
