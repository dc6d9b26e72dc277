"""What must hold after a rig's run, read from the database (through the rig's URL, so on the primary
of the moment) and from what the Agents and the receiving Agent saw; and the figures printed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from harness.receiver import Receiver
from rigs.load import Figures
from service.http import outcome_statuses
from service.manifests import registry_of
from service.settings import Settings

NOT_RECORDED = (401, 404, 422)  # answers the contract does not record


async def settle(database_url: str, within: float = 120.0) -> dict[str, int]:
    """Wait until nothing is focusing and every outbox row is delivered (or ``within`` seconds)."""
    deadline = time.monotonic() + within
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.OperationalError):
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
                row = await (
                    await conn.execute(
                        "SELECT (SELECT count(*) FROM operations WHERE state = 'focusing'),"
                        " (SELECT count(*) FROM outbox WHERE status <> 'delivered')"
                    )
                ).fetchone()
                assert row is not None
                counts = {"focusing": int(row[0]), "undelivered": int(row[1])}
                if counts == {"focusing": 0, "undelivered": 0}:
                    return counts
        await asyncio.sleep(0.25)
    return counts


@dataclass
class Checks:
    results: list[tuple[str, bool, str]] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        self.results.append((name, ok, detail))

    @property
    def passed(self) -> bool:
        return all(ok for _, ok, _ in self.results)

    def print(self) -> None:
        for name, ok, detail in self.results:
            print(f"  [{'ok' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}")

    def verdict(self, log_dir: Path, hint: str = "") -> int:
        """Print the checks and the verdict; the exit code (1 when any failed)."""
        print("checks:")
        self.print()
        if not self.passed:
            print(f"FAILED (logs in {log_dir}{hint})")
            return 1
        print("all checks passed")
        return 0


def check(
    database_url: str,
    figures: Figures,
    receiver: Receiver,
    probe_answers: dict[str, tuple[int, bytes]],
    *,
    started_elsewhere: frozenset[str] = frozenset(),
) -> Checks:
    """Every acknowledged answer and outbox row present, every operation final once, every result
    delivered, no 500 — read from the primary the URL leads to. ``started_elsewhere``: the
    tool_call_ids of starts accepted outside ``figures`` (over MCP), whose operations are expected too."""
    checks = Checks()
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        statuses = outcome_statuses(registry_of(Settings()).kinds)  # what the faces answer each word with
        recorded = {
            row["tool_call_id"]: (statuses.get(row["outcome"]), row["response"])
            for row in conn.execute(
                "SELECT tool_call_id, outcome, response::text AS response FROM tool_calls"
            )
        }
        operations = {
            str(row["operation_id"]): row
            for row in conn.execute(
                "SELECT operation_id, tool_call_id, state, reason, finalized_at FROM operations"
            )
        }
        outbox = conn.execute(
            "SELECT event_id::text AS event_id, tool_call_id, operation_id::text AS operation_id, status,"
            " payload->'result'->>'state' AS state FROM outbox"
        ).fetchall()

    acknowledged = {**figures.acknowledged, **probe_answers}
    missing = [
        i for i, (status, _) in acknowledged.items() if i not in recorded and status not in NOT_RECORDED
    ]
    different = [
        i
        for i, (status, body) in acknowledged.items()
        if i in recorded and recorded[i] != (status, body.decode())
    ]
    checks.add(
        "every acknowledged answer is recorded on the primary, byte for byte",
        not missing and not different,
        f"{len(acknowledged)} answers; missing {missing[:3]}, different {different[:3]}",
    )

    starts = {i for i, (status, _) in figures.acknowledged.items() if i.endswith("-start") and status == 202}
    starts |= started_elsewhere
    by_call = {row["tool_call_id"]: row for row in operations.values()}
    unknown = [i for i in starts if i not in by_call]
    extra = [row["tool_call_id"] for row in operations.values() if row["tool_call_id"] not in starts]
    checks.add(
        "one operation per accepted start, none without one",
        not unknown and not extra,
        f"{len(starts)} starts, {len(operations)} operations; lost {unknown[:3]}, unacknowledged {extra[:3]}",
    )
    focusing = [
        i for i, row in operations.items() if row["state"] == "focusing" or row["finalized_at"] is None
    ]
    rows_per_call = Counter(row["tool_call_id"] for row in outbox)
    not_once = [row["tool_call_id"] for row in operations.values() if rows_per_call[row["tool_call_id"]] != 1]
    disagree = [
        row["event_id"]
        for row in outbox
        if row["operation_id"] in operations and row["state"] != operations[row["operation_id"]]["state"]
    ]
    told_otherwise = [
        op for op, state in figures.host_told if op in operations and operations[op]["state"] != state
    ]
    interrupted = []
    for i, (status, body) in figures.acknowledged.items():
        if i.endswith("-interrupt") and status == 200:
            answer = json.loads(body)
            if (
                answer.get("status") == "interrupted"
                and operations.get(answer["operation_id"], {}).get("state") != "interrupted"
            ):
                interrupted.append(i)
    checks.add(
        "every operation final exactly once, as its answers said",
        not focusing and not not_once and not disagree and not told_otherwise and not interrupted,
        f"still focusing {len(focusing)}, not one result {len(not_once)}, result vs state {len(disagree)},"
        f" Host told otherwise {len(told_otherwise)}, Agent told interrupted otherwise {len(interrupted)}",
    )

    accepted = receiver.accepted()
    received = {d.event_id for d in accepted}
    on_primary = {row["event_id"] for row in outbox}
    undelivered = [
        row["event_id"] for row in outbox if row["status"] != "delivered" or row["event_id"] not in received
    ]
    vanished = received - on_primary
    wrong = {d.event_id for d in accepted if d.payload.get("event_id") != d.event_id}
    unsigned = [d for d in receiver.snapshot() if d.reply.status == 401]
    checks.add(
        "every result delivered and signed, every delivered row present on the primary",
        not undelivered and not vanished and not wrong and not unsigned,
        f"{len(outbox)} rows; undelivered {len(undelivered)}, delivered but gone {len(vanished)},"
        f" body of another row {len(wrong)}, bad signatures {len(unsigned)}",
    )
    checks.add(
        "no 500, every call answered",
        not figures.errors and not any(status >= 500 for status in figures.statuses),
        f"{sum(figures.statuses.values())} answers; {figures.errors[:3]}",
    )
    return checks


def print_figures(figures: Figures, receiver: Receiver, extra: Callable[[], None] | None = None) -> None:
    sends = dict(figures.unanswered_sends)
    statuses = dict(sorted(figures.statuses.items()))
    per_event = receiver.accepted_per_event()
    failed = sum(1 for d in receiver.snapshot() if d.reply.status == 503)
    print(f"  calls answered            {figures.calls:>7}  (by status: {statuses})")
    print(f"  starts accepted           {figures.starts:>7}  (endings: {dict(figures.endings)})")
    print(f"  calls that needed a retry {figures.retried_calls:>7}  (unanswered sends: {sends})")
    print(f"  deliveries                {sum(per_event.values()):>7}  of {len(per_event)} results")
    print(
        f"  duplicates the Agent saw  {sum(per_event.values()) - len(per_event):>7}"
        f"  (it answered {failed} deliveries with 503 on purpose)"
    )
    if extra is not None:
        extra()
