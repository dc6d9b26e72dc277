"""The pooler rig (``make pooler``): the service and the relays behind Debian's PgBouncer (1.18, no
prepared-statement support), in transaction mode or in session mode, under load, with one service
replica SIGKILLed and started again; then the checks.

```
.venv/bin/python -m rigs.pooler [--mode transaction|session] [--seconds 60] [--agents 6] [--kill-at 20]
```

A Postgres of its own (``initdb`` under a temp dir, a free port; never the machine's), migrated
directly; PgBouncer in front of it (``pool_mode`` = ``--mode``; 20 server connections in transaction
mode, 80 in session mode, where each client connection holds one); two
``python -m service serve`` replicas and two ``python -m relay`` through it — in transaction mode
with ``DB_PREPARED_STATEMENTS=off`` and no ``LISTEN_DATABASE_URL``, so the processes poll where
they would LISTEN; in session mode as they are. ``--agents`` Agents per replica start Pomodoros and
end them every way there is (interrupt, leave, close, the deadline falling due), beside questions
(``interact.ask`` answered by the Host), MCP ``tools/call`` and a Host event stream
(``rigs.faces_load``); at ``--kill-at`` s
replica 1 is SIGKILLed and started again. Throughout, each replica's ``/metrics`` is read every
second: its deadline sweeper must keep coming round (``lineup_background_loop_last_round_timestamp_seconds``).

Checks: every acknowledged answer recorded, every operation final exactly once, every result
delivered once per conversation in order, no 5xx, every deadline settled within the lateness the
docs promise (``SWEEPER_POLL_SECONDS``, 1 s, for a deadline another replica opened; ``--lateness``
adds the margin of a loaded machine), and the sweepers alive. Exits 1 when a check fails.

Which URL each process gets is decided in one place (``Urls``): ``migrate`` as the schema's owner,
the replicas as the runtime role and the relays as the relay role (made by ``roles.ensure`` as an
operator's ``python -m service roles`` makes them), the checks as the admin.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import re
import shutil
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from psycopg.rows import dict_row

from harness.database import create_database, with_user
from harness.pgbouncer import PgBouncer, available, running_pgbouncer
from harness.postgres import own_postgres
from harness.processes import RelayProcess, ServiceProcess
from harness.receiver import Receiver
from rigs.checks import Checks, check, print_figures, settle
from rigs.faces_load import FacesFigures, OtherFaces
from rigs.load import Agents, Figures, Probe
from rigs.stack import migrate
from service.db import roles
from service.manifests import registry_of
from service.settings import Settings

WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"pooler-rig-secret-0123456789ab").decode()
SWEEPER_POLL_SECONDS = 1.0
# PgBouncer's server connections (default_pool_size and max_db_connections). Transaction mode shares
# 20 among every client connection; session mode gives each client connection one of its own for
# as long as it is open, so it needs as many as the processes hold (two replicas x (10 + 2 + 2
# for the start-up probe) + two relays x (4 + 1 + 2)), and a killed replica's until PgBouncer sees
# them closed: with 20, the restarted replica waits for a server connection forever.
SERVER_CONNECTIONS = {"transaction": 20, "session": 80}
LOOP_ROUND = re.compile(
    r'^lineup_background_loop_last_round_timestamp_seconds\{loop="deadline-sweeper"\} (\S+)$', re.M
)


@dataclass(frozen=True)
class Urls:
    """The one place a process's database URL is chosen: ``migrate`` goes to Postgres itself as the
    schema's owner, the service replicas and the relays through the pooler, each on its
    least-privilege role (``python -m service roles``), and the checks directly as the admin."""

    direct: str
    pooled: str
    names: roles.Names = field(default_factory=roles.Names)

    def migrate(self) -> str:
        return with_user(self.direct, self.names.owner)

    def service(self) -> str:
        return with_user(self.pooled, self.names.runtime)

    def relay(self) -> str:
        return with_user(self.pooled, self.names.relay)

    def checks(self) -> str:
        return self.direct


def settings_for(mode: str) -> dict[str, str]:
    """What every process behind this pooler is told: prepares off in transaction mode."""
    return {"DB_PREPARED_STATEMENTS": "off"} if mode == "transaction" else {}


@dataclass
class SweeperWatch:
    """Each replica's sweeper seen from its /metrics every second: the longest it went without a round."""

    services: list[ServiceProcess]
    worst: dict[int, float] = field(default_factory=dict)
    samples: int = 0
    advanced: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    async def run(self, stop: asyncio.Event, paused: set[int]) -> None:
        last: dict[int, float] = {}
        async with httpx.AsyncClient(timeout=2.0) as http:
            while not stop.is_set():
                now = time.time()
                for n, service in enumerate(self.services):
                    if n in paused:
                        last.pop(n, None)
                        continue
                    with contextlib.suppress(httpx.HTTPError):
                        text = (await http.get(f"{service.base_url}/metrics")).text
                        if match := LOOP_ROUND.search(text):
                            seen = float(match.group(1))
                            self.samples += 1
                            if last.get(n) is not None and seen > last[n]:
                                self.advanced[n] += 1
                            last[n] = seen
                            self.worst[n] = max(self.worst.get(n, 0.0), now - seen)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)


class Balancer:
    """Round-robin over the replicas on one port of 127.0.0.1, as a load balancer would: a connection
    goes to the next replica that accepts it, so a killed replica's Agents go on with the other."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self._turn = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(len(self.ports)):
            port = self.ports[self._turn % len(self.ports)]
            self._turn += 1
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            for source, sink in ((reader, up_writer), (up_reader, writer)):
                task = asyncio.create_task(_pipe(source, sink))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return
        writer.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            sink.close()


async def _kill_and_restart(service: ServiceProcess, at: float, paused: set[int], n: int) -> float:
    await asyncio.sleep(at)
    paused.add(n)
    began = time.monotonic()
    service.kill()
    service.start()
    await asyncio.to_thread(service.wait_ready, 300)
    paused.discard(n)
    took = time.monotonic() - began
    print(
        f"  {time.strftime('%H:%M:%S')} replica {n + 1} SIGKILLed: ready again after {took:.1f} s", flush=True
    )
    return took


def _delivery_checks(url: str, receiver: Receiver, lateness_ms: float, checks: Checks) -> None:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT event_id::text AS event_id, conversation_id, created_at FROM outbox ORDER BY created_at"
        ).fetchall()
        late = conn.execute(
            "SELECT count(*) AS n, coalesce(max(lateness_ms), 0) AS worst,"
            " coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY lateness_ms), 0) AS p99"
            " FROM operations WHERE state = 'completed' AND lateness_ms IS NOT NULL"
        ).fetchone()
    assert late is not None
    per_event = receiver.accepted_per_event()
    doubled = [event for event, times in per_event.items() if times > 1]
    # A result is delivered when the Agent accepted it; repeats after an accepted one are doubles.
    first_accepted: dict[str, float] = {}
    for delivery in receiver.accepted():
        first_accepted.setdefault(delivery.event_id, delivery.arrived_at)
    out_of_order = 0
    by_conversation: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_conversation[row["conversation_id"]].append(row["event_id"])
    for events in by_conversation.values():
        times = [first_accepted.get(event, float("inf")) for event in events]
        out_of_order += sum(1 for a, b in itertools.pairwise(times) if b < a)
    checks.add(
        "every result delivered once, in per-conversation order",
        not doubled and out_of_order == 0,
        f"{len(per_event)} results in {len(by_conversation)} conversations; accepted twice {len(doubled)},"
        f" out of order {out_of_order}",
    )
    checks.add(
        f"every deadline settled within {lateness_ms:.0f} ms (SWEEPER_POLL_SECONDS + margin)",
        float(late["worst"]) <= lateness_ms,
        f"{late['n']} deadlines; p99 {float(late['p99']):.0f} ms, worst {late['worst']} ms",
    )


async def run_rig(args: argparse.Namespace, urls: Urls, bouncer: PgBouncer, log_dir: Path) -> int:
    env = settings_for(args.mode)
    first = ServiceProcess(
        urls.service(), log_dir, env={**env, "SWEEPER_POLL_SECONDS": str(SWEEPER_POLL_SECONDS)}
    )
    # The same tokens on both replicas: the Agents reach either through the balancer.
    same = {name: first.env[name] for name in ("AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN")}
    services = [first, ServiceProcess(urls.service(), log_dir, env={**first.env, **same})]
    figures = Figures()
    checks = Checks()
    stop = asyncio.Event()
    paused: set[int] = set()
    balancer: Balancer | None = None
    async with Receiver([WEBHOOK_SECRET]) as receiver:
        relays = [
            RelayProcess(
                urls.relay(),
                receiver.url,
                WEBHOOK_SECRET,
                log_dir / f"pooler-relay-{n}.log",
                {"RELAY_ID": f"pooler-relay-{n}", "RELAY_BACKOFF_BASE_SECONDS": "0.2", **env},
            )
            for n in (1, 2)
        ]
        try:
            # Both at once, however long a busy machine takes to start them.
            for service in services:
                service.start()
            await asyncio.gather(*(asyncio.to_thread(s.wait_ready, 300) for s in services))
            for relay in relays:
                relay.start()
            balancer = Balancer([s.port for s in services])
            front = f"http://127.0.0.1:{await balancer.start()}"
            first = services[0]
            agents = [Agents(front, first.agent_token, first.host_token, figures, count=2 * args.agents)]
            probe = Probe(front, first.agent_token, interval=0.1)
            faces = OtherFaces(front, first.agent_token, first.host_token, figures)
            watch = SweeperWatch(services)

            async def stop_after() -> None:
                await asyncio.sleep(args.seconds)
                stop.set()

            began = time.monotonic()
            results = await asyncio.gather(
                *(a.run(stop) for a in agents),
                probe.run(stop),
                watch.run(stop, paused),
                _kill_and_restart(services[0], args.kill_at, paused, 0),
                stop_after(),
                faces.run(stop),
            )
            restart = results[len(agents) + 2]
            loaded = time.monotonic() - began
            left = await settle(urls.checks(), within=120)
            checks = await asyncio.to_thread(check, urls.checks(), figures, receiver, probe.answers)
            checks.add(
                "everything settled and delivered within 120 s",
                left == {"focusing": 0, "undelivered": 0},
                str(left),
            )
            await asyncio.to_thread(_delivery_checks, urls.checks(), receiver, args.lateness, checks)
            _faces_checks(faces.faces, checks)
            alive = all(watch.advanced[n] > 0 for n in range(len(services)))
            worst = max(watch.worst.values(), default=float("inf"))
            checks.add(
                "each replica's sweeper came round throughout (its metric advanced)",
                alive and worst <= 5 * SWEEPER_POLL_SECONDS + 2,
                f"{watch.samples} samples; advanced {dict(watch.advanced)},"
                f" longest without a round {worst:.1f} s",
            )
        finally:
            stop.set()
            codes = await asyncio.to_thread(lambda: [p.stop() for p in (*relays, *services)])
            if balancer is not None:
                await balancer.close()
    logs = "".join(p.log.read_text(errors="replace") for p in (*relays, *services) if p.log.exists())
    prepared_errors = logs.count("prepared statement")
    checks.add("no prepared-statement error in any log", prepared_errors == 0, f"{prepared_errors} lines")
    checks.add("every process exited 0 on SIGTERM", all(code == 0 for code in codes), str(codes))
    print(
        f"\npooler run ({args.mode} mode): {loaded:.0f} s of load, {2 * args.agents} Agents on two replicas,"
        f" two relays, PgBouncer {bouncer.mode} on port {bouncer.port}; replica 1 back after {restart:.1f} s"
    )
    print_figures(figures, receiver)
    return checks.verdict(log_dir)


def _faces_checks(faces: FacesFigures, checks: Checks) -> None:
    checks.add(
        "interact.ask through the pooler: every question asked was answered by the Host",
        faces.asked > 0 and faces.answered == faces.asked,
        f"{faces.asked} asked, {faces.answered} answered",
    )
    checks.add(
        "MCP tools/call through the pooler: every call answered, none an error",
        faces.mcp_calls > 0 and not faces.mcp_failures,
        f"{faces.mcp_calls} calls; failures {faces.mcp_failures[:3]}",
    )
    checks.add(
        "the Host's event stream through the pooler carried the questions' changes",
        faces.events > 0 and not faces.stream_errors,
        f"{faces.events} events over {faces.stream_opens} stream(s); errors {faces.stream_errors[:3]}",
    )


@contextlib.contextmanager
def _logs_kept_on_failure(log_dir: Path, code: list[int]) -> Iterator[None]:
    try:
        yield
    finally:
        if code and code[0]:
            kept = Path(f"/tmp/lineup-pooler-logs-{int(time.time())}")
            shutil.copytree(log_dir, kept, dirs_exist_ok=True)
            print(f"logs kept in {kept}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("transaction", "session"), default="transaction")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of load (60)")
    parser.add_argument("--agents", type=int, default=6, help="Agents per replica (6)")
    parser.add_argument("--kill-at", type=float, default=20.0, help="when replica 1 is SIGKILLed (20 s)")
    parser.add_argument(
        "--lateness", type=float, default=2000.0, help="worst deadline lateness allowed, ms (2000)"
    )
    args = parser.parse_args()
    if not available():
        print("needs pgbouncer (apt-get install pgbouncer)")
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    code: list[int] = []
    with own_postgres(prefix="lineup-pooler-") as server:
        log_dir = server.root / "logs"
        log_dir.mkdir()
        create_database(server.url(), "lineup")
        direct = server.url("lineup")
        names = roles.Names()
        with psycopg.connect(direct) as conn:  # the admin makes the roles, as an operator would
            roles.ensure(conn, names, registry_of(Settings()))
        migrate(Urls(direct, direct, names).migrate(), log_dir)
        with (
            _logs_kept_on_failure(log_dir, code),
            running_pgbouncer(
                direct,
                mode=args.mode,
                pool_size=SERVER_CONNECTIONS[args.mode],
                log_dir=log_dir,
                users=(names.runtime, names.relay),
            ) as bouncer,
        ):
            print(
                f"pooler: PgBouncer ({args.mode}) on {bouncer.port} in front of Postgres on {server.port}",
                flush=True,
            )
            urls = Urls(direct, bouncer.url(direct), names)
            code.append(asyncio.run(run_rig(args, urls, bouncer, log_dir)))
    return code[0]


if __name__ == "__main__":
    sys.exit(main())
