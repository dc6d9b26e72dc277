"""LISTEN for committed outbox rows; the relay's poll covers whatever a lost connection misses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import psycopg
import structlog

from relay.database import APPLICATION_NAME

log = structlog.get_logger("relay.wakeup")
CHANNEL = "lineup_outbox"
FIRST_RETRY = 0.5
LAST_RETRY = 10.0


async def listen(url: str, wake: Callable[[], None], stop: asyncio.Event) -> None:
    """Call ``wake`` on every notification, and once after each (re)connect; reconnect on any failure."""
    pause = FIRST_RETRY
    while not stop.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(
                url, autocommit=True, application_name=f"{APPLICATION_NAME}-listen"
            ) as conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                pause = FIRST_RETRY
                wake()  # whatever committed while we were not listening
                async for _ in conn.notifies():
                    wake()
        except psycopg.Error as exc:
            log.warning("relay_listen_lost", error=str(exc).strip(), retry_in=pause)
        await asyncio.sleep(pause)
        pause = min(LAST_RETRY, pause * 2)
