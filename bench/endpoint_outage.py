"""The Agent's endpoint down for minutes while results keep coming, then back (issue 20's targets):
no row dies, the dead endpoint sees one request per probe interval per relay fleet (not one per
row), and the backlog goes within 10 s of recovery plus its drain time at the relay rate measured
in the same run. About 12 minutes with the defaults.

    .venv/bin/python -m bench.endpoint_outage [--outage 600] [--rate 17] [--relays 1] [--before 10]
                                              [--after 30] [--conversations 1000] [--down 503|refused]

One run against a throwaway database on 127.0.0.1: ``python -m service serve`` and --relays
``python -m relay`` processes with the product's default settings (circuit: 10 failures in a row
open it, a probe every 5 s; 60 attempts, backoff 1 s to 1 h; 64 deliveries in flight, 100 rows per
claim), delivering to the Agent's endpoint (harness.receiver, in a thread of the bench, not
checking signatures).

1. Healthy drain: a backlog shaped like the outage's (--rate x --outage rows over --conversations
   conversations, ordered within each) committed at once; the relays' deliveries/s to the healthy
   endpoint is the relay rate the recovery is compared with. Once the backlog is delivered, the
   same drain again (in fresh conversations): how far the machine's load moved meanwhile.
2. Results keep coming: --rate start+interrupt cycles per second through ``POST /v1/tool-calls``
   (one result per cycle, --conversations conversations in turn), every answer checked, for
   --before s with the endpoint healthy (1..600), then --outage s (10..3600) with it down, then
   --after s (0..600) with it back.
3. Down: every request answered 503 (``--down 503``), or the endpoint's port closed, so every
   connection is refused (``--down refused``). Back: 204 at once.
4. Checked and printed: results produced during the outage; the requests the dead endpoint got
   (from ``outbox_attempts``, and as it counted them with 503) before the circuit opened and while
   it was open: total, per minute, the most in any probe interval, the gaps between them; attempts
   the held rows spent; dead rows; from recovery, the first accepted delivery and the whole backlog
   delivered, against backlog / relay rate; every result accepted exactly once (duplicates
   counted) and in order within its conversation. Exits 1 when a row died, a result was lost or
   doubled, a conversation's order broke or a tool call was answered wrongly.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from bench.common import Relays, tool_poster
from bench.outage_figures import Outage, report
from bench.seeds import SEED_BACKLOG
from harness.calls import interrupt_body, start_body
from harness.database import throwaway_database
from harness.http_client import HttpClient
from harness.processes import running_service
from harness.receiver import Receiver, always
from service.settings import Settings
from service.wakeups import OUTBOX_CHANNEL

PRODUCER_PREFIX = "outage-"
CLIENTS = 16  # cycles in flight at most; conversations in turn never overlap at these rates


@dataclass
class Production:
    """The cycles the producer ran: each start's tool_call_id and when its interrupt was answered."""

    finished: list[tuple[str, str, float]] = field(default_factory=list)  # (call id, conversation, at)
    failures: list[str] = field(default_factory=list)
    behind: float = 0.0  # the most the producer fell behind its schedule, in seconds


class Endpoint:
    """The Agent's endpoint: up (204), or down with 503s or with its port closed."""

    def __init__(self, down: str) -> None:
        self.down_mode = down
        self.receivers = [Receiver(responder=always(204)).__enter__()]
        self.port = self.receivers[0].port
        self.url = self.receivers[0].url

    def down(self) -> None:
        if self.down_mode == "503":
            self.receivers[-1].responder = always(503)
        else:
            self.receivers[-1].__exit__()

    def up(self) -> None:
        if self.down_mode == "503":
            self.receivers[-1].responder = always(204)
        else:
            self.receivers.append(Receiver(port=self.port, responder=always(204)).__enter__())

    def deliveries(self) -> list[tuple[float, str, int, bytes]]:
        """(arrived at, webhook-id, status answered, body) of every request, in arrival order."""
        rows = [
            (d.arrived_at, d.event_id, d.reply.status, d.body) for r in self.receivers for d in r.snapshot()
        ]
        return sorted(rows, key=lambda row: row[0])

    def close(self) -> None:
        if self.down_mode == "503" or len(self.receivers) > 1:
            self.receivers[-1].__exit__()


def healthy_drain(
    url: str, rows: int, conversations: int, prefix: str, timeout: float = 300.0
) -> tuple[int, float]:
    """A backlog of about ``rows`` rows committed at once in conversations named ``prefix``…, the
    relays woken; (rows, deliveries/s)."""
    per = max(1, rows // conversations)
    count = per * (rows // per)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SEED_BACKLOG, {"prefix": prefix, "per": per, "conversations": rows // per})
        seeded = time.monotonic()
        conn.execute(f"NOTIFY {OUTBOX_CHANNEL}")
        while True:
            row = conn.execute("SELECT count(*) FROM outbox WHERE status <> 'delivered'").fetchone()
            if row is not None and row[0] == 0:
                return count, count / (time.monotonic() - seeded)
            if time.monotonic() > seeded + timeout:
                raise SystemExit(
                    f"healthy drain: {row[0] if row else '?'} rows undelivered after {timeout:.0f} s"
                )
            time.sleep(0.01)


async def produce(
    base_url: str, token: str, args: argparse.Namespace, stop_at: float, out: Production
) -> None:
    """``args.rate`` start+interrupt cycles per second until ``stop_at`` (monotonic)."""
    clients: asyncio.Queue[HttpClient] = asyncio.Queue()
    for _ in range(CLIENTS):
        clients.put_nowait(HttpClient(base_url, token))
    tasks: set[asyncio.Task[None]] = set()

    async def cycle(index: int) -> None:
        client = await clients.get()
        conversation = f"{PRODUCER_PREFIX}{index % args.conversations}"
        call = tool_poster(client)
        start_id = f"{conversation}-{index}-start"
        try:
            status, body = await call(start_body(conversation, 1500, "outage", tool_call_id=start_id))
            if status != 202 or body.get("status") != "accepted":
                out.failures.append(f"start {start_id}: HTTP {status} {str(body)[:200]}")
                return
            status, body = await call(
                interrupt_body(conversation, tool_call_id=f"{conversation}-{index}-stop")
            )
            if status != 200 or body.get("status") != "interrupted":
                out.failures.append(f"interrupt {start_id}: HTTP {status} {str(body)[:200]}")
                return
            out.finished.append((start_id, conversation, time.time()))
        except (OSError, asyncio.IncompleteReadError) as exc:
            out.failures.append(f"cycle {start_id}: {exc!r}")
        finally:
            clients.put_nowait(client)

    began = time.monotonic()
    index = 0
    while (due := began + index / args.rate) < stop_at:
        pause = due - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        out.behind = max(out.behind, -pause)
        task = asyncio.create_task(cycle(index))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        index += 1
    if tasks:
        await asyncio.wait(tasks)
    while not clients.empty():
        await clients.get_nowait().close()


async def watch_circuit(url: str, stop: asyncio.Event, seen: list[tuple[float, str]]) -> None:
    """Every change of the endpoint's circuit as the bench saw it, polled every 100 ms."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            row = await (
                await conn.execute("SELECT circuit FROM delivery_endpoints WHERE endpoint = 'agent'")
            ).fetchone()
            state = str(row[0]) if row else "closed"
            if not seen or seen[-1][1] != state:
                seen.append((time.time(), state))
            await asyncio.sleep(0.1)


async def wait_settled(url: str, within: float) -> None:
    """Until no row is pending (each delivered or dead)."""
    deadline = time.monotonic() + within
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = await (
                await conn.execute("SELECT count(*) FROM outbox WHERE status = 'pending'")
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            await asyncio.sleep(0.05)
    print(f"warning: rows still pending {within:.0f} s after the producer stopped", flush=True)


async def pending_ids(url: str) -> set[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        rows = await (
            await conn.execute("SELECT event_id::text FROM outbox WHERE status = 'pending'")
        ).fetchall()
    return {str(row[0]) for row in rows}


async def run_outage(
    url: str, base_url: str, token: str, endpoint: Endpoint, args: argparse.Namespace, relay_rate: float
) -> Outage:
    outage = Outage(relay_rate=relay_rate)
    production = Production()
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_circuit(url, stop, outage.circuit))
    began = time.monotonic()
    producer = asyncio.create_task(
        produce(base_url, token, args, began + args.before + args.outage + args.after, production)
    )
    await asyncio.sleep(args.before)
    endpoint.down()
    outage.down_at = time.time()
    print(f"endpoint down ({args.down}) at {time.strftime('%H:%M:%S')}", flush=True)
    await asyncio.sleep(began + args.before + args.outage - time.monotonic())
    outage.backlog = await pending_ids(url)
    endpoint.up()
    outage.up_at = time.time()
    print(f"endpoint back at {time.strftime('%H:%M:%S')}, {len(outage.backlog):,} rows pending", flush=True)
    await producer
    await wait_settled(url, within=max(120.0, 3 * len(outage.backlog) / max(outage.relay_rate, 1.0)))
    await asyncio.sleep(0.5)  # the last circuit change, as the watcher polls
    stop.set()
    await watcher
    outage.production = production.finished
    outage.failures = production.failures
    outage.producer_behind = production.behind
    return outage


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--outage", type=float, default=600.0, help="seconds the endpoint is down (10..3600)")
    parser.add_argument("--rate", type=float, default=17.0, help="results per second (1..200)")
    parser.add_argument("--relays", type=int, default=1, help="relay processes (1..4)")
    parser.add_argument("--before", type=float, default=10.0, help="healthy seconds first (1..600)")
    parser.add_argument(
        "--after", type=float, default=30.0, help="seconds results keep coming once back (0..600)"
    )
    parser.add_argument("--conversations", type=int, default=1000, help="conversations in turn (50..10000)")
    parser.add_argument("--down", choices=("503", "refused"), default="503", help="how the endpoint is down")
    args = parser.parse_args()
    bounds = {
        "outage": (10, 3600),
        "rate": (1, 200),
        "relays": (1, 4),
        "before": (1, 600),
        "after": (0, 600),
        "conversations": (50, 10_000),
    }
    for name, (low, high) in bounds.items():
        if not low <= getattr(args, name) <= high:
            parser.error(f"--{name} must be within {low}..{high}")
    defaults = Settings.model_fields
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}; outage {args.outage:.0f} s ({args.down}), "
        f"{args.rate:g} results/s over {args.conversations} conversations, {args.relays} relay(s); "
        f"RELAY_CIRCUIT_FAILURES={defaults['relay_circuit_failures'].default}, "
        f"RELAY_CIRCUIT_PROBE_SECONDS={defaults['relay_circuit_probe_seconds'].default:g}, "
        f"RELAY_MAX_ATTEMPTS={defaults['relay_max_attempts'].default}, "
        f"RELAY_CONCURRENCY={defaults['relay_concurrency'].default}, "
        f"RELAY_BATCH_SIZE={defaults['relay_batch_size'].default} (the defaults)",
        flush=True,
    )
    with (
        tempfile.TemporaryDirectory(prefix="bench-endpoint-outage-") as tmp,
        throwaway_database("outage") as url,
        running_service(url, Path(tmp)) as service,
    ):
        endpoint = Endpoint(args.down)
        relays = Relays(url, endpoint.url, args.relays, Path(tmp))
        try:
            healthy_rows = max(1000, round(args.rate * args.outage))
            seeded, relay_rate = healthy_drain(url, healthy_rows, args.conversations, "healthy-")
            print(f"healthy drain: {seeded:,} rows at {relay_rate:,.0f} deliveries/s", flush=True)
            runner = asyncio.Runner()
            with runner:
                outage = runner.run(
                    run_outage(url, service.base_url, service.agent_token, endpoint, args, relay_rate)
                )
            # The same drain again on the same machine minutes later: how much the load moved.
            again, outage.relay_rate_after = healthy_drain(url, healthy_rows, args.conversations, "again-")
            seeded += again
            relays.stop()
        finally:
            endpoint.close()
        outage.seeded = seeded
        outage.probe_seconds = float(defaults["relay_circuit_probe_seconds"].default)
        return report(url, outage, endpoint.deliveries(), args.down == "503")


if __name__ == "__main__":
    sys.exit(main())
