"""The chaos run (``make chaos``): minutes of load while Postgres, the service and the relays are
killed and restarted, then the failover rig's checks.

```
.venv/bin/python -m rigs.chaos [--seconds 180] [--agents 8] [--event-every 20] [--relay-kill-every 3]
                                [--fail-share 0.1]
```

A Postgres of its own (``initdb`` under a temp dir, a free port; never the machine's), migrated;
one ``python -m service serve``, two ``python -m relay`` and a receiving Agent that answers a share
``--fail-share`` of the deliveries with 503. For ``--seconds`` of load from ``--agents`` Agents:

* every ``--event-every`` seconds, in turn: Postgres restarted fast (``pg_ctl restart -m fast``),
  the service SIGKILLed and started again, Postgres restarted immediate (``-m immediate``: no
  checkpoint, crash recovery at start), the service SIGKILLed again;
* every ``--relay-kill-every`` seconds one relay (in turn) SIGKILLed and started again at once.

Then every operation settles and every result is delivered, and the checks run: every acknowledged
answer and outbox row present, every operation final exactly once, every result delivered, no 500.
It prints starts, answers, 503s, restarts survived, deliveries and the duplicates the Agent saw, and
exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from harness.database import create_database
from harness.postgres import Postgres, own_postgres
from harness.processes import RelayProcess, ServiceProcess
from rigs.checks import print_figures
from rigs.stack import migrate, running_rig, stop_after

EVENTS = ("postgres restart -m fast", "service SIGKILL", "postgres restart -m immediate", "service SIGKILL")


async def _relay_killer(relays: list[RelayProcess], every: float, stop: asyncio.Event) -> None:
    turn = 0
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), every)
        except TimeoutError:
            relay = relays[turn % len(relays)]
            relay.kill()
            relay.start()
            turn += 1


async def _events(
    server: Postgres,
    service: ServiceProcess,
    every: float,
    stop: asyncio.Event,
    log: list[tuple[str, float, float]],
) -> None:
    turn = 0
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except TimeoutError:
            pass
        name = EVENTS[turn % len(EVENTS)]
        turn += 1
        began = time.monotonic()
        if name.startswith("postgres"):
            await asyncio.to_thread(server.restart, name.rsplit(" ", 1)[1])
        else:
            service.kill()
            service.start()
            await asyncio.to_thread(service.wait_ready)
        log.append((name, began, time.monotonic()))
        print(
            f"  {time.strftime('%H:%M:%S')} {name}: back after {time.monotonic() - began:.2f} s", flush=True
        )


async def chaos(server: Postgres, args: argparse.Namespace, log_dir: Path) -> int:
    create_database(server.url(), "lineup")
    url = server.url("lineup")
    await asyncio.to_thread(migrate, url, log_dir)
    events: list[tuple[str, float, float]] = []
    print(
        f"chaos: {args.seconds:.0f} s of load, {args.agents} Agents, Postgres on port {server.port}",
        flush=True,
    )
    async with running_rig(
        url, log_dir, agents=args.agents, relay_prefix="chaos-relay", failing=args.fail_share
    ) as rig:
        began = time.monotonic()
        await asyncio.gather(
            rig.agents.run(rig.stop),
            rig.probe.run(rig.stop),
            _relay_killer(rig.relays, args.relay_kill_every, rig.stop),
            _events(server, rig.service, args.event_every, rig.stop, events),
            stop_after(rig.stop, args.seconds),
        )
        loaded = time.monotonic() - began
        checks = await rig.settled_and_checked(within=180)
    probe, relays, figures = rig.probe, rig.relays, rig.figures

    print(f"\nchaos run: {loaded:.0f} s of load, {args.agents} Agents, two relays, one service process")
    survived = Counter(name for name, _, _ in events)

    def restarts() -> None:
        print(f"  503 answers               {figures.unanswered_sends['503']:>7}")
        print(f"  restarts survived         {len(events) + sum(r.kills for r in relays):>7}")
        for name in dict.fromkeys(EVENTS):
            windows = [probe.gap_between(b - 1, e + 5) for n, b, e in events if n == name]
            worst = max(windows, default=float("nan"))
            print(f"    {name:<31} {survived[name]:>3}  (longest a write waited: {worst:.2f} s)")
        print(f"    relay SIGKILL + restart        {sum(r.kills for r in relays):>3}")
        print(f"  exit codes on SIGTERM     {rig.codes}")

    print_figures(figures, rig.receiver, restarts)
    return checks.verdict(log_dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="seconds of load (180)")
    parser.add_argument("--agents", type=int, default=8, help="Agents sending load (8)")
    parser.add_argument(
        "--event-every", type=float, default=20.0, help="seconds between Postgres/service events"
    )
    parser.add_argument(
        "--relay-kill-every", type=float, default=3.0, help="seconds between relay SIGKILLs (3)"
    )
    parser.add_argument(
        "--fail-share", type=float, default=0.1, help="share of deliveries answered 503 (0.1)"
    )
    args = parser.parse_args()
    # SIGTERM (a CI timeout) as Ctrl-C: the servers, the service and the relays are stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with own_postgres() as server:
        log_dir = server.root / "logs"
        log_dir.mkdir()
        code = asyncio.run(chaos(server, args, log_dir))
        if code:
            kept = Path(f"/tmp/lineup-chaos-logs-{int(time.time())}")
            shutil.copytree(log_dir, kept)
            print(f"logs kept in {kept}")
        return code


if __name__ == "__main__":
    sys.exit(main())
