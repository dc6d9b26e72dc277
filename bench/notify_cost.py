"""What a NOTIFY inside a deciding transaction would cost the path that commits results, with pgbench.

    .venv/bin/python -m bench.notify_cost [--seconds 5] [--clients 1,8,32] [--rounds 2]

Each pgbench transaction is the outbox half of a deciding transaction: take the conversation's next
sequence under its workspace row lock and insert one outbox row (bench.seeds.QUEUE_ONE), then commit.
The same statement runs with a ``pg_notify('lineup_outbox', '')`` in it (what the outbox trigger
did before migration 0005; a listener is connected, as relays are) and without, alternating, in one
throwaway database on 127.0.0.1. NOTIFY takes a database-wide lock from pre-commit until the end of
the commit (WAL flush included), so commits that notify are serialised; this prints how much that
costs at each concurrency — the reason the service sends its wake-ups after commit, coalesced.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psycopg

from bench.seeds import QUEUE_ONE
from harness.database import throwaway_database

CONVERSATIONS = 10_000
SCRIPT = "\\set c random(1, {conversations})\n{statement};\n"


def pgbench(url: str, script: Path, clients: int, seconds: float) -> float:
    done = subprocess.run(
        ["pgbench", "-n", "-f", str(script), "-c", str(clients), "-j", str(min(clients, 2)),
         "-T", str(int(seconds)), "-M", "prepared", url],
        capture_output=True, text=True, check=True, timeout=seconds + 60,
    )  # fmt: skip
    match = re.search(r"tps = ([0-9.]+)", done.stdout)
    if match is None:
        raise SystemExit(f"pgbench printed no tps:\n{done.stdout}\n{done.stderr}")
    return float(match.group(1))


class Listener:
    """A relay's LISTEN connection, draining notifications for the whole run."""

    def __init__(self, url: str) -> None:
        self.received = 0
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute("LISTEN lineup_outbox")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            for _ in self._conn.notifies(timeout=0.2):
                self.received += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()


def reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE outbox_attempts, outbox")
        conn.execute("CHECKPOINT")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="per pgbench run")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--rounds", type=int, default=2, help="on/off pairs per client count")
    args = parser.parse_args()
    if shutil.which("pgbench") is None:
        raise SystemExit("pgbench is not on PATH (apt-get install postgresql-client)")
    statement = " ".join(re.sub(r"%\(conversation_id\)s", "'conv-' || :c", QUEUE_ONE).split())
    notifying = statement + " RETURNING pg_notify('lineup_outbox', '')"
    results: dict[int, dict[bool, list[float]]] = {}
    with throwaway_database("notify") as url, tempfile.TemporaryDirectory() as scratch:
        scripts = {True: Path(scratch) / "queue_one_notify.sql", False: Path(scratch) / "queue_one.sql"}
        scripts[True].write_text(SCRIPT.format(conversations=CONVERSATIONS, statement=notifying))
        scripts[False].write_text(SCRIPT.format(conversations=CONVERSATIONS, statement=statement))
        listener = Listener(url)
        try:
            for clients in (int(c) for c in args.clients.split(",")):
                results[clients] = {True: [], False: []}
                for round_ in range(args.rounds):
                    # Alternate which goes first so that drift (table growth, checkpoints) evens out.
                    for enabled in (True, False) if round_ % 2 == 0 else (False, True):
                        reset(url)
                        results[clients][enabled].append(
                            pgbench(url, scripts[enabled], clients, args.seconds)
                        )
        finally:
            listener.close()
    print(f"insert path: one outbox row per transaction, {args.seconds:g}s per run, best of {args.rounds}")
    print(f"{'clients':>7}  {'with NOTIFY tps':>15}  {'without tps':>11}  {'ratio':>6}  cost of the NOTIFY")
    for clients, by_mode in results.items():
        with_notify, without = max(by_mode[True]), max(by_mode[False])
        ratio = with_notify / without
        cost = (1 - ratio) * 100
        print(f"{clients:>7}  {with_notify:>15,.0f}  {without:>11,.0f}  {ratio:>6.3f}  {cost:.1f}% fewer")
    print(f"notifications received by the listener: {listener.received:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
