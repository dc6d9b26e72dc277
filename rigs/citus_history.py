"""The Citus rig's last phase, once the load has settled and been checked, with the service and the
relays still running: the operator's reads on the coordinator, then aged history removed.

* **ops reads**: ``python -m service ops`` against the coordinator, as an operator runs it —
  ``trace`` of a REST start the load made (its recorded answer, its final operation, its delivered
  outbox row and the attempt that delivered it), ``outbox list`` and ``operations list`` of that
  conversation, ``stats`` (nothing pending, nothing focusing);
* **aged history**: every delivered outbox row made 8 days old on its shard, then a round of the
  relay's retention on each worker (``relay.retention.prune_and_report``, per node: what each
  relay's loop runs every ``PRUNE_EVERY`` s) removes them all; then a round of the service's history
  retention (``prune_history_by_conversation``, what ``serve`` runs on Citus) as if
  ``HISTORY_RETENTION_DAYS`` + 1 days had passed: no finished operation is left, every recorded
  answer is expired, and a replay of a call recorded before the round answers ``410
  tool_call_expired`` through a replica without running the tool again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from harness.calls import interrupt_body
from harness.citus import Cluster
from harness.processes import ROOT, ServiceProcess, environment
from relay.retention import Retention, prune_and_report
from rigs.checks import Checks
from rigs.load import Caller, Figures
from service.db.pool import open_pool
from service.use_cases.history_retention import prune_history_by_conversation

RELAY_DAYS = 7
HISTORY_DAYS = 90
AGE_DELIVERED = (
    "SELECT sum(result::bigint) FROM run_command_on_shards('outbox', $$"
    " WITH aged AS (UPDATE %s SET created_at = created_at - interval '8 days',"
    " delivered_at = delivered_at - interval '8 days' WHERE status = 'delivered' RETURNING 1)"
    " SELECT count(*) FROM aged$$)"
)


def ops(url: str, log_dir: Path, *args: str) -> tuple[int, Any]:
    """``python -m service ops ARGS --json`` with ``DATABASE_URL`` the coordinator: its exit code and
    what it printed (as JSON when it exited 0)."""
    with (log_dir / "ops.log").open("ab") as errors:
        done = subprocess.run(
            [sys.executable, "-m", "service", "ops", *args, "--json"],
            cwd=ROOT,
            env=environment({"DATABASE_URL": url}),
            stdout=subprocess.PIPE,
            stderr=errors,
            check=False,
            timeout=60,
        )
    return done.returncode, json.loads(done.stdout) if done.returncode == 0 else None


def _scalar(url: str, statement: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(statement).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def a_rest_start(figures: Figures) -> str | None:
    """The tool_call_id of a Pomodoro start the REST load had accepted."""
    for tool_call_id, (status, body) in figures.acknowledged.items():
        if status == 202 and isinstance(json.loads(body).get("operation"), dict):
            return tool_call_id
    return None


def ops_reads(url: str, figures: Figures, log_dir: Path, checks: Checks) -> str:
    """The operator's reads on the coordinator, checked; a line of what they showed."""
    tool_call_id = a_rest_start(figures)
    if tool_call_id is None:
        checks.add("ops reads on the coordinator", False, "no REST start was accepted to trace")
        return "none"
    code, trace = ops(url, log_dir, "trace", tool_call_id)
    operations = (trace or {}).get("operations", [])
    outbox = (trace or {}).get("outbox", [])
    conversation = str(operations[0]["conversation_id"]) if operations else ""
    traced = (
        code == 0
        and trace["tool_call"] is not None
        and trace["tool_call"]["status_code"] == 202
        and len(operations) == 1
        and operations[0]["state"] != "focusing"
        and len(outbox) == 1
        and outbox[0]["status"] == "delivered"
        and any(a["outcome"] == "delivered" for a in outbox[0]["delivery_attempts"])
    )
    checks.add(
        "ops trace on the coordinator: the answer, the final operation, the delivered row and its attempt",
        traced,
        f"exit {code}, {len(operations)} operation(s), outbox {[r.get('status') for r in outbox]}",
    )
    o_code, listed = ops(url, log_dir, "outbox", "list", "--conversation", conversation)
    rows = (listed or {}).get("outbox", [])
    p_code, found = ops(url, log_dir, "operations", "list", "--conversation", conversation)
    ops_rows = (found or {}).get("operations", [])
    checks.add(
        "ops outbox list / operations list of one conversation on the coordinator",
        o_code == 0
        and p_code == 0
        and len(rows) >= 1
        and all(r["conversation_id"] == conversation and r["status"] == "delivered" for r in rows)
        and len(ops_rows) >= 1
        and all(r["conversation_id"] == conversation for r in ops_rows),
        f"exit {o_code}/{p_code}: {len(rows)} outbox rows, {len(ops_rows)} operations",
    )
    s_code, stats = ops(url, log_dir, "stats")
    box = (stats or {}).get("outbox", {}).get("by_status", {})
    focusing = (stats or {}).get("operations", {}).get("focusing")
    checks.add(
        "ops stats on the coordinator: nothing pending, nothing focusing",
        s_code == 0 and box.get("pending") == 0 and box.get("delivered", 0) > 0 and focusing == 0,
        f"exit {s_code}, outbox {box}, focusing {focusing}",
    )
    return f"trace {tool_call_id} ({len(outbox)} outbox row), {len(rows)} outbox rows listed, stats {box}"


async def aged_retention(cluster: Cluster, service: ServiceProcess, checks: Checks) -> str:
    """Aged rows removed by the relays' and the service's retention rounds, checked; a line of
    what they removed."""
    url = cluster.url()
    # A call recorded before the rounds, replayed after them.
    caller = Caller(service.base_url, service.agent_token, Figures())
    body = interrupt_body(f"retention-{datetime.now(UTC):%H%M%S%f}", tool_call_id="retention-replay")
    try:
        first = await caller("POST", "/v1/tool-calls", body)

        aged = _scalar(url, AGE_DELIVERED)
        pruned = {"delivered": 0, "dead": 0}
        for worker in cluster.workers:
            async with await psycopg.AsyncConnection.connect(cluster.url(worker), autocommit=True) as conn:
                done = await prune_and_report(
                    conn, Retention(RELAY_DAYS, 30, f"citus-rig-worker-{worker.port}"), on_node=True
                )
            for status, rows in done.items():
                pruned[status] += rows
        left = _scalar(url, "SELECT count(*) FROM outbox WHERE status = 'delivered'")
        checks.add(
            "the relays' retention on each worker removed every aged delivered row",
            aged > 0 and pruned["delivered"] == aged and left == 0,
            f"{aged} aged, {pruned['delivered']} removed, {left} left",
        )

        finals = "SELECT count(*) FROM operations WHERE state <> 'focusing'"
        answers = "SELECT count(*) FROM tool_calls WHERE outcome <> 'tool_call_expired'"
        before = (_scalar(url, finals), _scalar(url, answers))
        later = datetime.now(UTC) + timedelta(days=HISTORY_DAYS + 1)
        pool = await open_pool(url, size=2, name="citus-rig-retention")
        try:
            removed = await prune_history_by_conversation(pool, HISTORY_DAYS, by="citus-rig", now=later)
        finally:
            await pool.close()
        after = (_scalar(url, finals), _scalar(url, answers))
        checks.add(
            f"the service's history retention on Citus, {HISTORY_DAYS + 1} days on: no finished"
            " operation left, every recorded answer expired",
            removed is not None and before[0] > 0 and after == (0, 0),
            f"finished operations {before[0]} -> {after[0]}, answers kept {before[1]} -> {after[1]};"
            f" removed {removed}",
        )
        replayed = await caller("POST", "/v1/tool-calls", body)
        checks.add(
            "a replay of a call recorded before the retention answers 410 tool_call_expired",
            first[0] == 200
            and replayed[0] == 410
            and json.loads(replayed[1]).get("error") == "tool_call_expired",
            f"first {first[0]}, replay {replayed[0]} {replayed[1][:120]!r}",
        )
    finally:
        await caller.http.close()
    return f"relays removed {pruned}, history removed {removed}"
