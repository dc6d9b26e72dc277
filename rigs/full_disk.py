"""The full-disk rig (``make full-disk``): Postgres' WAL disk fills under load, then space returns.

```
.venv/bin/python -m rigs.full_disk [--seconds 40] [--agents 4] [--wal-mb 192] [--full-for 12]
```

A Postgres of its own whose ``pg_wal`` lives on a tmpfs of ``--wal-mb`` MB (mounted by the rig; it
needs root), migrated; one ``python -m service serve``, two ``python -m relay`` and a receiving
Agent, under load from ``--agents`` Agents and a probe. A few seconds in, the rig fills the WAL disk
(a filler file, then a bulk write of its own): Postgres' next WAL write fails with ENOSPC and it
stops (a PANIC, as Postgres does). For ``--full-for`` seconds the disk stays full and the rig, like
a supervisor, keeps trying to start Postgres; then it removes the filler and Postgres starts.

The checks: while the disk is full every tool call answers ``503`` with the contract's error body
(never a 500, never a 2xx that is then lost), ``/readyz`` answers 503, and each relay spends little
CPU (it backs off, it does not spin); after space returns ``/readyz`` is 200 again by itself (no
process of ours restarted), and the usual checks hold: every acknowledged answer and outbox row
present, every operation final exactly once, every result delivered, no 500. Exits 1 when a check
fails, and skips (exit 0, saying so) where it cannot mount a tmpfs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg

from harness.database import create_database
from harness.postgres import PG_BIN, Postgres, run_command, workdir
from rigs.checks import Checks, print_figures
from rigs.stack import Rig, migrate, running_rig, stop_after

#: A relay backing off spends at most this share of a core while the database is gone.
RELAY_CPU_WHILE_DOWN = 0.25


@contextlib.contextmanager
def wal_on_tmpfs(megabytes: int) -> Iterator[tuple[Postgres, Path]]:
    """A Postgres (not started) whose WAL directory is on a tmpfs of its own; both removed after."""
    root = workdir("lineup-full-disk-")
    wal = root / "wal"
    wal.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m,mode=0700", "tmpfs", str(wal)], check=True
    )
    try:
        shutil.chown(wal, "postgres", "postgres")
        server = Postgres(root)
        run_command(
            [
                *(str(PG_BIN / "initdb"), "-D", str(server.data), "-X", str(wal / "pg_wal")),
                *("-U", "postgres", "-A", "trust", "-E", "UTF8"),
            ],
            server.log,
        )
        with (server.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {server.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{root}'\nmax_connections = 200\nshared_buffers = 128MB\n"
                # Segments are not recycled by a checkpoint before the disk fills.
                "max_wal_size = 4GB\nmin_wal_size = 32MB\ncheckpoint_timeout = 1h\n"
            )
        yield server, wal
    finally:
        with contextlib.suppress(RuntimeError):
            server.stop()
        subprocess.run(["umount", "-l", str(wal)], check=False)
        shutil.rmtree(root, ignore_errors=True)


def postgres_running(server: Postgres) -> bool:
    """``pg_ctl status``, as the servers' user (pg_ctl refuses root)."""
    try:
        run_command([str(PG_BIN / "pg_ctl"), "-D", str(server.data), "status"], server.log)
    except RuntimeError:
        return False
    return True


def fill(wal: Path, url: str) -> None:
    """The WAL disk nearly full with a filler file, then a bulk write that needs more than is left."""
    free = shutil.disk_usage(wal).free
    with (wal / "filler").open("wb") as handle:
        handle.truncate(0)
        chunk = b"\0" * (1 << 20)
        for _ in range(max(0, free // (1 << 20) - 24)):
            handle.write(chunk)
    with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS disk_hog (filler text)")
        for _ in range(64):
            conn.execute(
                "INSERT INTO disk_hog SELECT repeat(md5(g::text), 64) FROM generate_series(1, 20000) g"
            )


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def supervise(server: Postgres, space_back: asyncio.Event) -> None:
    """A supervisor's restarts of Postgres every second (systemd's Restart=always): each fails while
    the disk is full; once ``space_back`` is set it goes on until one succeeds."""
    for _ in range(600):
        if postgres_running(server):
            print(f"  {time.strftime('%H:%M:%S')} Postgres started again", flush=True)
            return
        with contextlib.suppress(RuntimeError):
            await asyncio.to_thread(start_briefly, server)
        if not space_back.is_set():
            await asyncio.sleep(1.0)


def start_briefly(server: Postgres) -> None:
    """``pg_ctl start`` that waits at most 10 s for the server to accept connections."""
    run_command(
        [
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(server.data),
            "-l",
            str(server.server_log),
            "-w",
            "-t",
            "10",
            "start",
        ],
        server.log,
    )


async def outage(rig: Rig, server: Postgres, wal: Path, url: str, full_for: float, checks: Checks) -> None:
    """Fill the disk, watch the service and relays while Postgres is down, then free the disk."""
    await asyncio.sleep(6)
    print(f"  {time.strftime('%H:%M:%S')} filling the WAL disk", flush=True)
    await asyncio.to_thread(fill, wal, url)
    began = time.monotonic()
    for _ in range(150):  # 30 s
        if not postgres_running(server):
            break
        await asyncio.sleep(0.2)
    checks.add(
        "Postgres stopped when its WAL disk filled", not postgres_running(server), str(server.server_log)
    )
    print(
        f"  {time.strftime('%H:%M:%S')} Postgres stopped ({time.monotonic() - began:.1f} s after)", flush=True
    )

    pids = [r.process.pid for r in rig.relays if r.process is not None]
    cpu_before = [cpu_seconds(pid) for pid in pids]
    down_at = time.monotonic()
    space_back = asyncio.Event()
    supervisor = asyncio.create_task(supervise(server, space_back))
    answers: list[tuple[int, str, float]] = []
    ready: list[int] = []
    # A call waits for a connection twice (6 s each) before its 503 (docs/capacity.md).
    async with httpx.AsyncClient(base_url=rig.service.base_url, timeout=60) as http:
        while time.monotonic() - down_at < full_for:
            sent = time.monotonic()
            call = await http.post(
                "/v1/tool-calls",
                headers={"authorization": f"Bearer {rig.service.agent_token}"},
                json={
                    "tool_call_id": f"disk-full-{len(answers)}",
                    "conversation_id": "disk-full",
                    "tool": "pomodoro.interrupt",
                    "arguments": {},
                },
            )
            answers.append((call.status_code, call.text, time.monotonic() - sent))
            ready.append((await http.get("/readyz")).status_code)
            print(
                f"    {time.monotonic() - down_at:5.1f} s: a call {call.status_code} after "
                f"{answers[-1][2]:.1f} s, /readyz {ready[-1]}",
                flush=True,
            )
    spent = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
    down = time.monotonic() - down_at
    statuses = sorted({status for status, _, _ in answers})
    refused = [json.loads(text) for status, text, _ in answers if status == 503]
    checks.add(
        "while the disk was full, tool calls answered 503 with the contract's error body",
        bool(answers) and statuses == [503] and all({"error", "message"} <= set(body) for body in refused),
        f"statuses {statuses}; slowest {max((t for _, _, t in answers), default=0):.1f} s; "
        f"first {answers[0][1] if answers else None}",
    )
    checks.add("while the disk was full, /readyz answered 503", set(ready) == {503}, str(sorted(set(ready))))
    checks.add(
        f"while the disk was full, each relay spent under {RELAY_CPU_WHILE_DOWN:.0%} of a core",
        all(s / down < RELAY_CPU_WHILE_DOWN for s in spent),
        ", ".join(f"{s / down:.1%}" for s in spent),
    )

    print(f"  {time.strftime('%H:%M:%S')} space back: the filler removed", flush=True)
    (wal / "filler").unlink()
    back = time.monotonic()
    space_back.set()
    await supervisor
    async with httpx.AsyncClient(base_url=rig.service.base_url, timeout=10) as http:
        for _ in range(300):  # 60 s
            if (await http.get("/readyz")).status_code == 200:
                break
            await asyncio.sleep(0.2)
        recovered = (await http.get("/readyz")).status_code == 200
    checks.add("after space returned, /readyz was 200 again by itself", recovered, "")
    print(f"  {time.strftime('%H:%M:%S')} ready again after {time.monotonic() - back:.1f} s", flush=True)
    with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS disk_hog")


async def full_disk(server: Postgres, wal: Path, args: argparse.Namespace, log_dir: Path) -> int:
    create_database(server.url(), "lineup")
    url = server.url("lineup")
    await asyncio.to_thread(migrate, url, log_dir)
    print(
        f"full disk: {args.seconds:.0f} s of load, {args.agents} Agents, WAL on a {args.wal_mb} MB tmpfs",
        flush=True,
    )
    outage_checks = Checks()
    async with running_rig(url, log_dir, agents=args.agents, relay_prefix="disk-relay") as rig:
        await asyncio.gather(
            rig.agents.run(rig.stop),
            rig.probe.run(rig.stop),
            outage(rig, server, wal, url, args.full_for, outage_checks),
            stop_after(rig.stop, args.seconds),
        )
        checks = await rig.settled_and_checked(within=120)
    checks.results.extend(outage_checks.results)
    print_figures(
        rig.figures, rig.receiver, lambda: print(f"  503 answers {rig.figures.unanswered_sends['503']:>7}")
    )
    return checks.verdict(log_dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="seconds of load (40)")
    parser.add_argument("--agents", type=int, default=4, help="Agents sending load (4)")
    parser.add_argument("--wal-mb", type=int, default=192, help="size of the WAL's tmpfs in MB (192)")
    parser.add_argument("--full-for", type=float, default=12.0, help="seconds the disk stays full (12)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        print("full disk: skipped: mounting the WAL's tmpfs needs root")
        return 0
    with wal_on_tmpfs(args.wal_mb) as (server, wal):
        server.start()
        log_dir = server.root / "logs"
        log_dir.mkdir()
        code = asyncio.run(full_disk(server, wal, args, log_dir))
        if code:
            kept = Path(f"/tmp/lineup-full-disk-logs-{int(time.time())}")
            shutil.copytree(log_dir, kept)
            shutil.copy(server.server_log, kept / "postgres.log")
            print(f"logs kept in {kept}")
        return code


if __name__ == "__main__":
    sys.exit(main())
