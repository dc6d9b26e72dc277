"""``python -m service ops``: listing, showing, requeueing dead rows, stats and traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from service import dev_env
from service.cli.ops import main
from tests.conftest import AGENT, ROOT
from tests.integration.test_ops_api import add_attempt, add_outbox_row
from tests.support.calls import interrupt_body, start_body

Client = AsyncTestClient[Any]


@pytest.fixture
def ops(database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``ops ARGS…`` in-process against the test database; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", database_url)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def outbox_row(db: Any, event_id: str) -> Any:
    return db.execute("SELECT * FROM outbox WHERE event_id = %s", [event_id]).fetchone()


def test_requeue_puts_a_dead_row_back_with_the_same_event_id_and_zero_attempts(ops: Any, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=25, last_error="HTTP 503", age_seconds=600)
    add_attempt(db, event_id, 1, "dead", status_code=400)
    db.execute("LISTEN lineup_outbox")

    code, out, err = ops("outbox", "requeue", event_id)

    assert (code, err) == (0, "")
    assert f"requeued {event_id}" in out and "1 row(s) requeued" in out
    row = outbox_row(db, event_id)
    assert (row["status"], row["attempts"], row["lease_owner"], row["lease_expires_at"]) == (
        "pending",
        0,
        None,
        None,
    )
    assert db.execute("SELECT %s::timestamptz <= now() AS due", [row["next_attempt_at"]]).fetchone()["due"]
    assert row["last_error"] == "HTTP 503"  # kept until the next attempt replaces it
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1
    assert db.execute("SELECT count(*) AS n FROM outbox_attempts").fetchone()["n"] == 1  # history kept
    assert [n.channel for n in db.notifies(timeout=2, stop_after=1)] == ["lineup_outbox"]


@pytest.mark.parametrize("status", ["pending", "delivered"])
def test_requeue_of_a_row_that_is_not_dead_exits_1_and_changes_nothing(
    ops: Any, db: Any, status: str
) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, status, attempts=3, lease_owner="relay-a")
    before = outbox_row(db, event_id)

    code, out, err = ops("outbox", "requeue", event_id)

    assert (code, out) == (1, "")
    assert (
        err.strip() == f"error: outbox row {event_id} is {status}, not dead: only dead rows can be requeued"
    )
    assert outbox_row(db, event_id) == before


@pytest.mark.parametrize("event_id", [str(uuid.uuid4()), "not-a-uuid"])
def test_requeue_of_an_unknown_event_exits_1(ops: Any, event_id: str) -> None:
    code, out, err = ops("outbox", "requeue", event_id)
    assert (code, out) == (1, "")
    assert err.strip() == f"error: no outbox row with event_id {event_id}"


def test_requeue_all_dead_requeues_every_dead_row_and_nothing_else(ops: Any, db: Any) -> None:
    dead_a = add_outbox_row(db, "conv-a", 1, "dead", attempts=25, age_seconds=30)
    dead_b = add_outbox_row(db, "conv-b", 4, "dead", attempts=1, age_seconds=20)
    pending = add_outbox_row(db, "conv-a", 2, "pending", attempts=2)
    delivered = add_outbox_row(db, "conv-c", 1, "delivered", attempts=1)

    code, out, _ = ops("outbox", "requeue", "--all-dead", "--json")

    assert code == 0
    requeued = json.loads(out)["requeued"]
    assert [row["event_id"] for row in requeued] == [dead_a, dead_b]
    assert all(row["status"] == "pending" and row["attempts"] == 0 for row in requeued)
    assert outbox_row(db, pending)["attempts"] == 2
    assert outbox_row(db, delivered)["status"] == "delivered"
    assert ops("outbox", "requeue", "--all-dead") == (0, "no dead rows: nothing requeued\n", "")


def test_requeue_needs_an_event_id_or_all_dead_but_not_both(ops: Any) -> None:
    with pytest.raises(SystemExit) as neither:
        ops("outbox", "requeue")
    with pytest.raises(SystemExit) as both:
        ops("outbox", "requeue", str(uuid.uuid4()), "--all-dead")
    assert neither.value.code == both.value.code == 2


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
    assert [line.split()[:3] for line in out.splitlines()[1:]] == [
        [op_id[:8], "interrupted", "agent_interrupt"] for op_id in ids
    ]
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


def test_trace_of_an_unknown_call_exits_1(ops: Any) -> None:
    code, out, err = ops("trace", "never-seen")
    assert (code, out) == (1, "")
    assert "nothing is recorded for tool call 'never-seen'" in err


def _service(args: list[str], cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        env={**base, "PYTHONPATH": str(ROOT), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_python_m_service_ops_requeues_all_dead_rows(database_url: str, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=25)
    done = _service(["ops", "outbox", "requeue", "--all-dead"], DATABASE_URL=database_url)
    assert done.returncode == 0, done.stderr
    assert f"requeued {event_id}" in done.stdout
    assert (outbox_row(db, event_id)["status"], outbox_row(db, event_id)["attempts"]) == ("pending", 0)


def test_python_m_service_ops_without_database_url_exits_2_naming_it(tmp_path: Path) -> None:
    done = _service(["ops", "stats"], cwd=tmp_path)  # no dev stack's .dev/env there either
    assert done.returncode == 2
    assert "DATABASE_URL" in done.stderr


def test_python_m_service_ops_without_database_url_uses_the_dev_stacks_settings(
    database_url: str, db: Any, tmp_path: Path
) -> None:
    event_id = add_outbox_row(db, "conv-dev", 1, "dead", attempts=25)
    (tmp_path / ".dev").mkdir()
    dev_env.write(tmp_path / ".dev", {"DATABASE_URL": database_url})
    done = _service(["ops", "outbox", "list", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [row["event_id"] for row in json.loads(done.stdout)["outbox"]] == [event_id]
    assert "using the dev stack's settings from .dev/env" in done.stderr


def test_delivery_pause_status_and_resume(ops: Any, db: Any) -> None:
    code, out, _ = ops("delivery", "status")
    assert code == 0 and "delivery      running" in out and "circuit       closed" in out
    assert "not reported yet" in out

    code, out, _ = ops("delivery", "pause", "--reason", "Agent deploy")
    assert code == 0 and out.startswith("delivery paused since ")
    row = db.execute("SELECT paused_by, pause_reason FROM delivery_endpoints").fetchone()
    assert row["paused_by"].startswith("cli:") and row["pause_reason"] == "Agent deploy"
    code, out, _ = ops("delivery", "status", "--json")
    assert json.loads(out)["delivery"]["paused"] is True
    assert "delivery            paused, circuit closed" in ops("stats")[1]
    assert set(json.loads(out)["retention"]) >= {"delivered_days", "oldest_dead_at"}

    db.execute("LISTEN lineup_outbox")
    code, out, _ = ops("delivery", "resume")
    assert (code, out) == (0, "delivery running (circuit closed)\n")
    assert [note.channel for note in db.notifies(timeout=0.5, stop_after=1)] == ["lineup_outbox"]


def test_outbox_recover_with_a_dry_run_then_for_real(ops: Any, db: Any) -> None:
    busy = add_outbox_row(db, "conv-a", 1, "dead", attempts=60, last_error="HTTP 503: busy")
    rejected = add_outbox_row(db, "conv-a", 2, "dead", attempts=1, last_error="HTTP 400")

    assert ops("outbox", "recover", "--last-error", "HTTP 503", "--dry-run") == (
        0,
        "1 dead row(s) match: nothing requeued (dry run)\n",
        "",
    )
    assert outbox_row(db, busy)["status"] == "dead"
    code, out, _ = ops("outbox", "recover", "--last-error", "HTTP 503", "--json")
    assert (code, json.loads(out)) == (0, {"matched": 1, "requeued": 1})
    assert outbox_row(db, busy)["status"] == "pending" and outbox_row(db, rejected)["status"] == "dead"
    assert ops("outbox", "recover", "--conversation", "conv-a", "--since", "2020-01-01T00:00:00Z")[1] == (
        "1 of 1 matching dead row(s) requeued\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--since", "yesterday"],
        ["--since", "2026-12-01T10:00:00"],
        ["--since", "2026-12-02T00:00:00Z", "--until", "2026-12-01T00:00:00Z"],
    ],
)
def test_outbox_recover_refuses_times_it_cannot_read_with_exit_2(ops: Any, args: list[str]) -> None:
    try:
        code = ops("outbox", "recover", *args)[0]
    except SystemExit as exc:
        code = exc.code
    assert code == 2


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
