"""What one delivery costs the relay's Python, in instructions counted by callgrind (so the figure
does not depend on what else the machine does), as a whole and by part.

    .venv/bin/python -m bench.relay_instructions [--previous COMMIT] [--rows 1000] [--jobs 2]

**The whole relay**: ``python -m relay`` as it runs (``relay.worker.Relay`` on uvloop, its logging
configured, its start-up frozen for the collector), in-process under
``valgrind --tool=callgrind``, drains a backlog (one row per conversation, payloads shaped like a
finished Pomodoro's) to the receiving Agent (``harness.receiver``, a process of its own outside
valgrind, answering 204). Each release drains ``WARM`` rows and ``WARM + --rows`` rows, each in a
database of its own; the difference divided by ``--rows`` is one delivery without the start-up and
the stop. The retention loop, which goes round on the clock and not on deliveries, idles. The
previous release (``--previous``, checked out into a git worktree, on this checkout's virtualenv)
drains the same backlog in the same run.

**By part** (this checkout only): each part the relay does per delivery, run alone ``WARM`` and
``WARM + --rows`` times in one process with every other part warmed up the same way, so that a
pair's difference is that part alone:

- ``sign``: the Standard Webhooks signature headers (``relay.signing.Signer``);
- ``request``: the rest of the request's body and headers (``relay.delivery.Deliverer.request``);
- ``http``: the POST itself over the pooled keep-alive connections, ``concurrency`` at once (the
  whole ``Deliverer.attempt`` less the two above);
- ``claim``: the claim statement's Python side (``relay.claims.claim``), batches of ``batch`` rows;
- ``record``: the record statement's Python side (``relay.claims.record_outcomes``), the same
  batches (claim + record, less the claim);
- ``metrics``: what the relay counts per delivery and per batch (``relay.metrics``);
- ``logging``: one log line as the relay writes one per retried or dead row (a delivered row logs
  nothing);
- the remainder (the whole relay less the parts) is the orchestration: the claimer's loop, a task
  per delivery, the queue to the writers, the outcome and its verdict.

What Postgres does is not counted here (``bench.relay_drain`` measures its CPU per delivery).
Takes a few minutes: valgrind runs Python ~50x slower.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

WARM = 200
BATCH = 100
CONCURRENCY = 64
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # a fixed test secret: the same work every run
PARTS = ("sign", "request", "http", "claim", "claim_record", "metrics", "logging")
# Parts that touch neither the database nor the network run this many times more: they are small,
# and a pair's difference should stand well above what varies between two processes.
CPU_ONLY = {"sign": 10, "request": 10, "metrics": 10, "logging": 10}

# One row per conversation, every row claimable at once; payloads as bench.seeds.SEED_BACKLOG's.
SEED = """
WITH ws AS (
    INSERT INTO workspaces (conversation_id, outbox_sequence)
    SELECT 'c' || c, 1 FROM generate_series(1, %(rows)s) c
)
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, payload)
SELECT r.event_id, 'pomodoro.start', r.tool_call_id, r.conversation_id, 1,
       jsonb_build_object(
           'event_id', r.event_id, 'type', 'tool.result', 'tool', 'pomodoro.start',
           'tool_call_id', r.tool_call_id, 'conversation_id', r.conversation_id,
           'operation_id', NULL, 'sequence', 1,
           'result', jsonb_build_object(
               'state', 'completed', 'reason', 'deadline_reached', 'activity', 'bench',
               'duration_seconds', 1500, 'started_at', '2026-11-30T08:00:00.000000Z',
               'ends_at', '2026-11-30T08:25:00.000000Z', 'finalized_at', '2026-11-30T08:25:00.000000Z',
               'focused_seconds', 1500))
FROM (SELECT gen_random_uuid() AS event_id, 'c' || c || '-1' AS tool_call_id, 'c' || c AS conversation_id
      FROM generate_series(1, %(rows)s) c) r
"""


# -- the drivers: run by path under valgrind with a release's tree first on PYTHONPATH ------------


def _quiet_stderr() -> contextlib.AbstractContextManager[Any]:
    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed with the redirect
    stack = contextlib.ExitStack()
    stack.enter_context(devnull)
    stack.enter_context(contextlib.redirect_stderr(devnull))
    return stack


def _drive_relay(url: str, webhook_url: str, rows: int) -> None:
    """The release's relay, as ``python -m relay`` runs it, until ``rows`` rows are delivered."""
    import uvloop

    import relay
    from relay import retention
    from relay.config import RelayConfig
    from relay.metrics import RelayMetrics
    from relay.worker import Relay
    from service.logging import configure_logging
    from service.settings import load_settings

    if not Path(relay.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise RuntimeError(f"imported {relay.__file__}, not the release in {Path.cwd()}")

    async def idle(self: Any, stop: asyncio.Event) -> None:
        await stop.wait()

    if hasattr(retention, "Pruning"):
        retention.Pruning.run = idle  # type: ignore[method-assign]
    else:  # a release before the Pruning class: its loop is the function the worker spawns
        import relay.worker

        async def never(*_: Any) -> None:
            await asyncio.Event().wait()

        relay.worker.keep_pruning = never  # type: ignore[attr-defined,unused-ignore]
    settings = load_settings(
        "relay",
        database_url=url,
        agent_webhook_url=webhook_url,
        webhook_secret=SECRET,
        relay_poll_only=True,
        relay_concurrency=CONCURRENCY,
        relay_batch_size=BATCH,
    )
    config = RelayConfig.from_settings(settings)
    metrics = RelayMetrics()
    delivered = metrics.attempts.labels("delivered")

    async def run() -> None:
        stop = asyncio.Event()
        relay_run = asyncio.create_task(Relay(config, metrics).run(stop))
        while delivered._value.get() < rows and not relay_run.done():  # noqa: ASYNC110 - a counter
            await asyncio.sleep(0.05)
        stop.set()
        await relay_run

    with _quiet_stderr():
        configure_logging()
        gc.freeze()
        uvloop.run(run())
    if delivered._value.get() < rows:
        raise RuntimeError(f"delivered {delivered._value.get()} of {rows}")


def _drive_parts(url: str, webhook_url: str, part: str, count: int) -> None:
    """Every part ``WARM`` times, then ``part`` ``count`` more times (per delivery)."""
    import uvloop

    from service.logging import configure_logging

    with _quiet_stderr():
        configure_logging()
        gc.freeze()
        uvloop.run(_exercise(url, webhook_url, part, count))


async def _exercise(url: str, webhook_url: str, part: str, count: int) -> None:
    """This checkout's parts, each as the relay runs it per delivery."""
    import time
    from datetime import UTC, datetime

    import structlog

    from relay import claims
    from relay.claims import Claim, Outcome
    from relay.database import relay_pool
    from relay.delivery import Attempt, Deliverer
    from relay.metrics import RelayMetrics
    from relay.signing import Signer

    log = structlog.get_logger("relay")
    relay_id = "bench-parts"
    signer = Signer([SECRET])
    deliverer = Deliverer(webhook_url, signer, timeout=30.0, concurrency=CONCURRENCY, lease_seconds=90.0)
    metrics = RelayMetrics()
    pool = relay_pool(url)
    await pool.open(wait=True)
    async with pool.connection() as conn:
        (sample,) = await claims.claim(conn, relay_id, 1, 300.0)
    event_id, body, timestamp = str(sample.event_id), sample.body, int(time.time())

    async def sign(n: int) -> None:
        for _ in range(n):
            signer.header_lines(event_id, timestamp, body)

    async def request(n: int) -> None:
        for _ in range(n):
            deliverer.headers(sample, timestamp)

    async def http(n: int) -> None:
        finished = asyncio.Event()
        left = [n, n]  # to send, to finish

        def delivered(_: Claim, attempt: Attempt) -> None:
            assert attempt.result.status_code == 204, attempt.result
            left[1] -= 1
            if left[0]:
                left[0] -= 1
                deliverer.send(sample, delivered)
            elif not left[1]:
                finished.set()

        for _ in range(min(CONCURRENCY, n)):
            left[0] -= 1
            deliverer.send(sample, delivered)
        await finished.wait()

    async def claim(n: int, record: bool = False) -> None:
        done = 0
        while done < n:
            async with pool.connection() as conn:
                batch = await claims.claim(conn, relay_id, min(BATCH, n - done), 300.0)
                if record:
                    now = datetime.now(UTC)
                    outcomes = [Outcome(c, "delivered", 0.0, None, now, 2, 204, None, None) for c in batch]
                    await claims.record_outcomes(conn, relay_id, outcomes)
            assert batch, "the bench seeded too few rows"
            done += len(batch)

    async def claim_record(n: int) -> None:
        await claim(n, record=True)

    async def count_metrics(n: int) -> None:
        for i in range(n):
            metrics.attempt_seconds.observe(0.002)
            metrics.commit_to_delivery.observe((datetime.now(UTC) - sample.created_at).total_seconds())
            if i % BATCH == 0:  # per claimed batch and per recorded batch
                metrics.in_flight.set(i)
                metrics.attempts.labels("delivered").inc(BATCH)
                metrics.in_flight.set(i)

    async def logging(n: int) -> None:
        for _ in range(n):
            log.info(
                "relay_attempt_retry",
                event_id=event_id,
                tool_call_id=sample.tool_call_id,
                attempt=1,
                error="HTTP 503",
                retry_in=1.5,
            )

    parts = {
        "sign": sign,
        "request": request,
        "http": http,
        "claim": claim,
        "claim_record": claim_record,
        "metrics": count_metrics,
        "logging": logging,
    }
    for exercise in parts.values():
        await exercise(WARM)
    if part != "none":
        await parts[part](count)
    await deliverer.aclose()
    await pool.close()


# -- the bench --------------------------------------------------------------------------------------


def _instructions(tree: Path, work: Path, driver: list[str]) -> int:
    from bench.common import callgrind_total  # the bench's side only: the driver imports no bench

    # One hash seed: dicts and sets laid out alike in every run of a pair.
    return callgrind_total(Path(__file__).resolve(), driver, tree, work, {"PYTHONHASHSEED": "0"})


class Databases:
    """A migrated template per release; each run gets a fresh copy of it, seeded."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self._templates: dict[Path, str] = {}

    def template(self, tree: Path) -> str:
        from harness.database import named_server, scratch_database
        from harness.releases import migrate_release

        if tree not in self._templates:
            name = f"bench_relay_i_tpl_{uuid.uuid4().hex[:8]}"
            url = self._stack.enter_context(scratch_database(named_server(), name))
            migrate_release(tree, url)
            self._templates[tree] = name
        return self._templates[tree]

    @contextlib.contextmanager
    def seeded(self, tree: Path, rows: int) -> Any:
        import psycopg

        from harness.database import drop_database, named_server, with_database

        template = self.template(tree)
        server = named_server()
        name = f"bench_relay_i_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        url = with_database(server, name)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(SEED, {"rows": rows})
                conn.execute("VACUUM ANALYZE outbox")
            yield url
        finally:
            drop_database(server, name)


def relay_per_delivery(tree: Path, dbs: Databases, webhook_url: str, rows: int, work: Path) -> float:
    counts = []
    for total in (WARM, WARM + rows):
        with dbs.seeded(tree, total) as url:
            counts.append(_instructions(tree, work, ["--drive-relay", url, webhook_url, str(total)]))
    return (counts[1] - counts[0]) / rows


def part_counts(
    tree: Path, dbs: Databases, webhook_url: str, part: str, rows: int, work: Path, *, times: int = 1
) -> int:
    # The same backlog for every part: enough for every part's warm-up and the measured claims.
    with dbs.seeded(tree, 2 * WARM + rows + BATCH) as url:
        return _instructions(tree, work, ["--drive-parts", url, webhook_url, part, str(rows * times)])


def main() -> int:
    from harness.processes import ROOT
    from harness.receiver import ReceiverProcess
    from harness.releases import PREVIOUS_RELEASE, previous_release

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--previous", default=PREVIOUS_RELEASE, help="the release to compare with")
    parser.add_argument("--rows", type=int, default=1000, help="measured deliveries per figure")
    parser.add_argument("--jobs", type=int, default=2, help="valgrind runs at once")
    parser.add_argument("--no-parts", action="store_true", help="the whole relay only")
    args = parser.parse_args()
    if not 100 <= args.rows <= 20_000:
        parser.error("keep it bounded: --rows 100..20000")
    if shutil.which("valgrind") is None:
        print("needs valgrind (Debian: valgrind)")
        return 2
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="lineup-relay-instructions-"))
    try:
        with (
            contextlib.ExitStack() as stack,
            ThreadPoolExecutor(max_workers=args.jobs) as pool,
        ):
            receiver = ReceiverProcess(work)
            stack.callback(receiver.close)
            previous = stack.enter_context(previous_release(args.previous))
            dbs = Databases(stack)
            dbs.template(previous)
            dbs.template(ROOT)
            wholes = {
                name: pool.submit(relay_per_delivery, tree, dbs, receiver.url, args.rows, work)
                for name, tree in (
                    (f"previous release {args.previous[:12]}", previous),
                    ("this checkout", ROOT),
                )
            }
            parts: dict[str, Any] = {}
            if not args.no_parts:
                parts = {
                    part: pool.submit(
                        part_counts,
                        ROOT,
                        dbs,
                        receiver.url,
                        part,
                        args.rows,
                        work,
                        times=CPU_ONLY.get(part, 1),
                    )
                    for part in ("none", *PARTS)
                }
            whole = {name: job.result() for name, job in wholes.items()}
            counts = {part: job.result() for part, job in parts.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"relay_instructions: the relay's Python per delivery (callgrind, {args.rows} deliveries, "
        f"batches of {BATCH}, {CONCURRENCY} in flight), {time.monotonic() - began:.0f} s"
    )
    base = next(iter(whole.values()))
    for name, figure in whole.items():
        print(f"    {name:40} {figure / 1e3:9.1f} k   ({figure / base:.3f}x the previous)")
    if counts:
        per = {part: (counts[part] - counts["none"]) / (args.rows * CPU_ONLY.get(part, 1)) for part in PARTS}
        per["record"] = per.pop("claim_record") - per["claim"]
        per["http"] -= per["request"]
        per["request"] -= per["sign"]
        mine = whole["this checkout"]
        print("    by part, this checkout (k instructions per delivery):")
        for part in ("sign", "request", "http", "claim", "record", "metrics", "logging"):
            print(f"        {part:12} {per[part] / 1e3:8.1f} k  {per[part] / mine:6.1%}")
        rest = mine - sum(v for k, v in per.items() if k != "logging")
        print(f"        {'the rest':12} {rest / 1e3:8.1f} k  {rest / mine:6.1%}  (logging: per retried row)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--drive-relay":
        _drive_relay(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--drive-parts":
        _drive_parts(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        sys.exit(0)
    sys.exit(main())
