"""Release N+1's schema serves release N: what the previous release (0.4.0, ``releases.toml``)
reads still answers as it did, what only the releases before it needed is gone, and a service
reports ready only against a database that serves its own interface."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from service.db import code
from service.http import status_of_kind
from service.manifests import Registry

# What 0.4.0's operators' reads select of a recorded call (service/db/ops_queries.py at its commit).
PREVIOUS_READ = "SELECT t.tool_call_id, t.status_code, t.outcome FROM tool_calls t WHERE t.tool_call_id = %s"


def test_the_status_the_previous_release_reads_is_the_one_the_api_gives_each_outcome(
    db: Any, registry: Registry
) -> None:
    known = db.execute("SELECT pg_get_functiondef('status_code(tool_calls)'::regprocedure) AS d").fetchone()[
        "d"
    ]
    words = [w for w in registry.kinds if f'"{w}"' in known]
    assert {"accepted", "interrupted", "tool_call_expired", "too_many_requests"} <= set(words)
    for n, outcome in enumerate(words):
        db.execute(
            "INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, outcome, response)"
            " VALUES (%s, 'conv-prev', 'pomodoro.start', 'fp', %s, '{}')",
            (f"prev-{n}", outcome),
        )
        found = db.execute(PREVIOUS_READ, (f"prev-{n}",)).fetchone()
        assert (outcome, found["status_code"]) == (outcome, status_of_kind(registry.kind_of(outcome)))


def test_an_answer_this_release_records_is_read_by_the_previous_one_with_its_status(db: Any) -> None:
    db.execute(
        "SELECT * FROM call_tool_v3('new-2', 'conv-new', 'pomodoro.interrupt', 'fp', '{}', "
        "'pomodoro_interrupt', '{\"late_window_seconds\": 300}')"
    )
    found = db.execute(PREVIOUS_READ, ("new-2",)).fetchone()
    assert (found["outcome"], found["status_code"]) == ("no_active_focusing_operation", 200)


def test_what_only_the_releases_before_the_previous_one_needed_is_gone(db: Any) -> None:
    columns = db.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'tool_calls'"
    ).fetchall()
    assert "status_code" not in {c["column_name"] for c in columns}
    gone = (
        "call_tool",
        "call_tool_v2",
        "interface_1_statuses",
        "compat_status_code",
        "settle_focusing",
        "close_instances",
        "answer_interaction",
        "compat_outcome_of_answer",
        "compat_conversation_of_instance",
        "compat_conversation_of_event",
        "compat_conversation_of_interaction",
    )
    left = db.execute("SELECT proname FROM pg_proc WHERE proname = ANY(%s)", (list(gone),)).fetchall()
    assert left == []
    triggers = db.execute("SELECT tgname FROM pg_trigger WHERE tgname LIKE 'compat%%'").fetchall()
    assert triggers == []
    assert db.execute("SELECT database_interfaces() AS i").fetchone()["i"] == [code.INTERFACE]


async def test_ready_at_head(client: AsyncTestClient[Any]) -> None:
    answer = await client.get("/readyz")
    assert answer.status_code == 200


async def test_not_ready_before_migrate(client: AsyncTestClient[Any], db: Any) -> None:
    db.execute("UPDATE alembic_version SET version_num = '0006'")
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert "run migrate" in answer.json()["reason"]


async def test_ready_at_a_later_release_that_still_serves_this_one(
    client: AsyncTestClient[Any], db: Any
) -> None:
    db.execute("UPDATE alembic_version SET version_num = 'a_later_release'")
    assert (await client.get("/readyz")).status_code == 200
    db.execute(
        "CREATE OR REPLACE FUNCTION database_interfaces() RETURNS integer[] LANGUAGE sql "
        f"RETURN ARRAY[{code.INTERFACE + 1}]"
    )
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert f"no longer serves interface {code.INTERFACE}" in answer.json()["reason"]
