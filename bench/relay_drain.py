"""How fast the relay drains a backlog, how soon a committed result reaches the Agent, beside the
ceilings of the relay's own claim-and-mark SQL and of the receiver, all in one run against a
throwaway database on 127.0.0.1.

    .venv/bin/python -m bench.relay_drain [--rows 20000] [--relays 1,2] [--rate 200] [--seconds 10]
                                          [--baseline COMMIT] [--rounds 1]

0. Statement cost: the backend CPU per row of the relay's claim and of its record statement
   (relay.claims), batches of --batch rows on one connection over a --rows backlog, no HTTP; with
   --baseline, that commit's relay/claims.py too, in the same run.
1. SQL ceiling: the relay's CLAIM and RECORD_OUTCOMES statements (relay.claims)
   in a loop from --ceiling-workers connections, marking every row delivered, no HTTP at all.
2. Receiver ceiling: the receiving Agent (harness.receiver, in a process of its own, not
   checking signatures) fed pipelined requests as fast as it answers them, no relay at all.
3. Drain: a backlog of --rows rows (in --conversations conversations, ordered within each) delivered
   by `python -m relay` processes (1, then 2 at once) to the receiver, which answers 204 at once;
   signatures, head-of-line order, attempts rows and lease fencing as in production. With
   ``--baseline COMMIT``, each drain runs first with that commit's relay (checked out into a git
   worktree, on this checkout's virtualenv) and then with this checkout's, ``--rounds`` times: the
   before and after of one run.
4. Steady: --rate results per second, each committed in its own transaction, for --seconds; the
   receiver notes when each first arrives; commit-to-2xx latency is arrival minus the row's
   created_at. After each commit the bench wakes the relays as the service does (coalesced NOTIFY
   after commit, service.wakeups); run again with RELAY_POLL_ONLY at the default 1 s and at 50 ms,
   the worst case when wake-ups are lost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg

from bench import seeds
from bench.common import CpuMeter, Relays
from harness.database import throwaway_database
from harness.measure import process_cpu
from harness.receiver import ReceiverProcess
from harness.releases import previous_release
from relay import claims as claims_db
from relay.claims import Outcome


def seed(url: str, rows: int, conversations: int) -> None:
    """A backlog as the service leaves it: ``rows`` results in ``conversations`` conversations,
    each a Pomodoro started and interrupted through the service's statement (``bench.seeds``),
    queued while delivery is paused, so every copy of this database starts paused."""
    per = max(1, rows // conversations)
    seeds.delivery(url, paused=True)
    seeds.finished(url, "c", rows // per, per)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def undelivered(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM outbox WHERE status <> 'delivered'").fetchone()
        return int(row[0]) if row else 0


# -- 0. what the statements cost Postgres -------------------------------------------------------


def claims_module(tree: Path | None) -> ModuleType:
    """``relay.claims`` of this checkout, or of the release checked out in ``tree``."""
    if tree is None:
        return claims_db
    spec = importlib.util.spec_from_file_location("baseline_relay_claims", tree / "relay" / "claims.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"no relay/claims.py in {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def statement_cost(url: str, rows: int, batch: int, claims: ModuleType) -> tuple[float, float]:
    """Backend CPU seconds per row of the claim and of the record (all delivered), one connection,
    on a copy of the seeded backlog ``url``."""
    with seeds.copy_of(url) as copy:
        seeds.delivery(copy, paused=False)
        return _statement_cost(copy, rows, batch, claims)


def _statement_cost(url: str, rows: int, batch: int, claims: ModuleType) -> tuple[float, float]:
    spent = [0.0, 0.0]
    done = 0

    async def run() -> None:
        nonlocal done
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("SET TIME ZONE 'UTC'")
            backend = conn.info.backend_pid
            while True:
                before = process_cpu(backend)
                claimed = await claims.claim(conn, "cost", batch, 30.0)
                claimed_cpu = process_cpu(backend)
                if not claimed:
                    return
                outcomes = [
                    claims.Outcome(c, "delivered", 0.0, None, c.created_at, 1, 204, None, None)
                    for c in claimed
                ]
                await claims.record_outcomes(conn, "cost", outcomes)
                spent[0] += claimed_cpu - before
                spent[1] += process_cpu(backend) - claimed_cpu
                done += len(claimed)

    asyncio.run(run())
    if done != rows or undelivered(url):
        raise SystemExit("the statement-cost run left rows behind")
    return spent[0] / rows, spent[1] / rows


# -- 1. the SQL ceiling --------------------------------------------------------------------------


async def _claim_and_mark(url: str, worker: int, batch: int, done: list[int]) -> None:
    relay_id = f"ceiling-{worker}"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while claimed := await claims_db.claim(conn, relay_id, batch, 30.0):
            outcomes = [Outcome(c, "delivered", 0.0, None, c.created_at, 1, 204, None, None) for c in claimed]
            await claims_db.record_outcomes(conn, relay_id, outcomes)
            done[0] += len(claimed)


def sql_ceiling(template: str, rows: int, workers: int, batch: int) -> float:
    with seeds.copy_of(template) as url:
        seeds.delivery(url, paused=False)
        return _sql_ceiling(url, rows, workers, batch)


def _sql_ceiling(url: str, rows: int, workers: int, batch: int) -> float:
    done = [0]

    async def run() -> None:
        # A worker that finds nothing claimable (heads held by the others) stops; repeat until empty.
        while done[0] < rows:
            await asyncio.gather(*(_claim_and_mark(url, w, batch, done) for w in range(workers)))

    started = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - started
    assert undelivered(url) == 0, "the ceiling run left rows behind"
    return rows / elapsed


# -- 2. the receiver's ceiling -------------------------------------------------------------------


async def _blast(port: int, connections: int, per_connection: int, pipeline: int) -> None:
    body = b'{"event_id":"x","type":"tool.result","result":{"state":"completed"}}'

    async def one(connection: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sent = 0
        while sent < per_connection:
            batch = min(pipeline, per_connection - sent)
            writer.write(
                b"".join(
                    b"POST /agent/webhook HTTP/1.1\r\nHost: bench\r\nwebhook-id: ceiling-%d-%d\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (connection, sent + i, len(body), body)
                    for i in range(batch)
                )
            )
            answered = 0
            while answered < batch:
                answered += (await reader.read(65536)).count(b"HTTP/1.1 204")
            sent += batch
        writer.close()

    await asyncio.gather(*(one(c) for c in range(connections)))


def receiver_ceiling(requests: int, logs: Path) -> float:
    """Requests per second the receiver answers, fed pipelined requests on 8 connections."""
    receiver = ReceiverProcess(logs)
    try:
        per_connection = requests // 8
        asyncio.run(_blast(receiver.port, 8, per_connection // 10, 100))  # warm-up
        started = time.perf_counter()
        asyncio.run(_blast(receiver.port, 8, per_connection, 100))
        return 8 * per_connection / (time.perf_counter() - started)
    finally:
        receiver.close()


# -- 3. drain -----------------------------------------------------------------------------------


def drain(
    template: str, relays: int, args: argparse.Namespace, logs: Path, tree: Path | None = None
) -> dict[str, Any]:
    """The relays drain a copy of the seeded backlog: started and ready while delivery is paused
    (so their start-up is not part of the figure), then an operator's resume wakes them."""
    with seeds.copy_of(template) as url:
        receiver = ReceiverProcess(logs)
        try:
            processes = Relays(
                url, receiver.url, relays, logs, concurrency=args.concurrency, batch=args.batch, tree=tree
            )
            meter = CpuMeter(url)
            relay_cpu = processes.cpu()
            receiver_cpu = process_cpu(receiver.pid)
            meter.start()
            resumed = time.time()
            seeds.delivery(url, paused=False)
            stats = receiver.wait_for(args.rows, timeout=180)
            while undelivered(url) and time.time() < resumed + 200:
                time.sleep(0.02)
            recorded = time.time()
            cpu = meter.stop()
            cpu["relay processes"] = processes.cpu() - relay_cpu
            cpu["receiver"] = process_cpu(receiver.pid) - receiver_cpu
            processes.stop()
        finally:
            receiver.close()
    return {
        "per_second": args.rows / (recorded - resumed),
        "first_to_last_arrival": args.rows / max(stats["last"] - stats["first"], 1e-6),
        "repeats": stats["requests"] - stats["unique"],
        "cpu": cpu,
    }


def cpu_line(cpu: dict[str, float], rows: int) -> str:
    named = ("relay processes", "postgres (this db)", "receiver")
    parts = [f"{name} {cpu[name] / rows * 1e6:.0f}" for name in named]
    other = cpu["machine"] - sum(cpu[name] for name in named) - cpu.get("bench process", 0.0)
    parts.append(f"everything else {max(other, 0.0) / rows * 1e6:.0f}")
    return "CPU us per delivery: " + ", ".join(parts)


# -- 4. steady rate -----------------------------------------------------------------------------


async def _queue_at_rate(url: str, rate: int, total: int, wake: bool) -> float:
    """Queue ``total`` results at ``rate`` per second, each a Pomodoro started and then interrupted
    through the service's statement (the interrupt's commit queues the result); after each commit,
    wake the relays as the service does (coalesced NOTIFY on another connection) unless ``wake``
    is false."""
    from psycopg.rows import tuple_row

    from service.db.tool_calls import CALL_TOOL
    from service.wakeups import Wakeups

    wakeups = Wakeups(url)
    stop = asyncio.Event()
    notifier = asyncio.create_task(wakeups.run(stop))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = psycopg.AsyncRawCursor(conn, row_factory=tuple_row)
        started = time.perf_counter()
        for index in range(total):
            pause = started + index / rate - time.perf_counter()
            if pause > 0:
                await asyncio.sleep(pause)
            conversation = f"steady-{index % 500}"
            for call in (seeds.start(conversation), seeds.interrupt(conversation)):
                await cursor.execute(CALL_TOOL, call.params(), prepare=True)
            if wake:
                wakeups.committed(outbox=True)
        achieved = total / (time.perf_counter() - started)
    stop.set()
    await notifier
    return achieved


def steady(empty: str, args: argparse.Namespace, logs: Path, **env: str) -> dict[str, float]:
    with seeds.copy_of(empty) as url:
        return _steady(url, args, logs, **env)


def _steady(url: str, args: argparse.Namespace, logs: Path, **env: str) -> dict[str, float]:
    receiver = ReceiverProcess(logs)
    total = int(args.rate * args.seconds)
    try:
        processes = Relays(
            url, receiver.url, 1, logs, concurrency=args.concurrency, batch=args.batch, env=env
        )
        wake = env.get("RELAY_POLL_ONLY") != "true"
        achieved = asyncio.run(_queue_at_rate(url, args.rate, total, wake))
        receiver.wait_for(total, timeout=60)
        arrivals = receiver.arrivals()
        processes.stop()
    finally:
        receiver.close()
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT event_id, EXTRACT(EPOCH FROM created_at) FROM outbox").fetchall()
    latencies = sorted((arrivals[str(event_id)] - float(created)) * 1000 for event_id, created in rows)
    quantiles = statistics.quantiles(latencies, n=100)
    return {"rate": achieved, "p50": quantiles[49], "p99": quantiles[98], "max": latencies[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--conversations", type=int, default=5_000)
    parser.add_argument("--relays", default="1,2", help="relay process counts to drain with")
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=64, help="RELAY_CONCURRENCY")
    parser.add_argument("--batch", type=int, default=100, help="RELAY_BATCH_SIZE")
    parser.add_argument("--ceiling-workers", type=int, default=2)
    parser.add_argument("--no-steady", action="store_true", help="skip the steady-rate latency runs")
    parser.add_argument("--baseline", metavar="COMMIT", help="drain with this commit's relay too, first")
    parser.add_argument("--rounds", type=int, default=1, help="drains per relay count (and release)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: that it still runs")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.conversations, args.rate, args.seconds, args.relays = 200, 50, 20, 1.0, "1"
    print(
        f"rows={args.rows} in {args.conversations} conversations, RELAY_CONCURRENCY={args.concurrency}, "
        f"RELAY_BATCH_SIZE={args.batch}, load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with contextlib.ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-relay-drain-")))
        url = stack.enter_context(throwaway_database("relay"))
        empty = stack.enter_context(seeds.copy_of(url))  # the steady runs' start, before the seed
        began = time.monotonic()
        seed(url, args.rows, args.conversations)
        print(f"seeded {args.rows} results in {time.monotonic() - began:.1f} s", flush=True)
        releases: list[tuple[str, Path | None]] = [("this checkout", None)]
        if args.baseline:
            releases.insert(
                0, (f"baseline {args.baseline[:12]}", stack.enter_context(previous_release(args.baseline)))
            )
        for name, tree in releases:
            claim_cpu, record_cpu = statement_cost(url, args.rows, args.batch, claims_module(tree))
            print(
                f"Postgres CPU per row, {name}: claim {claim_cpu * 1e6:.0f} us, "
                f"record {record_cpu * 1e6:.0f} us (batches of {args.batch}, one connection)",
                flush=True,
            )
        ceiling = sql_ceiling(url, args.rows, args.ceiling_workers, args.batch)
        print(
            f"SQL ceiling, claim + mark ({args.ceiling_workers} connections): {ceiling:,.0f} rows/s",
            flush=True,
        )
        ingest = receiver_ceiling(args.rows if args.smoke else max(args.rows, 80_000), logs)
        print(f"receiver ceiling, pipelined requests: {ingest:,.0f} requests/s", flush=True)
        for count in (int(n) for n in args.relays.split(",")):
            for round_ in range(1, args.rounds + 1):
                for name, tree in releases:
                    drained = drain(url, count, args, logs, tree)
                    label = f"{name}, " if args.baseline else ""
                    label += f"round {round_}, " if args.rounds > 1 else ""
                    print(
                        f"drain, {label}{count} relay process(es): {drained['per_second']:,.0f} deliveries/s "
                        f"= {drained['per_second'] / ceiling:.2f} x the SQL ceiling, "
                        f"{drained['per_second'] / ingest:.2f} x the receiver's "
                        f"(first to last arrival {drained['first_to_last_arrival']:,.0f}/s; "
                        f"{drained['repeats']:.0f} repeats)",
                        flush=True,
                    )
                    print(f"    {cpu_line(drained['cpu'], args.rows)}", flush=True)
        if args.no_steady:
            return 0
        variants: list[tuple[str, dict[str, str]]] = [
            ("after-commit wake-up (coalesced NOTIFY)", {}),
            ("poll only, 1 s", {"RELAY_POLL_ONLY": "true"}),
            ("poll only, 50 ms", {"RELAY_POLL_ONLY": "true", "RELAY_POLL_INTERVAL_SECONDS": "0.05"}),
        ]
        for label, env in variants[:1] if args.smoke else variants:
            latency = steady(empty, args, logs, **env)
            print(
                f"steady {latency['rate']:.0f}/s, {label}: commit-to-2xx p50 {latency['p50']:.1f} ms, "
                f"p99 {latency['p99']:.1f} ms, max {latency['max']:.1f} ms",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
