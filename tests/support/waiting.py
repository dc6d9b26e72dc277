"""Waiting in an async test for what a loop under test does: its counters, its callbacks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], bool], within: float = 30.0) -> None:
    """Poll ``condition`` every 20 ms until it holds; TimeoutError after ``within`` seconds."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - polling a loop's counters, set by plain code
            await asyncio.sleep(0.02)
