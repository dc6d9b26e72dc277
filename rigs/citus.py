"""The Citus rig (``make citus``): the service on a Citus 13 cluster of this machine — a coordinator
and two workers (``harness.citus``) — every conversation's rows on one worker, each tool call
delegated whole to that worker; under load, through a worker restart; then the checks.

```
.venv/bin/python -m rigs.citus [--seconds 24] [--agents 4] [--keep]
```

The extension comes from this PostgreSQL's library folder when installed, else it is built from the
source tarball named by ``CITUS_SRC`` (cached under ``.cache/citus/``, so a second run builds
nothing). With neither, the rig says so and exits 0: it is optional.

1. the cluster: three ``initdb``s on free loopback ports (``shared_preload_libraries = 'citus,
   pg_stat_statements'``, ``track_functions = 'pl'`` so that each node counts the tool calls it
   ran), ``CREATE EXTENSION citus`` in ``lineup`` on each, ``citus_set_coordinator_host`` and
   ``citus_add_node``;
2. ``python -m service migrate`` on the coordinator, then ``python -m service distribute``, each
   twice (the second run changes nothing);
3. two ``serve`` replicas on the coordinator, and a relay on each worker (``DATABASE_URL`` the
   worker: it claims from the shards there; ``LISTEN_DATABASE_URL`` the coordinator, where the
   service's wake-ups are sent);
4. the hot path alone (``--seconds`` / 3): Agents' tool calls over REST (starts, interrupts, the
   deadlines falling due) and MCP, on both replicas; the two-phase commits every node took part in
   are counted before and after;
5. everything (the rest of ``--seconds``): the same, plus the person leaving and closing, races of
   the Agent's interrupt with the person's leave through different replicas, ``interact.ask``
   answered through the Host API, surface events, workspace reads and event streams; half-way, a
   worker restarts (``pg_ctl restart -m fast``);
6. once settled and checked (``rigs.citus_history``): the operator's reads through ``python -m
   service ops`` on the coordinator, then aged history removed by the relays' retention on each
   worker and the service's history retention, and a replay of a call recorded before it.

Checks: the shared ones (``rigs.checks``: every acknowledged answer recorded byte for byte, one
operation per accepted start, each final once as its answers said, one outbox row per operation,
every result delivered and signed, no 500), plus: each result delivered once and in its
conversation's order; each event stream's ids increasing; the tool calls the workers ran (their own
statistics) at least 99 % of all; no two-phase commit started by a worker (where a delegated call
runs) during the hot-path phase — Citus names each after the node that started it; the database's
load spread on both workers; the ops reads and the retention as ``rigs.citus_history`` says; every
process exiting 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg

from harness.citus import CitusUnavailableError, Cluster, citus_cluster, ensure_extension
from harness.postgres import Postgres, wait_for, workdir
from harness.processes import RelayProcess, ServiceProcess, environment, free_port
from harness.receiver import Receiver
from rigs.checks import Checks, check, print_figures, settle
from rigs.citus_history import aged_retention, ops_reads
from rigs.citus_load import Askers, Extra, McpAgents, Racers
from rigs.load import Agents, Figures, Probe
from rigs.stack import WEBHOOK_SECRET, migrate, stop_after

RIG_SETTINGS = {
    "shared_preload_libraries": "'citus,pg_stat_statements'",
    "track_functions": "'pl'",
}
TOOL_CALL_FUNCTION = "call_tool_v3"
DELEGATED_AT_LEAST = 0.99
#: The relays' first retention round comes 1-10 s after their start, and ends with a report written
#: to a reference table (a two-phase commit): the hot-path phase begins once every relay has made it.
RELAY_REPORTS = "SELECT sum(calls) FROM pg_stat_statements WHERE query ILIKE 'INSERT INTO %outbox_retention%'"


def distribute(url: str, log_dir: Path) -> str:
    """``python -m service distribute``; its last line."""
    import subprocess

    from harness.processes import ROOT

    with (log_dir / "distribute.log").open("ab") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "service", "distribute"],
            cwd=ROOT,
            env=environment({"DATABASE_URL": url}),
            stdout=subprocess.PIPE,
            stderr=handle,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"distribute exited {done.returncode}; log {log_dir / 'distribute.log'}")
    return done.stdout.decode().strip()


def _scalar(url: str, statement: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(statement).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


_GID = re.compile(r"'citus_(\d+)_(\d+)_")


def prepared_commits(cluster: Cluster) -> Counter[str]:
    """Two-phase commits the nodes took part in (``PREPARE TRANSACTION`` statements they ran), by
    the node that started them: Citus names each ``citus_<initiator's group>_<its pid>_…``."""
    seen: Counter[str] = Counter()
    for node in cluster.nodes:
        with psycopg.connect(cluster.url(node), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT query, calls FROM pg_stat_statements WHERE query ILIKE 'PREPARE TRANSACTION%'"
            ).fetchall()
        for query, calls in rows:
            found = _GID.search(str(query))
            initiator = "coordinator" if found and found.group(1) == "0" else "a worker"
            seen[initiator] += int(calls)
    return seen


def tool_calls_run(cluster: Cluster) -> dict[str, int]:
    """The tool-call function's runs each node counted (``track_functions``): a worker's were
    delegated to it, the coordinator's were not."""
    statement = f"SELECT sum(calls) FROM pg_stat_user_functions WHERE funcname = '{TOOL_CALL_FUNCTION}'"
    return {f":{node.port}": _scalar(cluster.url(node), statement) for node in cluster.nodes}


def rows_by_worker(cluster: Cluster) -> dict[str, int]:
    """The tool calls recorded on each worker's shards (each shard counted where it is placed)."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        rows = conn.execute(
            """
            SELECT n.nodeport, sum(r.result::bigint)
            FROM run_command_on_shards('tool_calls', $$SELECT count(*) FROM %s$$) r
            JOIN pg_dist_placement p USING (shardid)
            JOIN pg_dist_node n USING (groupid)
            GROUP BY 1 ORDER BY 1
            """
        ).fetchall()
    return {f":{port}": int(n) for port, n in rows}


def reset_statistics(cluster: Cluster) -> None:
    """pg_stat_statements created (on the coordinator: Citus creates it on the workers) and every
    node's counts started afresh."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    for node in cluster.nodes:
        with psycopg.connect(cluster.url(node), autocommit=True) as conn:
            conn.execute("SELECT pg_stat_reset(), pg_stat_statements_reset()")


def delivered_in_order(receiver: Receiver) -> tuple[int, list[str], list[str]]:
    """(results, duplicated ones, conversations whose results arrived out of sequence order)."""
    per_event = receiver.accepted_per_event()
    duplicated = [event for event, n in per_event.items() if n > 1]
    last: dict[str, int] = {}
    disordered: set[str] = set()
    for delivery in receiver.accepted():
        payload = delivery.payload
        conversation, sequence = str(payload["conversation_id"]), int(payload["sequence"])
        if sequence <= last.get(conversation, 0):
            disordered.add(conversation)
        last[conversation] = max(sequence, last.get(conversation, 0))
    return len(per_event), duplicated, sorted(disordered)


async def restart_worker(worker: Postgres, after: float, stop: asyncio.Event, done: list[float]) -> None:
    """``pg_ctl restart -m fast`` of one worker ``after`` seconds in (unless the load ended first)."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=after)
        return
    except TimeoutError:
        pass
    began = time.monotonic()
    await asyncio.to_thread(worker.restart, "fast")
    done.append(time.monotonic() - began)


async def run(cluster: Cluster, args: argparse.Namespace, log_dir: Path) -> int:
    url = cluster.url()
    began = time.monotonic()
    distributed = []
    for _ in range(2):  # the second time on a distributed database: nothing to change
        await asyncio.to_thread(migrate, url, log_dir)
        distributed.append(await asyncio.to_thread(distribute, url, log_dir))
    prepared_in = time.monotonic() - began
    print(f"citus: migrate and distribute, twice each, in {prepared_in:.1f} s ({' / '.join(distributed)})")
    await asyncio.to_thread(reset_statistics, cluster)

    tokens = {kind: f"{kind.lower()}-{secrets.token_hex(16)}" for kind in ("AGENT", "HOST", "OPERATOR")}
    env = {f"{kind}_TOKEN": token for kind, token in tokens.items()}
    figures, extra = Figures(), Extra()
    checks = Checks()
    restarted: list[float] = []
    read = retained = "not reached"
    async with Receiver([WEBHOOK_SECRET]) as receiver:
        relays = [
            RelayProcess(
                cluster.url(worker),
                receiver.url,
                WEBHOOK_SECRET,
                log_dir / f"relay-worker{n}.log",
                {
                    "RELAY_ID": f"citus-relay-worker{n}",
                    "LISTEN_DATABASE_URL": url,
                    "RELAY_METRICS_PORT": str(free_port()),
                    "RELAY_BACKOFF_BASE_SECONDS": "0.2",
                    "RELAY_BACKOFF_MAX_SECONDS": "2",
                },
            )
            for n, worker in enumerate(cluster.workers, 1)
        ]
        services = [ServiceProcess(url, log_dir, env=env) for _ in range(2)]
        codes: list[int | None] = []
        try:
            for relay in relays:
                relay.start()
            for service in services:
                await asyncio.to_thread(service.start_ready)
            for relay in relays:
                await asyncio.to_thread(relay.wait_ready)
            await asyncio.to_thread(
                wait_for,
                "every relay's first retention report",
                lambda: _scalar(url, RELAY_REPORTS) >= len(relays) or None,
                30,
                0.5,
            )

            # The hot path alone: tool calls over REST and MCP on both replicas.
            hot_seconds = max(6.0, args.seconds / 3)
            before = await asyncio.to_thread(prepared_commits, cluster)
            stop = asyncio.Event()
            hot = [
                Agents(
                    s.base_url,
                    s.agent_token,
                    s.host_token,
                    figures,
                    count=max(1, args.agents // 2),
                    endings=("interrupt", "deadline"),
                )
                for s in services
            ]
            await asyncio.gather(
                *(a.run(stop) for a in hot),
                McpAgents(services, extra, count=2).run(stop),
                stop_after(stop, hot_seconds),
            )
            await asyncio.sleep(0.5)
            hot_prepared = await asyncio.to_thread(prepared_commits, cluster)
            hot_prepared.subtract(before)

            # Everything, and a worker restarting half-way.
            mixed_seconds = max(6.0, args.seconds - hot_seconds)
            stop = asyncio.Event()
            probe = Probe(services[0].base_url, services[0].agent_token, interval=0.1)
            everything = [
                Agents(s.base_url, s.agent_token, s.host_token, figures, count=max(1, args.agents // 2))
                for s in services
            ]
            await asyncio.gather(
                *(a.run(stop) for a in everything),
                Racers(services, figures, extra, count=2).run(stop),
                Askers(services, figures, extra, count=2).run(stop),
                McpAgents(services, extra, count=2).run(stop),
                probe.run(stop),
                restart_worker(cluster.workers[0], mixed_seconds / 2, stop, restarted),
                stop_after(stop, mixed_seconds),
            )
            left = await settle(url, within=120)
            checks = await asyncio.to_thread(
                check, url, figures, receiver, probe.answers, started_elsewhere=frozenset(extra.mcp_starts)
            )
            checks.add(
                "everything settled and delivered within 120 s",
                left == {"focusing": 0, "undelivered": 0},
                str(left),
            )
            read = await asyncio.to_thread(ops_reads, url, figures, log_dir, checks)
            retained = await aged_retention(cluster, services[0], checks)
        finally:
            codes = await asyncio.to_thread(lambda: [p.stop() for p in (*relays, *services)])
        results, duplicated, disordered = delivered_in_order(receiver)

    # Counted once every connection has ended, so every node's statistics are written.
    await asyncio.sleep(1.0)
    runs = await asyncio.to_thread(tool_calls_run, cluster)
    coordinator = runs[f":{cluster.coordinator.port}"]
    delegated = sum(n for node, n in runs.items() if node != f":{cluster.coordinator.port}")
    share = delegated / (delegated + coordinator) if delegated + coordinator else 0.0
    spread = await asyncio.to_thread(rows_by_worker, cluster)
    streams = {cid: ids for cid, ids in extra.streams.items() if ids}
    unordered_streams = [cid for cid, ids in streams.items() if ids != sorted(set(ids))]

    checks.add(
        "each result delivered once, in its conversation's order",
        not duplicated and not disordered,
        f"{results} results; delivered more than once {len(duplicated)}, out of order in"
        f" {len(disordered)} conversations {disordered[:3]}",
    )
    checks.add(
        f"at least {DELEGATED_AT_LEAST:.0%} of the tool calls delegated whole to a worker"
        " (counted by the workers)",
        share >= DELEGATED_AT_LEAST and delegated > 0,
        f"{delegated} on the workers, {coordinator} on the coordinator ({share:.2%}); by node {runs}",
    )
    # A delegated tool call runs on a worker: a two-phase commit it caused would be started there.
    # The coordinator's own (its service's background rounds: the history retention's report, a
    # write to a reference table) are shown beside.
    checks.add(
        "no two-phase commit started where tool calls run (the workers) while only tool calls ran",
        hot_prepared["a worker"] == 0,
        f"{hot_prepared['a worker']} PREPARE TRANSACTION started by a worker,"
        f" {hot_prepared['coordinator']} by the coordinator's background rounds",
    )
    checks.add(
        "the conversations spread over both workers",
        all(n > 0 for n in spread.values()),
        f"tool calls recorded per worker {spread}",
    )
    checks.add(
        "every event stream's ids increasing",
        not unordered_streams and len(streams) > 0,
        f"{len(streams)} streams, {sum(len(i) for i in streams.values())} events;"
        f" out of order {unordered_streams[:3]}",
    )
    checks.add(
        "the rig's own load answered as the contract says", not extra.errors, "; ".join(extra.errors[:3])
    )
    checks.add(
        "a worker restarted under load",
        len(restarted) == 1,
        f"in {restarted[0]:.1f} s" if restarted else "no restart",
    )
    checks.add("every process exited 0 on SIGTERM", all(code == 0 for code in codes), str(codes))

    print(
        f"\ncitus run: {args.seconds:.0f} s of load ({hot_seconds:.0f} s hot path only),"
        " two replicas, a relay per worker"
    )
    nodes = ", ".join(f":{w.port}" for w in cluster.workers)
    print(f"  nodes                     coordinator :{cluster.coordinator.port}, workers {nodes}")
    print_figures(figures, receiver)
    print(
        f"  rig's own load            {extra.races} races, {extra.asked} asked / {extra.answered} answered,"
        f" {extra.mcp_calls} MCP calls, {extra.surface_events} surface events,"
        f" {extra.workspace_reads} workspace reads, {len(streams)} event streams"
    )
    print(
        f"  tool calls delegated      {delegated} of {delegated + coordinator} ({share:.2%}), by node {runs}"
    )
    print(
        f"  2PC while only tool calls ran: started by a worker {hot_prepared['a worker']},"
        f" by the coordinator {hot_prepared['coordinator']}"
    )
    print(f"  worker restart            {f'{restarted[0]:.1f} s' if restarted else 'none'}")
    print(f"  ops reads (coordinator)   {read}")
    print(f"  aged-history retention    {retained}")
    return checks.verdict(log_dir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=24.0, help="seconds of load (24)")
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
    code = 1
    try:
        with citus_cluster(settings=RIG_SETTINGS) as cluster:
            code = asyncio.run(run(cluster, args, log_dir))
    finally:
        if code or args.keep:
            kept = Path(f"/tmp/lineup-citus-logs-{int(time.time())}")
            shutil.copytree(log_dir, kept)
            print(f"logs kept in {kept}")
        shutil.rmtree(log_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
