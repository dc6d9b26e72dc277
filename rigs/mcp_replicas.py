"""MCP tasks at 2026-07-28 on two ``serve`` replicas behind nginx in round-robin: no affinity needed.

```
.venv/bin/python -m rigs.mcp_replicas [--tasks 200] [--concurrency 16]
```

Two ``python -m service serve`` on one fresh database (of the server named by ``DATABASE_URL``,
default the local one) behind Debian's nginx in round-robin (``harness/nginx.py``; every
answer names its replica in ``X-Upstream``). Through the balancer only, as a client declaring the
extension ``io.modelcontextprotocol/tasks``:

1. ``--tasks`` ``pomodoro.start`` calls, ``--concurrency`` at a time, each answered with a task
   (half of 30 s, half of 10 minutes); the replica that created each is noted;
2. every task is read with ``tasks/get`` until a read was answered by the *other* replica
   (reads are harmless, so the rig simply reads again when the balancer sent it to the same one);
3. the long half is cancelled with ``tasks/cancel``, each through the other replica (one request
   in flight, so round-robin alternates: harmless ``server/discover`` requests step it until the
   creating replica has just answered);
4. every task is polled, honouring its ``pollIntervalMs``, until it is ``completed``.

Checks, from the answers and the database: every request answered 200 without a JSON-RPC error;
each task was served by both replicas; each operation ended exactly once — the cancelled half
``interrupted (agent_interrupt)``, the rest ``completed (deadline_reached)`` — with exactly one
outbox row whose result is the finished task's ``structuredContent``. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg.rows import dict_row

from harness.database import named_server, throwaway_database
from harness.mcp import ModernWire
from harness.nginx import UPSTREAM_HEADER, load_balancer
from harness.processes import running_service

SHORT_SECONDS = 30  # long enough to be read while working, whatever the machine's load
LONG_SECONDS = 600


@dataclass
class Task:
    conversation_id: str
    cancel: bool
    task_id: str = ""
    origin: str = ""
    served_by: set[str] = field(default_factory=set)
    final: dict[str, Any] = field(default_factory=dict)


@dataclass
class Tally:
    errors: list[str] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    direct_reads: int = 0  # tasks the balancer kept sending to their creating replica

    async def call(self, wire: ModernWire, method: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The replica that answered and the JSON-RPC result (an error is noted, and {})."""
        self.requests[method] += 1
        try:
            answer = await wire.post(method, params)
        except httpx.HTTPError as exc:
            self.errors.append(f"{method}: {exc!r}")
            return "", {}
        replica = answer.headers.get(UPSTREAM_HEADER, "")
        body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
        if answer.status_code != 200 or "result" not in body:
            self.errors.append(
                f"{method} {params.get('taskId', '')}: HTTP {answer.status_code} {answer.text[:200]}"
            )
            return replica, {}
        return replica, dict(body["result"])


async def run(
    url: str, count: int, concurrency: int, token: str, replicas: list[str]
) -> tuple[list[Task], Tally, dict[str, float]]:
    tally = Tally()
    run_id = uuid.uuid4().hex[:8]
    tasks = [Task(f"replicas-{run_id}-{n}", cancel=n % 2 == 0) for n in range(count)]
    limit = asyncio.Semaphore(concurrency)
    timings: dict[str, float] = {}
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        wire = ModernWire(http, f"{url}/mcp")

        async def start(task: Task) -> None:
            async with limit:
                seconds = LONG_SECONDS if task.cancel else SHORT_SECONDS
                params = {
                    "name": "pomodoro.start",
                    "arguments": {"duration_seconds": seconds, "activity": "rig"},
                    "_meta": {"io.lineup/conversation_id": task.conversation_id},
                }
                task.origin, created = await tally.call(wire, "tools/call", params)
                if created.get("resultType") != "task":
                    tally.errors.append(f"{task.conversation_id}: not a task: {created}")
                    return
                task.task_id = created["taskId"]
                task.served_by.add(task.origin)

        async def read_through_the_other(task: Task) -> None:
            async with limit:
                for _ in range(16):
                    replica, got = await tally.call(wire, "tasks/get", {"taskId": task.task_id})
                    task.served_by.add(replica)
                    if got.get("status") != "working":
                        tally.errors.append(f"{task.task_id}: {got.get('status')} before its end")
                    if replica != task.origin:
                        return
                # Sixteen concurrent readers can fall into step with the round-robin and land on
                # the same replica every time: read through the other one by its own address.
                other = next(address for address in replicas if address != task.origin)
                _, got = await tally.call(
                    ModernWire(http, f"http://{other}/mcp"), "tasks/get", {"taskId": task.task_id}
                )
                tally.direct_reads += 1
                if got.get("status") != "working":
                    tally.errors.append(
                        f"{task.task_id}: {got.get('status')} before its end, read through {other}"
                    )
                    return
                task.served_by.add(other)

        async def cancel_through_the_other(task: Task) -> None:
            for _ in range(4):
                stepped, _ = await tally.call(wire, "server/discover", {})
                if stepped == task.origin:
                    break
            replica, acknowledged = await tally.call(wire, "tasks/cancel", {"taskId": task.task_id})
            task.served_by.add(replica)
            if replica == task.origin:
                tally.errors.append(f"{task.task_id}: the cancel reached the creating replica")
            if acknowledged.get("resultType") != "complete":
                tally.errors.append(f"{task.task_id}: cancel answered {acknowledged}")

        async def until_completed(task: Task) -> None:
            while True:
                async with limit:
                    replica, got = await tally.call(wire, "tasks/get", {"taskId": task.task_id})
                task.served_by.add(replica)
                if got.get("status") != "working":
                    task.final = got
                    return
                await asyncio.sleep(got.get("pollIntervalMs", 1000) / 1000)

        began = time.monotonic()
        await asyncio.gather(*(start(task) for task in tasks))
        timings["start"] = time.monotonic() - began
        started = [task for task in tasks if task.task_id]
        began = time.monotonic()
        await asyncio.gather(*(read_through_the_other(task) for task in started))
        timings["read"] = time.monotonic() - began
        began = time.monotonic()
        for task in started:
            if task.cancel:
                await cancel_through_the_other(task)
        timings["cancel"] = time.monotonic() - began
        began = time.monotonic()
        await asyncio.gather(*(until_completed(task) for task in started))
        timings["finish"] = time.monotonic() - began
    return tasks, tally, timings


def check(tasks: list[Task], tally: Tally, database_url: str, replicas: set[str]) -> list[str]:
    failures = list(tally.errors)
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as db:
        operations = {
            str(row["operation_id"]): row
            for row in db.execute("SELECT operation_id, state, reason, result FROM operations").fetchall()
        }
        outbox = Counter(
            str(row["operation_id"]) for row in db.execute("SELECT operation_id FROM outbox").fetchall()
        )
        payloads = {
            str(row["operation_id"]): row["result"]
            for row in db.execute("SELECT operation_id, payload -> 'result' AS result FROM outbox").fetchall()
        }
    if len(operations) != len(tasks):
        failures.append(f"{len(operations)} operations for {len(tasks)} tasks")
    for task in tasks:
        row = operations.get(task.task_id)
        expected = ("interrupted", "agent_interrupt") if task.cancel else ("completed", "deadline_reached")
        if row is None:
            failures.append(f"{task.conversation_id}: no operation")
            continue
        if (row["state"], row["reason"]) != expected:
            failures.append(f"{task.task_id}: ended {row['state']} ({row['reason']}), not {expected}")
        if outbox[task.task_id] != 1:
            failures.append(f"{task.task_id}: {outbox[task.task_id]} outbox rows")
        if task.final.get("status") != "completed":
            failures.append(f"{task.task_id}: finished {task.final.get('status')}")
        elif task.final["result"]["structuredContent"] != payloads.get(task.task_id):
            failures.append(f"{task.task_id}: the task's result is not the outbox row's")
        if task.served_by != replicas:
            failures.append(f"{task.task_id}: served by {sorted(task.served_by)} only")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    token = "rig-agent-" + secrets.token_hex(16)
    print(f"database server: {named_server()}")
    with (
        tempfile.TemporaryDirectory(prefix="rig-mcp-replicas-") as tmp,
        throwaway_database("mcp_replicas") as url,
        running_service(url, Path(tmp), env={"AGENT_TOKEN": token}) as first,
        running_service(url, Path(tmp), env={"AGENT_TOKEN": token}) as second,
    ):
        replicas = [service.base_url.removeprefix("http://") for service in (first, second)]
        with load_balancer(replicas) as balancer:
            print(f"replicas {replicas} behind nginx round-robin at {balancer.round_robin_url}")
            tasks, tally, timings = asyncio.run(
                run(balancer.round_robin_url, args.tasks, args.concurrency, token, replicas)
            )
        failures = check(tasks, tally, url, set(replicas))
    cancelled = sum(task.cancel for task in tasks)
    print(
        f"\n{len(tasks)} tasks started through the balancer, {cancelled} cancelled through the other replica"
    )
    print("requests: " + ", ".join(f"{method} {n}" for method, n in sorted(tally.requests.items())))
    print(f"reads through the other replica by its address (round-robin kept in step): {tally.direct_reads}")
    print("seconds:  " + ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in timings.items()))
    print(f"errors:   {len(tally.errors)}")
    if failures:
        print(f"FAILED: {len(failures)} checks", file=sys.stderr)
        for failure in failures[:20]:
            print(f"  {failure}", file=sys.stderr)
        return 1
    print(
        "every task: read through both replicas, ended exactly once, one outbox row, its result the relay's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
