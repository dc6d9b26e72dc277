"""A rolling upgrade under load: the previous release and this one serve side by side while
``migrate`` runs, and nothing fails, is lost, doubled or answered differently.

```
.venv/bin/python -m rigs.upgrade [--conversations 16] [--phase-seconds 12] [--runs 1]
```

The previous release is the newest release of the record, ``releases.toml``
(``harness.releases``): its commit of this repository, checked out into a ``git worktree`` and run
with this checkout's Python environment. On a throwaway database of the server named by
``DATABASE_URL`` (default the local one):

1. the previous release migrates the database and serves: one ``serve`` and two relays, delivering
   to a local Agent that verifies every signature; Agent load starts — per conversation, in turn:
   ``pomodoro.start`` (1 to 4 s, so deadlines fall due all the time), sometimes ``pomodoro.interrupt``,
   sometimes ``interact.ask`` answered by the person through the Host API; every call is sent to a
   release picked at random among those taking traffic, and some are replayed at once through the
   other;
2. this release's ``python -m service roles`` makes the least-privilege roles (names of the run's
   own) and hands the schema to the owner, then its ``migrate`` runs as that owner, while that load
   goes on (``--admin-only``: this release as the admin too, no roles);
3. this release starts beside it: one ``serve`` as the runtime role and two relays as the relay
   role;
4. the old relays stop one by one, then the old ``serve`` (no new request is sent to it first, as a
   load balancer would, then ``SIGTERM``); the load goes on against this release alone;
5. the load stops; every deadline falls due and the outbox drains; every call made is replayed
   through this release.

Checks: no 5xx and no failed request; every acknowledged start ended exactly once, with the ending
the Agent was told (its interrupt's receipt), and has exactly one outbox row, delivered; every
answered question likewise; no tool call has two outbox rows or two webhook ids; each
conversation's results reached the Agent in sequence order; every replay — across the two
releases during the overlap, and of every call through this release at the end — answered the same
status and the same bytes as the first answer. Exits 1 when a check fails.

When a release is cut and recorded, the upgrade starts from it (docs/operations.md, "Upgrading").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import psycopg
from psycopg.rows import dict_row

from harness.database import named_server, scratch_database
from harness.processes import ROOT, Child, ServiceProcess
from harness.receiver import Receiver, new_secret
from harness.releases import newest_release, previous_release
from rigs.upgrade_load import Load
from rigs.upgrade_stack import Release, Stack
from service.db import roles

# --- the checks ------------------------------------------------------------------------------


def check(load: Load, receiver: Receiver, database_url: str) -> list[str]:
    problems = list(load.failures)
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        operations = {
            str(r["operation_id"]): r
            for r in conn.execute("SELECT operation_id, tool_call_id, state, reason FROM operations")
        }
        outbox = conn.execute(
            "SELECT tool_call_id, event_id, status, conversation_id, sequence FROM outbox"
        ).fetchall()
    rows_by_call = defaultdict(list)
    for row in outbox:
        rows_by_call[row["tool_call_id"]].append(row)
    started = [
        json.loads(call.answer)
        for call in load.calls
        if call.body["tool"] == "pomodoro.start" and call.status == 202
    ]
    for answer in started:
        operation_id = answer["operation"]["operation_id"]
        operation = operations.get(operation_id)
        if operation is None:
            problems.append(f"acknowledged start {answer['tool_call_id']} has no operation")
            continue
        if operation["state"] == "focusing":
            problems.append(f"operation {operation_id} never ended")
        told = load.interrupted.get(operation_id)
        if told == "interrupted" and operation["state"] != "interrupted":
            problems.append(f"operation {operation_id} was reported interrupted but is {operation['state']}")
        rows = rows_by_call[answer["tool_call_id"]]
        if len(rows) != 1 or rows[0]["status"] != "delivered":
            problems.append(f"start {answer['tool_call_id']}: outbox rows {[r['status'] for r in rows]}")
    for tool_call_id in load.answered:
        rows = rows_by_call[tool_call_id]
        if len(rows) != 1 or rows[0]["status"] != "delivered":
            problems.append(f"question {tool_call_id}: outbox rows {[r['status'] for r in rows]}")
    accepted = receiver.accepted()
    webhook_ids: dict[str, set[str]] = defaultdict(set)
    for delivery in accepted:
        webhook_ids[delivery.payload["tool_call_id"]].add(delivery.event_id)
    for tool_call_id, ids in webhook_ids.items():
        if len(ids) != 1:
            problems.append(f"{tool_call_id} reached the Agent under {len(ids)} webhook ids")
    delivered = {row["event_id"] for row in outbox if row["status"] == "delivered"}
    if {str(e) for e in delivered} - {d.event_id for d in accepted}:
        problems.append("rows marked delivered that the Agent never accepted")
    last: dict[str, int] = {}
    seen: set[str] = set()
    for delivery in accepted:
        if delivery.event_id in seen:
            continue
        seen.add(delivery.event_id)
        payload = delivery.payload
        conversation, sequence = payload["conversation_id"], int(payload["sequence"])
        if sequence <= last.get(conversation, 0):
            problems.append(f"{conversation}: result {sequence} reached the Agent after {last[conversation]}")
        last[conversation] = sequence
    return problems


async def drive(stack: Stack, previous: Release, current: Release, args: argparse.Namespace) -> Load:
    phase = args.phase_seconds
    old_serve = stack.serve(previous)
    old_relays = [stack.relay(previous, n) for n in (1, 2)]
    load = Load(stack, {previous.name: old_serve.base_url})
    conversations = [f"upgrade-{uuid.uuid4().hex[:6]}-{n}" for n in range(args.conversations)]
    new_serve: ServiceProcess | None = None
    new_relays: list[Child] = []
    timeline: list[str] = []
    began = time.monotonic()

    def note(what: str) -> None:
        timeline.append(f"{time.monotonic() - began:6.1f} s  {what}")
        print(timeline[-1], flush=True)

    try:
        async with httpx.AsyncClient(timeout=30) as http:
            workers = [asyncio.create_task(load.conversation(http, c)) for c in conversations]
            note(f"{previous.name} serving ({len(conversations)} conversations of Agent load)")
            await asyncio.sleep(phase)
            if current.roles is not None:
                await asyncio.to_thread(stack.make_roles, current)
                note(f"{current.name}'s roles made ({', '.join(current.roles.of(k) for k in roles.KINDS)})")
            note(f"{current.name}'s migrate starts")
            took = await asyncio.to_thread(stack.migrate, current)
            note(f"{current.name}'s migrate done in {took:.1f} s, under load")
            await asyncio.sleep(phase / 2)
            new_serve = await asyncio.to_thread(stack.serve, current)
            new_relays = [stack.relay(current, n) for n in (1, 2)]
            load.targets[current.name] = new_serve.base_url
            note(f"{current.name} serving beside it")
            await load.read_ops(http)
            note(f"operators' reads of recorded calls through both releases ({load.ops_reads} checked)")
            await asyncio.sleep(phase)
            for relay in old_relays:
                await asyncio.to_thread(relay.stop)
                note(f"{previous.name}'s {relay.log.stem} stopped")
                await asyncio.sleep(phase / 4)
            del load.targets[previous.name]
            await asyncio.sleep(1.0)  # what was sent to it is answered
            code = await asyncio.to_thread(old_serve.stop)
            note(f"{previous.name}'s serve stopped (exit {code})")
            await asyncio.sleep(phase)
            load.running = False
            await asyncio.gather(*workers)
            note("load stopped; waiting for every deadline and the outbox")
            left = await asyncio.to_thread(_drained, stack.database_url, 90)
            if left is not None:
                load.failures.append(left)
            note("outbox drained; replaying every call through " + current.name)
            for call in list(load.calls):
                await load.replay(http, call, current.name)
    finally:  # whatever failed, no process of either release is left running
        running: list[Child | None] = [*old_relays, old_serve, *new_relays, new_serve]
        for process in running:
            if process is not None:
                process.stop()
    return load


def _drained(database_url: str, timeout: float) -> str | None:
    """None once nothing is focusing and nothing pending; else what is left after ``timeout``."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM operations WHERE state = 'focusing'),"
                " (SELECT count(*) FROM outbox WHERE status = 'pending')"
            ).fetchone()
            assert row is not None
            if row == (0, 0):
                return None
            if time.monotonic() > deadline:
                return f"after {timeout:.0f} s, {row[0]} operations still focusing, {row[1]} rows pending"
            time.sleep(0.5)


def logged_errors(logs: Path, limit: int = 12) -> list[str]:
    """Each process's log lines at level error or above (JSON lines) and the lines of any Python
    traceback, named by their log: a failed run shows why without the logs it leaves behind (CI
    keeps only what the rig prints)."""
    found: list[str] = []
    for log in sorted(logs.glob("*.log")):
        in_traceback = False
        for line in log.read_text(errors="replace").splitlines():
            level = ""
            if line.startswith("{"):
                try:
                    level = str(json.loads(line).get("level", ""))
                except ValueError:
                    level = ""
            in_traceback = line.startswith("Traceback") or (in_traceback and line[:1].isspace())
            if level in ("error", "critical", "exception") or in_traceback or "Error:" in line:
                found.append(f"{log.name}: {line[:2000]}")
                if len(found) >= limit:
                    return found
    return found


def _report(load: Load, problems: list[str], logs: Path) -> None:
    tools = Counter(f"{c.body['tool']} {c.status}" for c in load.calls)
    print("\ncalls by tool and status: " + ", ".join(f"{k} x{v}" for k, v in sorted(tools.items())))
    print("requests by release:      " + ", ".join(f"{k} x{v}" for k, v in sorted(load.by_release.items())))
    print("replays by direction:     " + ", ".join(f"{k} x{v}" for k, v in sorted(load.replays.items())))
    print(f"interrupts acknowledged:  {sum(1 for s in load.interrupted.values() if s == 'interrupted')}")
    print(f"questions answered:       {len(load.answered)}")
    print(f"ops reads checked:        {load.ops_reads} release(s) side by side")
    if problems:
        print(f"\nFAILED: {len(problems)} problem(s)")
        for problem in problems[:40]:
            print(f"  - {problem}")
        errors = logged_errors(logs)
        if errors:
            print("\nerrors the processes logged (the first of them):")
            for line in errors:
                print(f"  {line}")
    else:
        print("\nPASSED: no failed call, nothing lost or doubled, order kept, every replay byte for byte")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--phase-seconds", type=float, default=12.0)
    parser.add_argument("--runs", type=int, default=1, help="run the whole upgrade this many times")
    newest = newest_release()
    parser.add_argument(
        "--previous",
        default=newest.commit,
        help=f"the commit of the previous release (default: the newest recorded, {newest.version})",
    )
    parser.add_argument(
        "--admin-only",
        action="store_true",
        help="run this release as the admin too (by default it runs on the least-privilege roles)",
    )
    args = parser.parse_args()
    failed = 0
    with previous_release(args.previous) as tree:
        for run in range(1, args.runs + 1):
            named = (
                f"{newest.version} ({args.previous[:12]})"
                if args.previous == newest.commit
                else args.previous[:12]
            )
            print(f"\n=== upgrade run {run} of {args.runs}: {named} -> this checkout ===")
            logs = Path(tempfile.mkdtemp(prefix="lineup-upgrade-"))
            secret = new_secret()
            tag = secrets.token_hex(4)
            names = None if args.admin_only else roles.Names(**{k: f"rig_{tag}_{k}" for k in roles.KINDS})
            previous = Release("previous", tree)
            current = Release("this", ROOT, roles=names)
            server = named_server()
            try:
                with (
                    scratch_database(server, f"rig_upgrade_{tag}") as url,
                    Receiver([secret]) as receiver,
                ):
                    stack = Stack(url, logs, receiver.url, secret)
                    stack.migrate(previous)
                    load = asyncio.run(drive(stack, previous, current, args))
                    problems = check(load, receiver, url)
            finally:
                if names is not None:
                    Stack.drop_roles(current, server)
            _report(load, problems, logs)
            failed += bool(problems)
            print(f"logs: {logs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
