"""The failover rig (``make failover``): Patroni + etcd on this machine, load, a switchover and a crash.

```
.venv/bin/python -m rigs.failover [--agents 8] [--warmup 5] [--between 5] [--asynchronous] [--keep]
```

1. etcd and two Patroni-managed Postgres 15 (Debian's ``patroni``, ``etcd-server``, ``postgresql-15``)
   under a temp dir on free ports of 127.0.0.1: a primary and a synchronous standby
   (``synchronous_mode``; ``--asynchronous`` for an asynchronous one).
2. One ``python -m service serve`` and two ``python -m relay``, all given the same multi-host URL
   ``postgresql://postgres@h1,h2/lineup?target_session_attrs=read-write`` (the migration too), and
   a receiving Agent in this process.
3. Load: ``--agents`` Agents start Pomodoros and end them every way (interrupt, leave, close,
   deadline, a late interrupt), sending any unanswered call again under the same ``tool_call_id``;
   a probe writes every 50 ms to time the outage.
4. A switchover (Patroni's REST API), then — once the old primary streams again as the synchronous
   standby — a failover: SIGKILL of the primary's postmaster (``primary_start_timeout: 0``, so
   Patroni fails over at once rather than restarting it in place).
5. The load stops, every operation settles and every result is delivered; then the checks, read
   from the new primary through the same URL.

It prints calls answered, calls that needed a retry, seconds unavailable per event, and the checks;
it exits 1 when a check fails. Nothing of the machine's own Postgres is touched.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time

from harness.database import create_database
from harness.postgres import wait_for
from rigs.checks import print_figures
from rigs.patroni import PatroniCluster, patroni_cluster
from rigs.stack import migrate, running_rig


async def _new_leader(cluster: PatroniCluster, old: str) -> str:
    def changed() -> str | None:
        leader = cluster.leader()
        return leader if leader not in (None, old) else None

    return await asyncio.to_thread(wait_for, "a new leader", changed, 90, 0.05)


async def failover(cluster: PatroniCluster, args: argparse.Namespace) -> int:
    log_dir = cluster.root
    await asyncio.to_thread(create_database, cluster.url(), "lineup")
    url = cluster.url("lineup")
    standby = "a synchronous" if cluster.synchronous else "an asynchronous"
    print(f"cluster {cluster.scope}: a primary and {standby} standby; every process gets {url}")
    await asyncio.to_thread(migrate, url, log_dir)

    events: list[tuple[str, float, float, str]] = []  # name, began, new primary writable (by Patroni), detail
    async with running_rig(url, log_dir, agents=args.agents, relay_prefix="rig-relay") as rig:
        load = asyncio.gather(rig.agents.run(rig.stop), rig.probe.run(rig.stop))
        await asyncio.sleep(args.warmup)

        began = time.monotonic()
        old, new = await asyncio.to_thread(cluster.switchover)
        events.append(("switchover", began, time.monotonic(), f"{old} -> {new}"))
        print(f"switchover {old} -> {new} in {time.monotonic() - began:.1f} s (Patroni's answer)")
        await asyncio.to_thread(cluster.wait_healthy, 180)
        await asyncio.sleep(args.between)

        began = time.monotonic()
        old, pid = cluster.crash_primary()
        new = await _new_leader(cluster, old)
        events.append(("failover (SIGKILL of the primary)", began, time.monotonic(), f"{old} -> {new}"))
        print(
            f"SIGKILL of {old}'s postmaster (pid {pid}): {new} leads after {time.monotonic() - began:.1f} s"
        )
        await asyncio.to_thread(cluster.wait_healthy, 180)
        await asyncio.sleep(args.between)

        rig.stop.set()
        await load
        checks = await rig.settled_and_checked(within=120)
        exited = [
            p for p in (rig.service, *rig.relays) if p.process is not None and p.process.poll() is not None
        ]
        checks.add(
            "the service and both relays rode both events without a restart",
            not exited,
            f"exited: {[p.log.name for p in exited]}",
        )
    probe = rig.probe

    print(f"\nfailover rig: {args.agents} Agents, two relays, one service process, the same multi-host URL")

    def outage() -> None:
        ends = [moment for _, moment, _, _ in events[1:]] + [float("inf")]
        for (name, moment, promoted, detail), end in zip(events, ends, strict=True):
            first_after = next((t for t in probe.successes if t >= promoted), float("nan"))
            print(f"  {name} {detail}:")
            print(
                f"    seconds unavailable     {probe.gap_between(moment - 1, end):7.2f}  (the longest a write"
                f" waited); first write {first_after - promoted:+.2f} s after Patroni named the new leader"
            )
        print(
            f"  probe writes            {len(probe.successes):>8}  (sends by outcome: {dict(probe.statuses)})"
        )
        print(f"  exit codes on SIGTERM   {rig.codes}")

    print_figures(rig.figures, rig.receiver, outage)
    return checks.verdict(log_dir, "; --keep keeps them")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=8, help="Agents sending load (8)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of load before the switchover (5)")
    parser.add_argument("--between", type=float, default=5.0, help="seconds of load after each event (5)")
    parser.add_argument(
        "--asynchronous", action="store_true", help="an asynchronous standby (shows what it loses)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the cluster's files and logs")
    args = parser.parse_args()
    # SIGTERM (a CI timeout) as Ctrl-C: the servers, the service and the relays are stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with patroni_cluster(synchronous=not args.asynchronous, keep=args.keep) as cluster:
        return asyncio.run(failover(cluster, args))


if __name__ == "__main__":
    sys.exit(main())
