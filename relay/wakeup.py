"""LISTEN for committed outbox rows; the relay's poll covers whatever a lost connection misses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from relay.database import APPLICATION_NAME
from service.listen import Listener
from service.wakeups import OUTBOX_CHANNEL

CHANNEL = OUTBOX_CHANNEL


def listener(url: str, wake: Callable[[], None], *, prepared: bool = True) -> Listener:
    """Calls ``wake`` on every notification, and once after each (re)connect (``service.listen``)."""
    return Listener(
        url,
        [CHANNEL],
        on_notify=lambda _: wake(),
        on_connect=wake,  # whatever committed while we were not listening
        application_name=f"{APPLICATION_NAME}-listen",
        prepared=prepared,
    )


class OutboxListener:
    """A background loop (``service.background``): until ``stop``, reconnect on any failure, finding
    the primary of the moment; a round is a connection made."""

    name = "relay-listen"

    def __init__(self, url: str, wake: Callable[[], None], *, prepared: bool = True) -> None:
        self._listener = listener(url, wake, prepared=prepared)

    @property
    def rounds(self) -> int:
        return self._listener.connects

    async def run(self, stop: asyncio.Event) -> None:
        await self._listener.run(stop)
