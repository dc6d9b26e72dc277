"""The clocks rig (``make clocks``): ``serve`` and both relays under libfaketime — an hour ahead, an
hour behind, and drifting — under load, against a Postgres whose clock is right; then the checks.

```
.venv/bin/python -m rigs.clocks [--seconds 20] [--agents 4] [--failing 0.2] [--clock +1h ...] [--keep]
```

A Postgres of its own (``initdb`` under a temp dir, a free port), a database per clock, migrated.
For each clock, one ``python -m service serve`` and two ``python -m relay`` run with
``LD_PRELOAD=libfaketime`` and ``FAKETIME`` set to it (``harness.faketime``): ``+1h`` and ``-1h``
shift their wall clock only; ``+0 x1.2`` makes their clocks — wall and monotonic, as a drifting
oscillator would — run 20 % fast, so the host drifts from the database by 0.2 s every second. The
receiving Agent (in this process, on the right clock) checks each webhook's signature and its
timestamp as a Standard Webhooks receiver does (five minutes' tolerance), and answers a share
``--failing`` of the deliveries 503, so rows are retried under the relays' backoff. ``--agents``
Agents start Pomodoros of 1-3 s and end them every way there is, the deadline among them, for
``--seconds``.

The database's clock decides (docs/design.md, "The clocks that matter"), so whatever the hosts'
clocks say, per clock:

* the usual checks (``rigs/checks.py``): every answer recorded, one operation per start, each final
  once, every result delivered and signed (no webhook refused), no 500;
* no period completed before its ``ends_at`` and none later than the docs promise for a deadline the
  replica opened itself (``SWEEPER_POLL_SECONDS``, 1 s, plus a loaded machine's margin, 1 s);
* every webhook stamped within 5 s of the Agent's clock (the database's, not the host's);
* the backoff unharmed: each retry of a row began no sooner than the backoff's floor after the
  attempt before it ended (half the ceiling, ``relay.backoff``) and no later than its ceiling plus
  the relays' poll and a margin — measured in the attempts' times, which are the database's;
* the leases unharmed: no result accepted twice (a lease a skewed clock cut short would let the
  other relay deliver a row again), first acceptances in each conversation's order;
* the hosts' offsets reported: ``lineup_clock_offset_seconds`` of ``serve`` near the shift (its
  ``clock_skew`` line past 5 s), and the relays' ``relay_clock_skew`` lines.

Exits 1 when a check fails; prints each clock's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import shutil
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx
import psycopg
from psycopg.rows import dict_row

from harness.database import create_database
from harness.faketime import faked, library
from harness.postgres import Postgres, own_postgres
from relay.backoff import ceiling
from rigs.checks import Checks, print_figures
from rigs.stack import BACKOFF_BASE, BACKOFF_MAX, Rig, migrate, running_rig, stop_after
from service.settings import Settings

#: Each clock: FAKETIME, whether the monotonic clock moves too, the offset expected at the end
#: (seconds the host is ahead; None: it grows while the run lasts).
CLOCKS: dict[str, tuple[str, bool, float | None]] = {
    "an hour ahead": ("+1h", False, 3600.0),
    "an hour behind": ("-1h", False, -3600.0),
    "drifting 20 % fast": ("+0 x1.2", True, None),
}
MARGIN = 1.0  # what a machine of 2 shared cores adds to a bound, seconds
STAMP_TOLERANCE = (
    5.0  # a webhook's timestamp this far from the Agent's clock is the host's, not the database's
)
POLL = 1.0  # RELAY_POLL_INTERVAL_SECONDS's default: how late a due retry may be claimed


def lateness_bound() -> float:
    """Seconds a deadline opened by this replica may settle after its ends_at: SWEEPER_POLL_SECONDS
    (the docs' bound; a replica's own deadlines are due to settle at once) plus the margin."""
    return Settings().sweeper_poll_seconds + MARGIN


def deadline_checks(url: str, checks: Checks) -> str:
    bound = lateness_bound()
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        late = conn.execute(
            "SELECT count(*) AS n, count(*) FILTER (WHERE finalized_at < ends_at) AS early,"
            " coalesce(max(lateness_ms), 0) AS worst,"
            " coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY lateness_ms), 0) AS p50"
            " FROM operations WHERE state = 'completed'"
        ).fetchone()
    assert late is not None
    checks.add(
        f"no period completed before its ends_at, none more than {bound:.0f} s after it",
        late["n"] > 0 and late["early"] == 0 and late["worst"] <= bound * 1000,
        f"{late['n']} completed; early {late['early']}; lateness p50 {late['p50']:.0f} ms,"
        f" worst {late['worst']} ms",
    )
    return f"{late['n']} deadlines, lateness p50 {late['p50']:.0f} ms, worst {late['worst']} ms"


def backoff_checks(url: str, checks: Checks) -> str:
    """Each retry's start against the attempt before it, in the database's times."""
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT event_id, attempt, started_at, duration_ms FROM outbox_attempts"
            " ORDER BY event_id, attempt"
        ).fetchall()
    early: list[str] = []
    late: list[str] = []
    gaps = 0
    for _, attempts in itertools.groupby(rows, key=lambda row: row["event_id"]):
        for before, after in itertools.pairwise(attempts):
            ended = before["started_at"].timestamp() + before["duration_ms"] / 1000
            gap = after["started_at"].timestamp() - ended
            top = ceiling(before["attempt"], BACKOFF_BASE, BACKOFF_MAX)
            gaps += 1
            if gap < top / 2 - 0.1:
                early.append(
                    f"attempt {after['attempt']} {gap:.2f} s after {before['attempt']} (floor {top / 2:.2f})"
                )
            elif gap > top + POLL + MARGIN:
                late.append(
                    f"attempt {after['attempt']} {gap:.2f} s after {before['attempt']} (ceiling {top:.2f})"
                )
    checks.add(
        "the relays' backoff unharmed: each retry ceiling / 2 to ceiling + poll + margin after the last",
        gaps > 0 and not early and not late,
        f"{gaps} retries; too soon {early[:2]}, too late {late[:2]}",
    )
    return f"{gaps} retries, all within the backoff's window" if not early and not late else "backoff broken"


def delivery_checks(rig: Rig, url: str, checks: Checks) -> None:
    accepted = rig.receiver.accepted()
    stamps = [abs(int(d.headers["webhook-timestamp"]) - d.arrived_at) for d in accepted]
    worst = max(stamps, default=0.0)
    checks.add(
        f"every webhook stamped within {STAMP_TOLERANCE:.0f} s of the Agent's clock (the database's time)",
        bool(stamps) and worst < STAMP_TOLERANCE,
        f"{len(stamps)} accepted; the farthest {worst:.1f} s",
    )
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT event_id::text AS event_id, conversation_id FROM outbox ORDER BY created_at, event_id"
        ).fetchall()
    per_event = rig.receiver.accepted_per_event()
    doubled = [event for event, times in per_event.items() if times > 1]
    first: dict[str, float] = {}
    for delivery in accepted:
        first.setdefault(delivery.event_id, delivery.arrived_at)
    by_conversation: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_conversation[row["conversation_id"]].append(row["event_id"])
    out_of_order = sum(
        1
        for events in by_conversation.values()
        for a, b in itertools.pairwise([first.get(e, float("inf")) for e in events])
        if b < a
    )
    checks.add(
        "the leases unharmed: no result accepted twice, each conversation's in order",
        not doubled and out_of_order == 0,
        f"{len(per_event)} results; accepted twice {len(doubled)}, out of order {out_of_order}",
    )


async def offset_of(rig: Rig) -> float | None:
    """``serve``'s ``lineup_clock_offset_seconds`` now."""
    async with httpx.AsyncClient(timeout=5) as http:
        text = (await http.get(f"{rig.service.base_url}/metrics")).text
    found = re.search(r"^lineup_clock_offset_seconds (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def offset_checks(rig: Rig, offset: float | None, expected: float | None, checks: Checks) -> None:
    service_log = rig.service.log.read_text(errors="replace")
    relay_logs = [relay.log.read_text(errors="replace") for relay in rig.relays]
    if expected is None:  # drifting: ahead, and growing
        ok = offset is not None and offset > 0
        said = f"serve's offset {offset} s (ahead, growing 0.2 s a second)"
    else:
        ok = (
            offset is not None
            and abs(offset - expected) < STAMP_TOLERANCE
            and '"clock_skew"' in service_log
            and all('"relay_clock_skew"' in log for log in relay_logs)
        )
        skew_logged = '"clock_skew"' in service_log
        relays_logged = sum('"relay_clock_skew"' in log for log in relay_logs)
        said = (
            f"serve's lineup_clock_offset_seconds {offset}; clock_skew logged {skew_logged};"
            f" relay_clock_skew logged by {relays_logged} of 2"
        )
    checks.add("the hosts' offsets from the database's clock reported", ok, said)


async def one_clock(server: Postgres, name: str, args: argparse.Namespace, log_dir: Path, n: int) -> Checks:
    spec, monotonic, expected = CLOCKS[name]
    database = f"lineup_clock_{n}"
    await asyncio.to_thread(create_database, server.url(), database)
    url = server.url(database)
    await asyncio.to_thread(migrate, url, log_dir)
    figures: list[str] = []
    clock_logs = log_dir / f"clock-{n}"
    clock_logs.mkdir()
    async with running_rig(
        url,
        clock_logs,
        agents=args.agents,
        relay_prefix=f"clock{n}-relay",
        failing=args.failing,
        env=faked(spec, monotonic=monotonic),
    ) as rig:
        began = time.monotonic()
        await asyncio.gather(rig.agents.run(rig.stop), stop_after(rig.stop, args.seconds))
        offset = await offset_of(rig)
        checks = await rig.settled_and_checked(within=120)
        figures.append(f"load {time.monotonic() - began:.0f} s, settled")
    checks.add(
        "serve and both relays ran through and stopped cleanly",
        all(code in (0, -signal.SIGTERM) for code in rig.codes),
        str(rig.codes),
    )
    figures.append(await asyncio.to_thread(deadline_checks, url, checks))
    figures.append(await asyncio.to_thread(backoff_checks, url, checks))
    await asyncio.to_thread(delivery_checks, rig, url, checks)
    offset_checks(rig, offset, expected, checks)
    figures.append(f"serve's clock offset {offset} s")
    print(f"\n{name} (FAKETIME={spec!r}{', monotonic too' if monotonic else ''}):")
    print_figures(rig.figures, rig.receiver)
    for line in figures:
        print(f"  {line}")
    return checks


async def clocks(server: Postgres, args: argparse.Namespace, log_dir: Path) -> int:
    every = Checks()
    for n, name in enumerate(args.clock or list(CLOCKS)):
        checks = await one_clock(server, name, args, log_dir, n)
        every.results.extend((f"{name}: {check}", ok, detail) for check, ok, detail in checks.results)
    return every.verdict(log_dir, "; --keep keeps them")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of load per clock (20)")
    parser.add_argument("--agents", type=int, default=4, help="Agents (4)")
    parser.add_argument("--failing", type=float, default=0.2, help="share of deliveries answered 503 (0.2)")
    parser.add_argument("--clock", action="append", choices=list(CLOCKS), help="only this clock (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the logs")
    args = parser.parse_args()
    if library() is None:
        print("clocks: needs libfaketime (apt-get install faketime)")
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    began = time.monotonic()
    with own_postgres(prefix="lineup-clocks-") as server:
        log_dir = server.root / "logs"
        log_dir.mkdir()
        code = asyncio.run(clocks(server, args, log_dir))
        if code or args.keep:
            kept = Path(f"/tmp/clocks-logs-{int(time.time())}")
            shutil.copytree(log_dir, kept)
            print(f"logs kept in {kept}")
    print(f"clocks: {time.monotonic() - began:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
