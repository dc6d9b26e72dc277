"""What came from outside — an endpoint's reply in ``last_error`` and in the attempts, a pause
reason — reaches the operator's terminal with its control characters escaped, never acted on
(the third security review: a ``400`` whose body retitled the terminal and cleared the screen).
The database and the JSON APIs keep the text as it came."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.receiver import Receiver, Reply, new_secret
from tests.support import ops_cli
from tests.support.outbox import outbox_rows, queue_results, relay_config, running_relay, wait_until

ops = pytest.fixture(name="ops")(ops_cli.ops)

# Retitles the terminal, clears the screen, a one-byte CSI, a right-to-left override, DEL.
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil\x7f done"
ACTED_ON = ("\x1b", "\x07", "\x9b", "\u202e", "\x7f")


def dead_row_with_a_hostile_reply(database_url: str, db: Any) -> tuple[str, str]:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-hostile")
    reply = Reply(400, body=HOSTILE.encode())
    with (
        Receiver([secret], responder=lambda _d, _earlier: reply) as agent,
        running_relay(relay_config(database_url, agent.url, [secret])),
    ):
        wait_until(lambda: outbox_rows(db)[queued.event_id]["status"] == "dead")
    return queued.event_id, queued.tool_call_id


def test_an_endpoints_reply_is_printed_with_its_control_characters_escaped(
    ops: Any, database_url: str, db: Any
) -> None:
    event_id, tool_call_id = dead_row_with_a_hostile_reply(database_url, db)
    stored = outbox_rows(db)[event_id]["last_error"]
    assert "\x1b]0;owned\x07" in stored  # kept as it came

    for args in (
        ("outbox", "list", "--status", "dead"),
        ("outbox", "list", "--status", "dead", "--wide"),
        ("outbox", "show", event_id),
        ("trace", tool_call_id),
    ):
        code, out, err = ops(*args)
        assert code == 0, err
        assert not any(c in out for c in ACTED_ON), args
        assert "\\x1b]0;owned" in out, args

    code, out, _ = ops("outbox", "show", event_id, "--json")
    assert code == 0 and not any(c in out for c in ACTED_ON)
    assert json.loads(out)["last_error"] == stored  # the same JSON value, escaped as JSON


def test_a_pause_reason_is_printed_escaped(ops: Any) -> None:
    assert ops("delivery", "pause", "--reason", HOSTILE)[0] == 0
    code, out, _ = ops("delivery", "status")
    assert code == 0 and not any(c in out for c in ACTED_ON)
    assert "(\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202eevil\\x7f done)" in out
