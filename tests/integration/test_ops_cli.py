"""``python -m service ops``: listing, showing, stats and traces; requeueing and delivery control
in ``test_ops_cli_writes.py``, the command as a process in ``test_ops_cli_process.py``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import interrupt_body, start_body
from tests.conftest import AGENT
from tests.integration.test_ops_api import add_attempt, add_outbox_row
from tests.support import ops_cli
from tests.support.ops_cli import outbox_row

Client = AsyncTestClient[Any]

ops = pytest.fixture(name="ops")(ops_cli.ops)


def test_outbox_list_prints_a_table_filtered_by_status_and_conversation(ops: Any, db: Any) -> None:
    dead = add_outbox_row(db, "conv-a", 1, "dead", attempts=3, last_error="HTTP 400: no such conversation")
    other = add_outbox_row(db, "conv-b", 1, "dead")
    add_outbox_row(db, "conv-a", 2, "pending")

    code, out, _ = ops("outbox", "list", "--status", "dead", "--conversation", "conv-a")

    assert code == 0
    header, *lines = out.splitlines()
    assert header.split()[:3] == ["EVENT_ID", "STATUS", "ATT"]
    assert len(lines) == 1 and lines[0].split()[:3] == [dead[:8], "dead", "3"]
    assert "HTTP 400: no such conv" in lines[0] and other[:8] not in out
    assert ops("outbox", "list", "--conversation", "nobody") == (0, "(no rows)\n", "")


def set_event_id(db: Any, event_id: str, new: str) -> str:
    db.execute("UPDATE outbox SET event_id = %s WHERE event_id = %s", [new, event_id])
    return new


def test_lists_fit_100_columns_with_short_ids_and_wide_prints_every_column_in_full(ops: Any, db: Any) -> None:
    error = "HTTP 503: upstream connect error or disconnect/reset before headers. reset reason: overflow"
    rows = [
        add_outbox_row(
            db,
            f"conversation-with-a-long-name-{n}",
            n,
            "dead",
            attempts=25,
            last_error=error,
            tool_call_id=f"demo-{uuid.uuid4()}",
        )
        for n in (1, 2)
    ]

    code, out, _ = ops("outbox", "list")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    lines = out.splitlines()[1:]
    assert sorted(line.split()[0] for line in lines) == sorted(row[:8] for row in rows)
    assert all(line.split()[1:3] == ["dead", "25"] and line.endswith("…") for line in lines)

    code, wide, _ = ops("outbox", "list", "--wide")
    assert code == 0
    assert all(row in wide for row in rows)
    assert wide.count(error) == 2 and "interact.ask" in wide
    assert max(len(line) for line in wide.splitlines()) > 100


async def test_operations_list_fits_100_columns_and_wide_shows_full_ids(ops: Any, client: Client) -> None:
    for n in range(3):
        conversation = f"a-conversation-whose-name-is-rather-long-{n}"
        call = f"demo-{uuid.uuid4()}"
        await client.post("/v1/tool-calls", json=start_body(conversation, tool_call_id=call), headers=AGENT)
        await client.post("/v1/tool-calls", json=interrupt_body(conversation), headers=AGENT)

    code, out, _ = ops("operations", "list")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 100
    ids = [op["operation_id"] for op in json.loads(ops("operations", "list", "--json")[1])["operations"]]
    shown = [line.split()[0] for line in out.splitlines()[1:]]
    # Time-ordered ids of the same minute share their first 8 hex digits: the list shows more.
    assert len(set(shown)) == len(ids) and all(
        op_id.startswith(cut) for op_id, cut in zip(ids, shown, strict=True)
    )
    assert [line.split()[1:3] for line in out.splitlines()[1:]] == [["interrupted", "agent_interrupt"]] * 3
    wide = ops("operations", "list", "--wide")[1]
    assert all(op_id in wide for op_id in ids)


def test_outbox_list_filters_by_tool_call_id_prefix_taken_literally(ops: Any, db: Any) -> None:
    demo = [add_outbox_row(db, "c", n, tool_call_id=f"demo-{n}-x") for n in (1, 2)]
    add_outbox_row(db, "c", 3, tool_call_id="other-demo-3")
    underscore = add_outbox_row(db, "c", 4, tool_call_id="a_b")
    add_outbox_row(db, "c", 5, tool_call_id="axb")

    listed = json.loads(ops("outbox", "list", "--tool-call", "demo-", "--json")[1])["outbox"]
    assert sorted(row["event_id"] for row in listed) == sorted(demo)
    listed = json.loads(ops("outbox", "list", "--tool-call", "a_", "--json")[1])["outbox"]
    assert [row["event_id"] for row in listed] == [underscore]  # not a LIKE pattern
    code, out, _ = ops("outbox", "list", "--tool-call", "demo-2")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == [demo[1][:8]]
    assert ops("outbox", "list", "--tool-call", "nobody") == (0, "(no rows)\n", "")


def test_show_and_requeue_take_a_unique_prefix_of_the_event_id(ops: Any, db: Any) -> None:
    one = set_event_id(db, add_outbox_row(db, "c", 1, "dead"), "abcd1234-0000-4000-8000-000000000001")
    set_event_id(db, add_outbox_row(db, "c", 2, "dead"), "abcd5678-0000-4000-8000-000000000002")

    code, out, _ = ops("outbox", "show", "abcd1234")
    assert code == 0 and f"event_id         {one}" in out
    code, out, err = ops("outbox", "show", "abcd")
    assert (code, out) == (1, "")
    assert err.startswith("error: event_id prefix abcd is ambiguous")
    assert ops("outbox", "show", "abc")[0] == 1  # too short to be taken as a prefix
    assert ops("outbox", "show", "ffff0000")[2] == "error: no outbox row with event_id ffff0000\n"

    code, out, _ = ops("outbox", "requeue", "ABCD1234-0")
    assert code == 0 and f"requeued {one}" in out
    assert outbox_row(db, one)["status"] == "pending"


def test_a_list_shows_ids_of_the_same_minute_apart_and_show_takes_what_it_shows(ops: Any, db: Any) -> None:
    # As time-ordered (v7) ids of one minute are: the same first 8 hex digits, then apart.
    ids = [
        set_event_id(db, add_outbox_row(db, "c", n, "dead"), f"01a2505c-7b3{n}-7000-8000-00000000000{n}")
        for n in (1, 2, 3)
    ]
    code, out, _ = ops("outbox", "list")
    assert code == 0
    shown = [line.split()[0] for line in out.splitlines()[1:]]
    assert sorted(shown) == ["01a2505c-7b31", "01a2505c-7b32", "01a2505c-7b33"]
    for cut in shown:
        code, out, err = ops("outbox", "show", cut)
        assert code == 0, err
        [event_id] = [i for i in ids if i.startswith(cut)]
        assert f"event_id         {event_id}" in out


def test_a_list_is_either_wide_or_json(ops: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        ops("outbox", "list", "--wide", "--json")
    assert exited.value.code == 2


def test_outbox_list_json_is_the_api_shape(ops: Any, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "pending")
    code, out, _ = ops("outbox", "list", "--json", "--limit", "5")
    assert code == 0
    [row] = json.loads(out)["outbox"]
    assert (row["event_id"], row["status"], row["sequence"], row["delivered_at"]) == (
        event_id,
        "pending",
        1,
        None,
    )
    assert row["created_at"].endswith("Z")


def test_outbox_list_rejects_an_unknown_status(ops: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        ops("outbox", "list", "--status", "lost")
    assert exited.value.code == 2


def test_outbox_show_prints_the_row_and_every_attempt(ops: Any, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 7, "dead", attempts=2, last_error="HTTP 410")
    add_attempt(db, event_id, 1, "retry", status_code=None, error_class="ConnectError", minutes_ago=1)
    add_attempt(db, event_id, 2, "dead", status_code=410)

    code, out, _ = ops("outbox", "show", event_id)

    assert code == 0
    assert f"event_id         {event_id}" in out and "conv-1 (sequence 7)" in out
    assert "delivery attempts (2):" in out
    attempt_lines = [line.split() for line in out.splitlines() if line.strip()[:2] in ("1 ", "2 ")]
    assert [(cols[0], cols[-3]) for cols in attempt_lines] == [("1", "retry"), ("2", "dead")]
    assert "ConnectError" in out and "410" in out

    code, out, _ = ops("outbox", "show", event_id, "--json")
    assert [a["attempt"] for a in json.loads(out)["delivery_attempts"]] == [1, 2]
    assert ops("outbox", "show", str(uuid.uuid4()))[0] == 1


async def test_operations_list_and_stats(ops: Any, client: Client) -> None:
    await client.post("/v1/tool-calls", json=start_body("conv-1"), headers=AGENT)
    await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)
    await client.post("/v1/tool-calls", json=start_body("conv-2"), headers=AGENT)

    code, out, _ = ops("operations", "list", "--state", "interrupted")
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["OPERATION", "STATE", "REASON"]
    assert [line.split()[1:3] for line in out.splitlines()[1:]] == [["interrupted", "agent_interrupt"]]
    code, out, _ = ops("operations", "list", "--json")
    assert [op["state"] for op in json.loads(out)["operations"]] == ["focusing", "interrupted"]

    code, out, _ = ops("stats")
    assert code == 0
    assert "outbox              pending 1  delivered 0  dead 0" in out
    assert "operations          focusing 1  completed 0  interrupted 1  cancelled 0" in out
    stats = json.loads(ops("stats", "--json")[1])
    assert stats["outbox"]["by_status"]["pending"] == 1 and stats["operations"]["focusing"] == 1


async def test_trace_answers_what_happened_to_tool_call_x_in_one_command(
    ops: Any, client: Client, db: Any
) -> None:
    start = start_body("conv-1", tool_call_id="call-x")
    await client.post("/v1/tool-calls", json=start, headers=AGENT)
    await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)
    event_id = str(
        db.execute("SELECT event_id FROM outbox WHERE tool_call_id = 'call-x'").fetchone()["event_id"]
    )
    add_attempt(db, event_id, 1, "retry", status_code=503, minutes_ago=1)
    add_attempt(db, event_id, 2, "dead", status_code=400)
    db.execute(
        "UPDATE outbox SET status = 'dead', attempts = 2, last_error = 'HTTP 400' WHERE event_id = %s",
        [event_id],
    )

    code, out, _ = ops("trace", "call-x")

    assert code == 0
    summary = out.split("\n\n")[0].splitlines()
    assert summary[0] == "tool call call-x"
    assert summary[1].strip() == "answer: 202 accepted"
    assert "interrupted (agent_interrupt) at" in summary[2]
    assert summary[3].strip() == f"result {event_id}: DEAD after 2 attempt(s); last error: HTTP 400"
    assert "recorded answer: 202" in out and '"status":"accepted"' in out
    assert "delivery attempts (2):" in out

    trace = json.loads(ops("trace", "call-x", "--json")[1])
    assert trace["tool_call"]["status_code"] == 202
    assert trace["operations"][0]["state"] == "interrupted"
    assert [a["outcome"] for a in trace["outbox"][0]["delivery_attempts"]] == ["retry", "dead"]


async def test_trace_takes_the_shortened_id_a_list_prints_when_it_names_one_call(
    ops: Any, client: Client
) -> None:
    long_id = "start-" + "0123456789abcdef" * 4
    for tool_call_id in (long_id, "start-other-call"):
        await client.post(
            "/v1/tool-calls",
            json=start_body(f"conv-{tool_call_id[-4:]}", tool_call_id=tool_call_id),
            headers=AGENT,
        )
    listed = ops("operations", "list")[1]
    (shortened,) = [
        word for line in listed.splitlines() for word in line.split() if word.startswith("start-0")
    ]
    assert shortened.endswith("…") and len(shortened) < len(long_id)

    code, out, err = ops("trace", shortened)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"tool call {long_id}"
    assert ops("trace", "start-0123", "--json")[1] == ops("trace", long_id, "--json")[1]

    code, out, err = ops("trace", "start-")
    assert (code, out) == (1, "")
    assert "ambiguous" in err


async def test_trace_of_an_id_used_in_two_conversations_asks_for_the_conversation(
    ops: Any, client: Client
) -> None:
    for conversation in ("conv-1", "conv-2"):
        await client.post(
            "/v1/tool-calls", json=start_body(conversation, tool_call_id="same-id"), headers=AGENT
        )

    code, out, err = ops("trace", "same-id")
    assert (code, out) == (1, "")
    assert "more than one conversation" in err and "--conversation" in err

    for conversation in ("conv-1", "conv-2"):
        code, out, err = ops("trace", "same-id", "--conversation", conversation, "--json")
        assert (code, err) == (0, "")
        assert json.loads(out)["tool_call"]["conversation_id"] == conversation
    # Its shortened form names one id, still made in both: the conversation decides.
    code, out, _ = ops("trace", "same-", "--conversation", "conv-2", "--json")
    assert code == 0 and json.loads(out)["tool_call"]["conversation_id"] == "conv-2"


def test_trace_of_an_unknown_call_exits_1(ops: Any) -> None:
    code, out, err = ops("trace", "never-seen")
    assert (code, out) == (1, "")
    assert "nothing is recorded for tool call 'never-seen'" in err


def test_outbox_list_pages_with_the_cursor_it_prints(ops: Any, db: Any) -> None:
    rows = [add_outbox_row(db, "conv-p", n, "pending", age_seconds=100 - n) for n in range(1, 6)]
    code, out, _ = ops("outbox", "list", "--limit", "2", "--wide")
    assert code == 0
    shown = [line.split()[0] for line in out.splitlines()[1:3]]
    assert shown == rows[::-1][:2]
    cursor = out.splitlines()[-1].removeprefix("more: --cursor ")
    code, out, _ = ops("outbox", "list", "--limit", "2", "--json", "--cursor", cursor)
    page = json.loads(out)
    assert [row["event_id"] for row in page["outbox"]] == rows[::-1][2:4]
    assert page["next_cursor"]
    with pytest.raises(SystemExit) as bad:
        ops("outbox", "list", "--cursor", "not-a-cursor")
    assert bad.value.code == 2
