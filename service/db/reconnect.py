"""How every process finds its database again after a restart or a failover.

One policy for the pools (service and relay), the LISTEN connections and the wake-up sender: try
again soon and then less often (``Backoff``: 50 ms doubling to a cap, with jitter so that many
processes do not knock in step). With a multi-host ``DATABASE_URL`` each attempt is libpq's walk
over the hosts (``target_session_attrs=read-write``), so "again" finds the new primary as soon as
it is promoted: a failover costs the promotion plus one pause, not a restart of the process.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, Self

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import Row

FIRST_PAUSE = 0.05
# A pooled connection's connect keeps trying this long before it reports a failure to the pool
# (which then retries after its own 1 s, 2 s, … backoff): a failover of a few seconds is bridged
# with pauses of at most CONNECT_LAST_PAUSE, so the pool is back at most that long after it.
CONNECT_WINDOW = 15.0
CONNECT_LAST_PAUSE = 0.25


def session_ended(error: BaseException) -> bool:
    """The server ended the session under the statement: a transaction left idle past the role's
    ``idle_in_transaction_session_timeout`` (its client stalled or was cut off), or a session idle
    past ``idle_session_timeout``. Nothing of it was applied; the connection is gone, and the caller
    may send the request again, as after a lost connection."""
    return isinstance(
        error, psycopg.errors.IdleInTransactionSessionTimeout | psycopg.errors.IdleSessionTimeout
    )


class Backoff:
    """Pauses between attempts: ``first`` doubling up to ``last``, each ±20 % at random."""

    def __init__(self, first: float = FIRST_PAUSE, last: float = 5.0) -> None:
        self.first = first
        self.last = last
        self._next = first

    def pause(self) -> float:
        current = self._next
        self._next = min(self.last, current * 2)
        return current * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self._next = self.first


class PatientConnection(AsyncConnection[Row]):
    """A connection whose ``connect`` rides out a restart or a failover for ``CONNECT_WINDOW``.

    The pools create their connections through it, so a pool emptied by a failover refills as soon
    as a primary accepts connections again, rather than at the pool's next 1-2-4-8 s attempt.
    """

    @classmethod
    async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        backoff = Backoff(last=CONNECT_LAST_PAUSE)
        give_up = time.monotonic() + CONNECT_WINDOW
        while True:
            try:
                return await super().connect(conninfo, **kwargs)
            except psycopg.OperationalError:
                pause = backoff.pause()
                if time.monotonic() + pause > give_up:
                    raise
                await asyncio.sleep(pause)
