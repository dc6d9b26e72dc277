"""The ops API through HTTP: operator auth, the outbox, one row with its attempts, stats, traces."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import expire, interrupt_body, start_body
from tests.conftest import AGENT, HOST, OPERATOR, UNKNOWN_UUID

Client = AsyncTestClient[Any]
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def add_outbox_row(
    db: Any,
    conversation_id: str = "conv-1",
    sequence: int = 1,
    status: str = "pending",
    *,
    attempts: int = 0,
    last_error: str | None = None,
    age_seconds: float = 0,
    tool_call_id: str | None = None,
    lease_owner: str | None = None,
) -> str:
    """An outbox row written directly (no operation); returns its event_id."""
    event_id = str(uuid.uuid4())
    db.execute(
        """
        INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, status, attempts,
                            last_error, created_at, next_attempt_at, delivered_at, lease_owner,
                            lease_expires_at, payload)
        VALUES (%(event_id)s, 'interact.ask', %(tool_call_id)s, %(cid)s, %(seq)s, %(status)s, %(attempts)s,
                %(last_error)s, now() - make_interval(secs => %(age)s), now() - make_interval(secs => %(age)s),
                CASE WHEN %(status)s = 'delivered' THEN now() END, %(lease_owner)s,
                CASE WHEN %(lease_owner)s::text IS NOT NULL THEN now() + interval '30 seconds' END,
                jsonb_build_object('event_id', %(event_text)s::text, 'result', jsonb_build_object('answer', 'yes')))
        """,
        {
            "event_id": uuid.UUID(event_id),
            "event_text": event_id,
            "tool_call_id": tool_call_id or f"call-{event_id}",
            "cid": conversation_id,
            "seq": sequence,
            "status": status,
            "attempts": attempts,
            "last_error": last_error,
            "age": age_seconds,
            "lease_owner": lease_owner,
        },
    )
    if status == "delivered":
        # As a relay records a delivery: the tally the delivered counts are read from.
        db.execute(
            "INSERT INTO outbox_tallies (shard, delivered) VALUES (0, 1)"
            " ON CONFLICT (shard) DO UPDATE SET delivered = outbox_tallies.delivered + 1"
        )
    return event_id


def add_attempt(
    db: Any,
    event_id: str,
    attempt: int,
    outcome: str,
    *,
    status_code: int | None = 500,
    error_class: str | None = None,
    minutes_ago: float = 0,
) -> None:
    db.execute(
        """
        INSERT INTO outbox_attempts (event_id, conversation_id, attempt, relay_id, started_at, duration_ms,
                                     status_code, error_class, response_excerpt, outcome)
        SELECT %s, o.conversation_id, %s, 'relay-test', now() - make_interval(mins => %s), 12, %s, %s,
               'body', %s
        FROM outbox o WHERE o.event_id = %s
        """,
        [event_id, attempt, minutes_ago, status_code, error_class, outcome, event_id],
    )


async def call(client: Client, body: dict[str, Any], expected: int) -> dict[str, Any]:
    response = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert response.status_code == expected, response.text
    return dict(response.json())


async def get(client: Client, path: str, expected: int = 200, **params: Any) -> Any:
    response = await client.get(path, headers=OPERATOR, params=params)
    assert response.status_code == expected, response.text
    return response.json()


OPS_PATHS = [
    "/v1/ops/outbox",
    f"/v1/ops/outbox/{UNKNOWN_UUID}",
    "/v1/ops/operations",
    "/v1/ops/stats",
    "/v1/ops/tool-calls",
    "/v1/ops/tool-calls/some-call",
    "/v1/ops/delivery",
    "/v1/ops/retention",
]


@pytest.mark.parametrize("path", OPS_PATHS)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer not-the-operator-token"}, AGENT, HOST, {"Authorization": "Basic abc"}],
    ids=["no-token", "wrong-token", "agent-token", "host-token", "not-bearer"],
)
async def test_ops_api_refuses_anything_but_the_operator_token(
    client: Client, path: str, headers: dict[str, str]
) -> None:
    response = await client.get(path, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


async def test_outbox_lists_newest_first_with_every_column(client: Client, db: Any) -> None:
    old = add_outbox_row(db, "conv-1", 1, "delivered", attempts=1, age_seconds=60)
    new = add_outbox_row(db, "conv-1", 2, "pending", attempts=2, last_error="HTTP 503", lease_owner="relay-x")
    rows = (await get(client, "/v1/ops/outbox"))["outbox"]
    assert [row["event_id"] for row in rows] == [new, old]
    first = rows[0]
    assert set(first) == {
        "event_id", "operation_id", "tool", "tool_call_id", "conversation_id", "sequence", "status",
        "attempts", "next_attempt_at", "last_error", "created_at", "delivered_at", "lease_owner",
        "lease_expires_at",
    }  # fmt: skip
    assert (first["status"], first["attempts"], first["last_error"]) == ("pending", 2, "HTTP 503")
    assert first["lease_owner"] == "relay-x" and RFC3339.match(first["lease_expires_at"])
    assert RFC3339.match(first["created_at"]) and RFC3339.match(first["next_attempt_at"])
    assert first["delivered_at"] is None and RFC3339.match(rows[1]["delivered_at"])


async def test_outbox_filters_by_status_conversation_and_limit(client: Client, db: Any) -> None:
    dead_a = add_outbox_row(db, "conv-a", 1, "dead", age_seconds=3)
    add_outbox_row(db, "conv-a", 2, "pending", age_seconds=2)
    dead_b = add_outbox_row(db, "conv-b", 1, "dead", age_seconds=1)
    dead = await get(client, "/v1/ops/outbox", status="dead")
    assert [row["event_id"] for row in dead["outbox"]] == [dead_b, dead_a]
    in_a = await get(client, "/v1/ops/outbox", conversation_id="conv-a")
    assert {row["conversation_id"] for row in in_a["outbox"]} == {"conv-a"} and len(in_a["outbox"]) == 2
    both = await get(client, "/v1/ops/outbox", status="dead", conversation_id="conv-a")
    assert [row["event_id"] for row in both["outbox"]] == [dead_a]
    assert len((await get(client, "/v1/ops/outbox", limit=1))["outbox"]) == 1
    assert (await get(client, "/v1/ops/outbox", conversation_id="conv-none"))["outbox"] == []


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"status": "lost"}, "status"),
        ({"status": ""}, "status"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"conversation_id": "x" * 256}, "conversation_id"),
    ],
)
async def test_outbox_query_out_of_range_is_422_with_details(
    client: Client, params: dict[str, str], path: str
) -> None:
    body = await get(client, "/v1/ops/outbox", 422, **params)
    assert body["error"] == "invalid_request"
    assert body["message"]
    assert [detail["path"] for detail in body["details"]] == [path]


async def test_outbox_row_shows_payload_and_every_attempt_in_order(client: Client, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=3, last_error="HTTP 400")
    add_attempt(db, event_id, 2, "retry", status_code=None, error_class="ReadTimeout", minutes_ago=1)
    add_attempt(db, event_id, 1, "retry", status_code=503, minutes_ago=2)
    add_attempt(db, event_id, 3, "dead", status_code=400)
    row = await get(client, f"/v1/ops/outbox/{event_id}")
    assert row["event_id"] == event_id and row["status"] == "dead" and row["attempts"] == 3
    assert row["payload"] == {"event_id": event_id, "result": {"answer": "yes"}}
    attempts = row["delivery_attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert [a["outcome"] for a in attempts] == ["retry", "retry", "dead"]
    assert (attempts[1]["status_code"], attempts[1]["error_class"]) == (None, "ReadTimeout")
    assert attempts[0]["relay_id"] == "relay-test" and attempts[0]["duration_ms"] == 12
    assert RFC3339.match(attempts[0]["started_at"])


@pytest.mark.parametrize("event_id", [UNKNOWN_UUID, "not-a-uuid"])
async def test_unknown_outbox_row_is_404_unknown_event(client: Client, event_id: str) -> None:
    body = await get(client, f"/v1/ops/outbox/{event_id}", 404)
    assert body["error"] == "unknown_event" and body["message"]


async def test_operations_list_filters_by_state(client: Client) -> None:
    started = await call(client, start_body("conv-1"), 202)
    await call(client, interrupt_body("conv-1"), 200)
    focusing = await call(client, start_body("conv-2"), 202)
    interrupted = await get(client, "/v1/ops/operations", state="interrupted")
    assert [op["operation_id"] for op in interrupted["operations"]] == [started["operation"]["operation_id"]]
    assert interrupted["operations"][0]["reason"] == "agent_interrupt"
    every = await get(client, "/v1/ops/operations")
    assert [op["operation_id"] for op in every["operations"]] == [
        focusing["operation"]["operation_id"],
        started["operation"]["operation_id"],
    ]
    assert (await get(client, "/v1/ops/operations", state="bogus", expected=422))["details"][0][
        "path"
    ] == "state"


async def test_stats_count_the_outbox_operations_lateness_and_recent_attempts(
    client: Client, db: Any
) -> None:
    empty = await get(client, "/v1/ops/stats")
    assert empty["outbox"]["by_status"] == {"pending": 0, "delivered": 0, "dead": 0}
    assert empty["outbox"]["oldest_pending_age_seconds"] is None
    assert empty["deadline_lateness_ms"] == {"completed": 0, "p50": None, "p99": None, "max": None}

    add_outbox_row(db, "conv-x", 1, "pending", age_seconds=120)
    add_outbox_row(db, "conv-x", 2, "pending", age_seconds=5)
    delivered = add_outbox_row(db, "conv-y", 1, "delivered", attempts=1)
    dead = add_outbox_row(db, "conv-z", 1, "dead", attempts=2)
    add_attempt(db, delivered, 1, "delivered", status_code=200)
    add_attempt(db, dead, 1, "retry", minutes_ago=10)
    add_attempt(db, dead, 2, "dead", status_code=400, minutes_ago=5)
    add_attempt(db, dead, 3, "lease_lost", minutes_ago=90)  # older than an hour: not counted
    # Two completed operations (decided 0.5 s and 2 s after their deadline), one focusing.
    for cid, late in (("conv-1", 0.5), ("conv-2", 2.0)):
        answer = await call(client, start_body(cid), 202)
        expire(db, answer["operation"]["operation_id"], seconds_ago=late)
        await client.get(f"/v1/operations/{answer['operation']['operation_id']}", headers=AGENT)
    await call(client, start_body("conv-3"), 202)

    stats = await get(client, "/v1/ops/stats")
    outbox = stats["outbox"]
    # Pending: the two rows written here and the results of the two completed operations.
    assert outbox["by_status"] == {"pending": 4, "delivered": 1, "dead": 1}
    assert outbox["dead"] == 1 and outbox["due_now"] == 4
    assert 120 <= outbox["oldest_pending_age_seconds"] < 180
    assert stats["operations"]["by_state"] == {
        "focusing": 1,
        "completed": 2,
        "interrupted": 0,
        "cancelled": 0,
        "failed": 0,
    }
    assert stats["operations"]["focusing"] == 1
    lateness = stats["deadline_lateness_ms"]
    assert lateness["completed"] == 2
    assert 500 <= lateness["p50"] < 2000 <= lateness["p99"] == lateness["max"] < 10_000
    assert stats["attempts_last_hour"] == {
        "by_outcome": {"delivered": 1, "retry": 1, "dead": 1, "lease_lost": 0},
        "total": 3,
    }
    assert RFC3339.match(stats["server_time"])


async def test_trace_answers_what_happened_to_a_started_then_interrupted_call(
    client: Client, db: Any
) -> None:
    start = start_body("conv-1", tool_call_id="start-traced")
    started = await call(client, start, 202)
    stop = interrupt_body("conv-1")
    await call(client, stop, 200)
    event = db.execute("SELECT event_id FROM outbox WHERE tool_call_id = 'start-traced'").fetchone()
    event_id = str(event["event_id"])
    add_attempt(db, event_id, 1, "retry", status_code=503, minutes_ago=1)
    add_attempt(db, event_id, 2, "delivered", status_code=200)
    db.execute(
        "UPDATE outbox SET status = 'delivered', attempts = 2, delivered_at = now() WHERE event_id = %s",
        [event_id],
    )

    trace = await get(client, "/v1/ops/tool-calls/start-traced")
    assert trace["tool_call_id"] == "start-traced"
    assert trace["tool_call"]["status_code"] == 202
    assert trace["tool_call"]["response"] == started
    assert trace["tool_call"]["tool"] == "pomodoro.start"
    [operation] = trace["operations"]
    assert operation["operation_id"] == started["operation"]["operation_id"]
    assert (operation["state"], operation["reason"]) == ("interrupted", "agent_interrupt")
    assert RFC3339.match(operation["finalized_at"]) and operation["result"]["state"] == "interrupted"
    [row] = trace["outbox"]
    assert (row["event_id"], row["status"], row["attempts"]) == (event_id, "delivered", 2)
    assert [(a["attempt"], a["outcome"]) for a in row["delivery_attempts"]] == [
        (1, "retry"),
        (2, "delivered"),
    ]

    # The interrupt's own trace: its answer, and the operation it ended with that operation's delivery.
    interrupt_trace = await get(client, f"/v1/ops/tool-calls/{stop['tool_call_id']}")
    assert interrupt_trace["tool_call"]["response"]["status"] == "interrupted"
    assert [op["operation_id"] for op in interrupt_trace["operations"]] == [operation["operation_id"]]
    assert [row["event_id"] for row in interrupt_trace["outbox"]] == [event_id]


async def test_trace_of_an_id_used_in_two_conversations_is_409_unless_one_is_named(client: Client) -> None:
    # A tool_call_id is unique per conversation: two Agents' conversations may both have "start-1".
    first = await call(client, start_body("conv-1", tool_call_id="start-1"), 202)
    second = await call(client, start_body("conv-2", tool_call_id="start-1"), 202)

    refused = await get(client, "/v1/ops/tool-calls/start-1", 409)
    assert refused["error"] == "ambiguous_tool_call_id"
    assert refused["conversation_ids"] == ["conv-1", "conv-2"]  # the console links each
    for conversation, started in (("conv-1", first), ("conv-2", second)):
        trace = await get(client, "/v1/ops/tool-calls/start-1", conversation_id=conversation)
        assert trace["tool_call"]["conversation_id"] == conversation
        assert trace["tool_call"]["response"] == started
        assert [op["operation_id"] for op in trace["operations"]] == [started["operation"]["operation_id"]]
    await get(client, "/v1/ops/tool-calls/start-1", 404, conversation_id="conv-3")


async def test_trace_of_a_focusing_call_has_no_outbox_row_yet(client: Client) -> None:
    await call(client, start_body("conv-1", tool_call_id="conv-1:calls:7"), 202)
    trace = await get(client, "/v1/ops/tool-calls/conv-1:calls:7")
    assert trace["tool_call_id"] == "conv-1:calls:7"
    assert trace["operations"][0]["state"] == "focusing" and trace["operations"][0]["finalized_at"] is None
    assert trace["outbox"] == []


async def test_trace_of_a_conflicting_call_shows_the_operation_its_answer_names(client: Client) -> None:
    first = await call(client, start_body("conv-1"), 202)
    await call(client, start_body("conv-1", tool_call_id="second-start"), 409)
    trace = await get(client, "/v1/ops/tool-calls/second-start")
    assert trace["tool_call"]["status_code"] == 409
    assert trace["tool_call"]["response"]["error"] == "operation_already_focusing"
    assert [op["operation_id"] for op in trace["operations"]] == [first["operation"]["operation_id"]]


@pytest.mark.parametrize("tool_call_id", ["never-seen", "x" * 300])
async def test_trace_of_an_unknown_call_is_404_unknown_tool_call(client: Client, tool_call_id: str) -> None:
    body = await get(client, f"/v1/ops/tool-calls/{tool_call_id}", 404)
    assert body["error"] == "unknown_tool_call"


async def test_trace_of_an_unrecorded_422_is_404(client: Client) -> None:
    body = start_body("conv-1", tool_call_id="bad-args")
    body["arguments"] = {"duration_seconds": 0}
    await call(client, body, 422)
    assert (await get(client, "/v1/ops/tool-calls/bad-args", 404))["error"] == "unknown_tool_call"


async def test_tool_calls_lists_every_recorded_answer_newest_first_interrupts_included(
    client: Client, db: Any
) -> None:
    await call(client, start_body("conv-1", tool_call_id="start-1"), 202)
    await call(client, interrupt_body("conv-1"), 200)
    await call(client, interrupt_body("conv-2"), 200)
    await call(client, start_body("conv-1", tool_call_id="start-2"), 202)
    await call(client, start_body("conv-1", tool_call_id="start-3"), 409)
    db.execute("UPDATE tool_calls SET created_at = now() - interval '2 hours' WHERE tool_call_id = 'start-1'")

    listed = await get(client, "/v1/ops/tool-calls")
    assert listed["minutes"] == 60
    calls = listed["tool_calls"]
    assert [c["tool"] for c in calls] == [
        "pomodoro.start",
        "pomodoro.start",
        "pomodoro.interrupt",
        "pomodoro.interrupt",
    ]
    assert [c["outcome"] for c in calls][:2] == ["operation_already_focusing", "accepted"]
    assert {c["outcome"] for c in calls[2:]} == {"interrupted", "no_active_focusing_operation"}
    assert calls[0]["status_code"] == 409

    interrupts = await get(client, "/v1/ops/tool-calls", tool="pomodoro.interrupt", conversation_id="conv-2")
    assert [c["outcome"] for c in interrupts["tool_calls"]] == ["no_active_focusing_operation"]
    older = await get(client, "/v1/ops/tool-calls", minutes=180, limit=10)
    assert "start-1" in [c["tool_call_id"] for c in older["tool_calls"]]


@pytest.mark.parametrize(
    "params", [{"minutes": "0"}, {"minutes": "1441"}, {"minutes": "-1"}, {"tool": "pomodoro.explode"}]
)
async def test_tool_calls_refuses_a_bad_window_or_tool_with_422(
    client: Client, params: dict[str, str]
) -> None:
    body = await get(client, "/v1/ops/tool-calls", 422, **params)
    assert body["error"] == "invalid_request"
    assert body["details"][0]["path"] in params
