"""``/readyz``'s database probe answers within its bound, and probes never pile up on a dead
connection (``service.db.ready_check``)."""

from __future__ import annotations

import asyncio

from service.db.ready_check import ReadyCheck


async def test_a_probe_that_never_answers_is_a_reason_within_the_bound_and_one_probe_runs_at_a_time() -> None:
    started = 0
    release = asyncio.Event()

    async def silent() -> str | None:
        nonlocal started
        started += 1
        await release.wait()  # a statement on a connection whose peer vanished
        return None

    check = ReadyCheck(silent, timeout=0.05)
    assert await check() == "the database did not answer within 0.05 s"
    assert await check() == "the database did not answer within 0.05 s"
    assert started == 1  # the second probe waited on the first, still running
    release.set()
    assert await check() is None  # the first one's answer, once it came
    assert await check() is None
    assert started == 2


async def test_a_probe_that_fails_is_its_reason() -> None:
    async def refused() -> str | None:
        raise OSError("connection refused")

    async def behind() -> str | None:
        return "migrations at 0024, head is 0025: run migrate"

    assert await ReadyCheck(refused, timeout=1)() == "connection refused"
    assert await ReadyCheck(behind, timeout=1)() == "migrations at 0024, head is 0025: run migrate"
