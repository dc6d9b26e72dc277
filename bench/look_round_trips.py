"""What a look for the next due time costs its caller: a round trip of its own, or a place in the
round trip before it.

    .venv/bin/python -m bench.look_round_trips [--rounds 1000] [--blocks 10] [--smoke]

Two callers look for the next due time after their main statement when it found less than it could
take: the relay after a claim (``relay.circuit.LOOK``: the next retry, the circuit) and the sweeper
after a batch (``SECONDS_UNTIL_NEXT_DEADLINE``). On a throwaway database where nothing is due (so
each round is the overhead alone), this times each in two forms, in alternating blocks of
``--rounds`` rounds, and prints the median over ``--blocks`` blocks of the client's CPU per round
(``time.process_time``: this process only, the least disturbed by other work on the machine), the
CPU of the database backend serving it (``/proc``, in clock ticks: ~10 ms a block) and the wall
time:

    relay, apart        claims.claim, then circuit.look: two round trips (until issue 53)
    relay, in the claim circuit.claim_and_look: the look in the claim's transaction, one round trip
    sweeper, apart      settle_due, then the look, each on a connection from the pool (what it does;
                        a pool of one connection here)
    sweeper, pipelined  the two statements in one psycopg pipeline on one connection (tried, issue 53)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import psycopg

from harness.database import throwaway_database
from harness.measure import process_cpu
from relay import circuit, claims
from service.db import operations as operations_db
from service.db.pool import Pool, open_pool
from service.domain.delivery import AGENT_ENDPOINT

Round = Callable[[], Awaitable[None]]


def forms(pool: Pool, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> dict[str, Round]:
    async def relay_apart() -> None:
        await claims.claim(conn, "bench", 64, 30)
        await circuit.look(conn, AGENT_ENDPOINT)

    async def relay_in_the_claim() -> None:
        await circuit.claim_and_look(conn, "bench", 64, 30, endpoint=AGENT_ENDPOINT)

    async def sweeper_apart() -> None:
        async with pool.connection() as one:
            await operations_db.settle_due(one, 200)
        async with pool.connection() as one:
            await operations_db.seconds_until_next_deadline(one)

    async def sweeper_pipelined() -> None:
        async with pool.connection() as one, one.pipeline():
            settled = await one.execute(operations_db.SETTLE_DUE, {"limit": 200})
            following = await one.execute(operations_db.SECONDS_UNTIL_NEXT_DEADLINE)
            await settled.fetchall()
            await following.fetchone()

    return {
        "relay, apart": relay_apart,
        "relay, in the claim": relay_in_the_claim,
        "sweeper, apart": sweeper_apart,
        "sweeper, pipelined": sweeper_pipelined,
    }


async def measure(url: str, rounds: int, blocks: int) -> dict[str, list[tuple[float, float, float]]]:
    pool = await open_pool(url, size=1)
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        named = forms(pool, conn)
        async with pool.connection() as one:
            pooled = one.info.backend_pid
        backends = {name: pooled if name.startswith("sweeper") else conn.info.backend_pid for name in named}
        for form in named.values():  # warm: prepared statements, plans, the pool
            for _ in range(200):
                await form()
        spent: dict[str, list[tuple[float, float, float]]] = {name: [] for name in named}
        for block in range(blocks):
            order = list(named) if block % 2 == 0 else list(reversed(named))
            for name in order:
                cpu, backend, wall = time.process_time(), process_cpu(backends[name]), time.perf_counter()
                for _ in range(rounds):
                    await named[name]()
                spent[name].append(
                    (
                        (time.process_time() - cpu) / rounds * 1e6,
                        (process_cpu(backends[name]) - backend) / rounds * 1e6,
                        (time.perf_counter() - wall) / rounds * 1e6,
                    )
                )
        return spent
    finally:
        await conn.close()
        await pool.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=1000, help="rounds per block")
    parser.add_argument("--blocks", type=int, default=10, help="alternating blocks per form")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: that it still runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.blocks = 5, 2
    if not (1 <= args.rounds <= 100_000 and 1 <= args.blocks <= 100):
        parser.error("keep it bounded: --rounds 1..100000, --blocks 1..100")
    with throwaway_database("looks") as url:
        spent = asyncio.run(measure(url, args.rounds, args.blocks))
    print(f"look_round_trips: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {args.blocks} blocks of {args.rounds}")
    print("    (medians of the blocks, per round)")
    for name, values in spent.items():
        cpu, backend, wall = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"    {name:<20} client CPU {cpu:6.1f} µs, backend {backend:6.1f} µs, wall {wall:7.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
