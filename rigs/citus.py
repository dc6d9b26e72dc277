"""The Citus rig (``make citus``): the service on a Citus 13 cluster of this machine — a coordinator
and two workers (``rigs.citus_cluster``) — under load; then the checks.

```
.venv/bin/python -m rigs.citus [--seconds 20] [--agents 4] [--keep]
```

The extension comes from this PostgreSQL's library folder when installed, else it is built from the
source tarball named by ``CITUS_SRC`` (cached under ``.cache/citus/``, so a second run builds
nothing). With neither, the rig says so and exits 0: it is optional.

What it does today (issue 32, stage by stage):

1. the cluster: three ``initdb``s on free loopback ports, ``shared_preload_libraries = 'citus'``,
   ``max_prepared_transactions``, ``CREATE EXTENSION citus`` in ``lineup`` on each node,
   ``citus_set_coordinator_host`` and ``citus_add_node`` for each worker;
2. ``python -m service migrate`` on the coordinator, twice (the second changes nothing: the
   database code leaves the extension's own functions, views and types in ``public`` alone);
3. the shared load (``rigs.stack``: one ``serve``, two relays, the Agents and the probe) on the
   coordinator, and the shared checks (``rigs.checks``). The tables are still the coordinator's own:
   distributing them by ``conversation_id`` (``python -m service distribute``) is the next stage, and
   the rig prints the first refusal ``create_distributed_table`` gives on a fresh copy of the schema
   so the distance is seen at every run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import time
from pathlib import Path

import psycopg

from harness.postgres import workdir
from rigs.checks import print_figures
from rigs.citus_cluster import CitusUnavailableError, Cluster, citus_cluster, ensure_extension
from rigs.stack import migrate, running_rig, stop_after


def citus_objects_in_public(url: str) -> list[str]:
    """The extension's own relations and functions in ``public`` (``citus_tables``, ...)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            """
            SELECT c.relname FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass
                AND d.objid = c.oid AND d.deptype = 'e'
            WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1
            """
        ).fetchall()
    return [row[0] for row in rows]


def first_refusal(cluster: Cluster, log_dir: Path) -> str:
    """On a fresh database of the cluster, migrated: what ``create_distributed_table('workspaces',
    'conversation_id')`` answers (the distance left), or ``accepted``."""
    name = "lineup_distance"
    with psycopg.connect(cluster.coordinator.admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = cluster.coordinator.url(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
    migrate(url, log_dir)
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute("SET citus.enable_unsafe_triggers = on")
            conn.execute("SELECT create_distributed_table('workspaces', 'conversation_id')")
        except psycopg.Error as exc:
            return str(exc).splitlines()[0]
    return "accepted"


async def run(cluster: Cluster, args: argparse.Namespace, log_dir: Path) -> int:
    url = cluster.url()
    began = time.monotonic()
    await asyncio.to_thread(migrate, url, log_dir)
    await asyncio.to_thread(migrate, url, log_dir)
    print(f"citus: migrate ran twice on the coordinator in {time.monotonic() - began:.1f} s", flush=True)
    owned = citus_objects_in_public(url)
    async with running_rig(url, log_dir, agents=args.agents, relay_prefix="citus-relay") as rig:
        await asyncio.gather(
            rig.agents.run(rig.stop), rig.probe.run(rig.stop), stop_after(rig.stop, args.seconds)
        )
        checks = await rig.settled_and_checked(within=120)
    checks.add(
        "the extension's relations in public survived migrate",
        {"citus_tables", "citus_schemas"} <= set(owned),
        ", ".join(owned),
    )
    checks.add("every process exited 0 on SIGTERM", all(code == 0 for code in rig.codes), str(rig.codes))
    refusal = await asyncio.to_thread(first_refusal, cluster, log_dir)
    print(f"\ncitus run: {args.seconds:.0f} s of load, {args.agents} Agents, one service, two relays")
    nodes = ", ".join(f":{w.port}" for w in cluster.workers)
    print(f"  nodes                     coordinator :{cluster.coordinator.port}, workers {nodes}")
    print_figures(rig.figures, rig.receiver)
    print(f"  distributing workspaces   {refusal}")
    return checks.verdict(log_dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of load (20)")
    parser.add_argument("--agents", type=int, default=4, help="Agents sending load (4)")
    parser.add_argument("--keep", action="store_true", help="keep the logs even when every check passes")
    args = parser.parse_args()
    try:
        print(ensure_extension(), flush=True)
    except CitusUnavailableError as why:
        print(f"citus: skipped — {why}; set CITUS_SRC to a Citus 13 source tarball to build it")
        return 0
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    log_dir = workdir("lineup-citus-logs-")
    try:
        with citus_cluster() as cluster:
            code = asyncio.run(run(cluster, args, log_dir))
    except BaseException:
        code = 1
        raise
    finally:
        if code or args.keep:
            kept = Path(f"/tmp/lineup-citus-logs-{int(time.time())}")
            shutil.copytree(log_dir, kept)
            print(f"logs kept in {kept}")
        shutil.rmtree(log_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
