"""What one start+interrupt cycle costs the database, in instructions: this checkout against the
previous release, counted by callgrind, so the figure does not depend on what else the machine does.

    .venv/bin/python -m bench.db_instructions [--previous COMMIT] [--cycles 200]

A throwaway cluster (Debian's PostgreSQL 15 binaries, as the OS user ``postgres`` when run as root)
holds two databases: one migrated by the previous release (checked out into a git worktree), one by
this checkout. Each runs the same tool calls — in the previous release's ``call_tool`` and this
one's ``call_tool_v3``, as their services send them — in a single-user backend under
``valgrind --tool=callgrind``, once with 40 cycles and once with ``40 + --cycles``; the difference
divided by ``--cycles`` is the cost of one cycle without the start-up. Every call is checked to
answer; a failed one stops the bench. Takes a few minutes (valgrind runs the backend ~50x slower).

    .venv/bin/python -m bench.db_instructions --settle [1,20,200] [--previous COMMIT] [--rows 200]
                                              [--far 5000]

``--settle``: what the deadline sweeper's settling costs per due period instead, this checkout's
``settle_due`` against the previous release's (or ``--previous``'s). A throwaway cluster holds one
database per tree, each migrated by its own tree and seeded alike through this checkout's seeds
(``bench.seeds``, the service's own tool-call statement): ``--far`` periods ending hours later, and
``--rows`` + 1 conversations, each with an earlier result queued and a period whose deadline has
passed. Per batch size ``b``, a single-user backend under callgrind runs, on a fresh copy of the
data directory, one ``settle_due(1)`` (the warm-up: the session's plans and caches) and ``--rows`` /
``b`` calls of ``settle_due(b)``; another runs the warm-up alone. The difference over the rows
settled is what one row costs in a batch of ``b``: the claim, the decision, the instance closed, the
outbox row, the stream events, and the commit's share.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

from bench import seeds
from harness.processes import ROOT
from harness.releases import PREVIOUS_RELEASE, migrate_release, previous_release

BIN = Path("/usr/lib/postgresql/15/bin")
WARM = 40

_PREVIOUS = (
    "SELECT status_code FROM call_tool('{id}', '{conv}', '{tool}', '{fp}', '{args}'::jsonb, 300.0, 1);"
)
_CURRENT = (
    "SELECT outcome FROM call_tool_v3('{id}', '{conv}', '{tool}', '{fp}', '{args}'::jsonb, "
    "'{decide}', '{context}'::jsonb);"
)
# The same call as a prepared statement (what DB_PREPARED_STATEMENTS=on sends: parsed and planned
# once per connection, then only bound and executed); the unprepared form above is parsed and
# planned at every call, as DB_PREPARED_STATEMENTS=off sends it (an unnamed statement).
_PREPARE = (
    "PREPARE lineup_call(text, text, text, text, jsonb, regproc, jsonb) AS "
    "SELECT outcome FROM call_tool_v3($1, $2, $3, $4, $5, $6, $7);"
)
_EXECUTE = "EXECUTE lineup_call('{id}', '{conv}', '{tool}', '{fp}', '{args}', '{decide}', '{context}');"


def _as_postgres() -> dict[str, object]:
    """Run server binaries as the OS user ``postgres`` when we are root (they refuse root)."""
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam("postgres")
    return {"user": user.pw_uid, "group": user.pw_gid}


def _script(cycles: int, current: bool, prepared: bool = False) -> str:
    from service.manifests import registry_of
    from service.settings import Settings, load_settings
    from service.use_cases.runtime import Runtime

    registry = registry_of(Settings())
    settings = load_settings(
        "serve",
        database_url="postgresql://unused/unused",
        agent_token="bench-agent-" + "a1b2c3d4e5f6",
        host_token="bench-host-" + "f6e5d4c3b2a1",
        operator_token="bench-operator-" + "0f1e2d3c4b5a",
    )
    runtime = Runtime(pool=None, settings=settings, registry=registry)  # type: ignore[arg-type]
    run = uuid.uuid4().hex[:6]
    lines = []
    for n in range(cycles):
        conversation = f"cycle-{run}-{n % 8}"
        for tool, arguments in (("pomodoro.start", {"duration_seconds": 1500}), ("pomodoro.interrupt", {})):
            values = {
                "id": uuid.uuid4().hex,
                "conv": conversation,
                "tool": tool,
                "fp": "0" * 64,
                "args": json.dumps(arguments),
                "decide": registry.runner(tool).decide,
                "context": runtime.context_of(tool),
            }
            form = (_EXECUTE if prepared else _CURRENT) if current else _PREVIOUS
            lines.append(form.format(**values))
    if prepared:
        lines.insert(0, _PREPARE)
    return "\n".join(lines) + "\n"


def _instructions(data: Path, database: str, script: str, work: Path) -> int:
    out = work / f"callgrind-{uuid.uuid4().hex[:8]}.out"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        str(BIN / "postgres"),
        "--single",
        "-D",
        str(data),
        database,
    ]
    done = subprocess.run(
        command,
        input=script,
        capture_output=True,
        text=True,
        check=False,
        **_as_postgres(),  # type: ignore[call-overload]
    )
    if done.returncode != 0 or "ERROR" in done.stdout + done.stderr:
        raise RuntimeError(f"the backend failed:\n{(done.stdout + done.stderr)[-2000:]}")
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary in {out}")


def _per_cycle(
    data: Path, database: str, cycles: int, current: bool, work: Path, prepared: bool = False
) -> float:
    short = _instructions(data, database, _script(WARM, current, prepared), work)
    long = _instructions(data, database, _script(WARM + cycles, current, prepared), work)
    return (long - short) / cycles


def _until_ready(port: int, timeout: float = 60.0) -> None:
    """Wait for the throwaway server to accept connections (a loaded machine starts it slowly)."""
    deadline = time.monotonic() + timeout
    while subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port)], check=False).returncode:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the throwaway server on {port} did not start within {timeout:.0f} s")
        time.sleep(0.2)


def _unpin(url: str) -> None:
    """Reset the fixed search_path of every function (``service.db.code.pin_search_paths``): what
    the pin costs a cycle, measured beside the pinned database."""
    with psycopg.connect(url, autocommit=True) as conn:
        pinned = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p"
            " WHERE p.pronamespace = 'public'::regnamespace AND p.proconfig IS NOT NULL"
        ).fetchall()
        for (identity,) in pinned:
            conn.execute(f"ALTER FUNCTION {identity} RESET search_path")


@contextlib.contextmanager
def throwaway_server(work: Path, port: int) -> Iterator[Path]:
    """A new cluster in ``work / "data"`` (yielded) whose server listens on
    ``port`` (its socket in ``work``, fsync off) until the block ends; then the server is stopped,
    and the data directory stays for ``cycle_instructions``' single-user backends."""
    data = work / "data"
    subprocess.run(
        [str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
        **_as_postgres(),
    )  # type: ignore[call-overload]
    server = subprocess.Popen(
        [str(BIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(work), "-c", "fsync=off"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **_as_postgres(),  # type: ignore[call-overload]
    )
    try:
        _until_ready(port)
        yield data
    finally:
        server.terminate()
        server.wait()


@contextlib.contextmanager
def migrated_cluster(
    work: Path, databases: dict[str, Path], prepare: dict[str, list[str]] | None = None
) -> Iterator[Path]:
    """A throwaway cluster under ``work`` (its data directory yielded, the server stopped) holding
    one database per name in ``databases``, each migrated by the release in the tree it names;
    ``prepare`` names SQL run on a database after its migration (a variant to count)."""
    port = 55400 + os.getpid() % 500
    with throwaway_server(work, port) as data:
        for name, tree in databases.items():
            subprocess.run(
                [
                    "psql",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    "postgres",
                    "-c",
                    f"CREATE DATABASE {name}",
                ],
                check=True,
                capture_output=True,
            )
            url = f"postgresql://postgres@127.0.0.1:{port}/{name}"
            migrate_release(tree, url)
            statements = (prepare or {}).get(name, [])
            if statements:
                with psycopg.connect(url, autocommit=True) as conn:
                    for statement in statements:
                        conn.execute(statement)
            if name == "unpinned":
                _unpin(url)
    yield data


def cycle_instructions(data: Path, database: str, cycles: int, work: Path, prepared: bool = False) -> float:
    """This checkout's database instructions per start+interrupt cycle on ``database``."""
    return _per_cycle(data, database, cycles, True, work, prepared)


SETTLE_WARM = "SELECT count(*) FROM settle_due(1);\n"


def seeded_data(work: Path, tree: Path, name: str, rows: int, far: int) -> Path:
    """A stopped cluster's data directory whose database ``name`` is migrated by ``tree`` and
    seeded: ``far`` periods ending hours later, ``rows`` + 1 overdue ones after an earlier result."""
    port = 55900 + os.getpid() % 97
    with throwaway_server(work / name, port) as data:
        admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = f"postgresql://postgres@127.0.0.1:{port}/{name}"
        migrate_release(tree, url)
        seeds.focusing(url, "far-", far, duration_seconds=7200)
        seeds.finished(url, "due-", rows + 1)
        seeds.focusing(url, "due-", rows + 1, duration_seconds=600)
        with psycopg.connect(url, autocommit=True) as conn:
            moved = seeds.move_deadlines(conn, "due-", -60, 1)
            if moved != rows + 1:
                raise RuntimeError(f"moved {moved} periods, not {rows + 1}")
            conn.execute("VACUUM ANALYZE")
            conn.execute("CHECKPOINT")
    return data


def _counted(data: Path, database: str, script: str, work: Path) -> int:
    """Instructions of a single-user backend running ``script`` on a copy of ``data``."""
    copy = work / f"copy-{uuid.uuid4().hex[:8]}"
    shutil.copytree(data, copy, symlinks=True)
    try:
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(copy)], check=True)
        copy.chmod(0o700)
        return _instructions(copy, database, script, work)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def settle_per_row(data: Path, database: str, batch: int, rows: int, work: Path) -> float:
    """Database instructions per row that ``settle_due(batch)`` settles, over ``rows`` rows."""
    calls = max(1, rows // batch)
    warm = _counted(data, database, SETTLE_WARM, work)
    script = SETTLE_WARM + f"SELECT count(*) FROM settle_due({batch});\n" * calls
    return (_counted(data, database, script, work) - warm) / (batch * calls)


def settle_main(previous_commit: str, batches: list[int], rows: int, far: int) -> int:
    work = Path(tempfile.mkdtemp(prefix="lineup-settle-instructions-"))
    os.chmod(work, 0o777)  # noqa: S103 - the server, run as postgres, writes its profiles here
    with previous_release(previous_commit) as previous, contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        trees = {"previous": previous, "current": ROOT}
        data = {name: seeded_data(work, tree, name, rows, far) for name, tree in trees.items()}
        print(
            "database instructions per row settled by settle_due "
            f"(callgrind; {rows} rows among {far} focusing):"
        )
        print(f"    {'batch':>5}  {'previous ' + previous_commit[:12]:>22}  {'this checkout':>14}  ratio")
        for batch in batches:
            before = settle_per_row(data["previous"], "previous", batch, rows, work)
            now = settle_per_row(data["current"], "current", batch, rows, work)
            print(f"    {batch:>5}  {before:>22,.0f}  {now:>14,.0f}  {now / before:.3f}", flush=True)
    return 0


def has_tools() -> bool:
    return shutil.which("valgrind") is not None and (BIN / "postgres").exists()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--previous", default=PREVIOUS_RELEASE)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument(
        "--settle",
        nargs="?",
        const="1,20,200",
        metavar="BATCHES",
        help="count the sweeper's settle_due per row instead, for these batch sizes (1,20,200)",
    )
    parser.add_argument("--rows", type=int, default=200, help="--settle: rows settled per count")
    parser.add_argument("--far", type=int, default=5000, help="--settle: periods ending hours later")
    args = parser.parse_args()
    if not has_tools():
        print("needs valgrind and PostgreSQL 15's server binaries (Debian: valgrind postgresql-15)")
        return 2
    if args.settle:
        batches = [int(b) for b in args.settle.split(",")]
        if not (1 <= args.rows <= 5000 and all(1 <= b <= args.rows for b in batches)):
            parser.error("keep it bounded: --rows 1..5000, each batch 1..--rows")
        return settle_main(args.previous, batches, args.rows, args.far)
    work = Path(tempfile.mkdtemp(prefix="lineup-instructions-"))
    os.chmod(work, 0o777)  # noqa: S103 - the server, run as postgres, writes its profiles here
    with previous_release(args.previous) as previous, contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        trees = {"previous": previous, "current": ROOT, "unpinned": ROOT}
        data = cleanup.enter_context(migrated_cluster(work, trees))
        # A previous release that has call_tool_v3 (interface 3 and later) is sent the same call.
        code = previous / "service" / "db" / "sql" / "95_tool_calls.sql"
        previous_v3 = code.exists() and "call_tool_v3" in code.read_text()
        before = _per_cycle(data, "previous", args.cycles, previous_v3, work)
        now = _per_cycle(data, "current", args.cycles, True, work)
        prepared = _per_cycle(data, "current", args.cycles, True, work, prepared=True)
        unpinned = _per_cycle(data, "unpinned", args.cycles, True, work)
    print(f"database instructions per start+interrupt cycle (callgrind, {args.cycles} cycles):")
    print(f"    previous release {args.previous[:12]}   {before:>12,.0f}")
    print(f"    this checkout                 {now:>12,.0f}")
    print(f"    ratio this / previous         {now / before:>12.3f}")
    print(f"    this checkout, prepared       {prepared:>12,.0f}  (PREPARE once, EXECUTE per call)")
    print(f"    unprepared / prepared         {now / prepared:>12.3f}  (DB_PREPARED_STATEMENTS off / on)")
    print(f"    this checkout, search_path free {unpinned:>10,.0f}  (each function's SET search_path reset)")
    print(f"    pinned / not pinned           {now / unpinned:>12.3f}  (what the fixed search_path costs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
