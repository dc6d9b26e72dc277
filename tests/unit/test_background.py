"""Background loops share one shape: rounds counted, failures logged and survived, woken early,
stopped together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from service.background import Background, Periodic


class Counting(Periodic):
    name = "counting"

    def __init__(self, fail_on: set[int] | None = None, interval: float = 60.0) -> None:
        super().__init__(interval)
        self.calls = 0
        self.fail_on = fail_on or set()
        self.failures: list[str] = []

    async def run_once(self) -> None:
        self.calls += 1
        if self.calls in self.fail_on:
            raise RuntimeError(f"round {self.calls}")

    def failed(self, error: Exception) -> None:
        self.failures.append(str(error))


async def _until(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` (the loops' round counters) for up to five seconds."""
    async with asyncio.timeout(5.0):
        while not predicate():  # noqa: ASYNC110 - polling a plain counter
            await asyncio.sleep(0.001)


async def test_a_loop_runs_a_round_at_once_then_waits_for_its_interval_or_a_wake() -> None:
    loop = Counting()
    async with Background([loop]):
        await _until(lambda: loop.rounds == 1)
        await asyncio.sleep(0.05)
        assert loop.rounds == 1  # a minute to the next round
        loop.wake()
        await _until(lambda: loop.rounds == 2)


async def test_a_failed_round_is_reported_and_the_loop_goes_on() -> None:
    loop = Counting(fail_on={1}, interval=0.01)
    async with Background([loop]):
        await _until(lambda: loop.rounds >= 3)
    assert loop.failures == ["round 1"]


async def test_stopping_ends_every_loop() -> None:
    loops = [Counting(), Counting()]
    background = Background(loops)
    background.start()
    await _until(lambda: all(loop.rounds for loop in loops))
    await asyncio.wait_for(background.stop(), timeout=1.0)
    assert background.stopping.is_set()


class Forever:
    """A loop that ignores its stop: only cancelling ends it."""

    name = "forever"
    rounds = 0

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.Event().wait()


class Broken:
    name = "broken"
    rounds = 0

    async def run(self, stop: asyncio.Event) -> None:
        raise RuntimeError("a bug")


class Finishing:
    """A loop that takes a while to finish after its stop, noting whether ``Forever`` still runs."""

    name = "finishing"
    rounds = 0

    def __init__(self) -> None:
        self.saw_the_other_running: bool | None = None
        self.others: list[asyncio.Task[None]] = []

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()
        await asyncio.sleep(0.05)
        self.saw_the_other_running = all(not task.done() for task in self.others)


async def test_loops_that_serve_the_others_go_on_until_they_return_then_are_cancelled() -> None:
    finishing, forever = Finishing(), Forever()
    background = Background([finishing, forever], cancel_last=[forever])
    background.start()
    finishing.others = [task for task in asyncio.all_tasks() if task.get_name() == "forever"]
    async with asyncio.timeout(5.0):
        await background.stop()
    assert finishing.saw_the_other_running is True


async def test_a_loop_that_fails_is_reported_at_once_and_the_others_go_on() -> None:
    reported: list[tuple[str, str]] = []
    survivor = Counting(interval=0.001)
    background = Background(
        [Broken(), survivor], on_failure=lambda loop, error: reported.append((loop.name, str(error)))
    )
    async with background:
        await _until(lambda: bool(reported) and survivor.rounds >= 2)
    assert reported == [("broken", "a bug")]
