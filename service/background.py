"""Background work, in one shape: loops that go round until their process stops.

Every loop of a process — the deadline sweeper, the maintenance samples and pruning, the wake-up
sender, the LISTEN loops, the relay's retention — is a ``Loop``: a ``name``, ``run(stop)`` that goes
round until ``stop`` is set, and ``rounds``, how many rounds it has finished (a test waits on it to
know the loop came round, instead of sleeping). A loop that works at an interval is a ``Periodic``:
``run_once()`` is one round, which is also what a test calls directly. ``Background`` starts a
process's loops as tasks and stops them; the HTTP app (so ``serve`` and the tests' in-process
service alike) and the relay start theirs through it. A process that must not go on without one of
its loops names what to do when one fails (``on_failure``); loops that only serve the others (the
relay's writers, which record what its claimer's drain hands them) go on until the others have
returned, and are then cancelled (``cancel_last``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Protocol

import structlog
from prometheus_client import REGISTRY, CollectorRegistry, Gauge

log = structlog.get_logger("service.background")


class Loop(Protocol):
    name: str

    @property
    def rounds(self) -> int: ...

    async def run(self, stop: asyncio.Event) -> None: ...


class LoopRounds:
    """Per loop: when it last finished a round (``lineup_background_loop_last_round_timestamp_seconds``)
    and how often it should (``lineup_background_loop_interval_seconds``, for the loops that go
    round at an interval: ``interval`` attribute). Read at scrape time, from ``rounds``: a round
    costs nothing more. A loop whose timestamp falls behind by several intervals is stuck or dead
    (alert ``LineupBackgroundLoopStalled``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.last_round = Gauge(
            "lineup_background_loop_last_round_timestamp_seconds",
            "Unix time at which a background loop was last seen to have finished a round "
            "(sampled when scraped).",
            ["loop"],
            registry=registry,
        )
        self.interval = Gauge(
            "lineup_background_loop_interval_seconds",
            "How often a background loop finishes a round when healthy (at most).",
            ["loop"],
            registry=registry,
        )

    def watch(self, loops: Iterable[Loop]) -> None:
        for loop in loops:
            interval = getattr(loop, "interval", None)
            if isinstance(interval, int | float) and interval > 0:
                self.interval.labels(loop.name).set(interval)
            self.last_round.labels(loop.name).set_function(_last_round(loop))


def _last_round(loop: Loop) -> Callable[[], float]:
    seen = [loop.rounds, time.time()]

    def sample() -> float:
        if loop.rounds != seen[0]:
            seen[0], seen[1] = loop.rounds, time.time()
        return seen[1]

    return sample


_DEFAULT_ROUNDS: list[LoopRounds] = []


def default_loop_rounds() -> LoopRounds:
    """The service's, in the default registry (``/metrics`` of ``serve``), made on first use."""
    if not _DEFAULT_ROUNDS:
        _DEFAULT_ROUNDS.append(LoopRounds(REGISTRY))
    return _DEFAULT_ROUNDS[0]


class Periodic(ABC):
    """A loop of one round every ``interval`` seconds (give or take ``jitter``, a fraction), and at
    once when woken; a round that fails is logged and the loop goes on."""

    name = "periodic"

    def __init__(self, interval: float, *, jitter: float = 0.0, first_delay: float = 0.0) -> None:
        self.interval = interval
        self.jitter = jitter
        self.first_delay = first_delay
        self._rounds = 0
        self._woken = asyncio.Event()

    @property
    def rounds(self) -> int:
        return self._rounds

    @abstractmethod
    async def run_once(self) -> None:
        """One round."""

    def failed(self, error: Exception) -> None:
        """A round raised ``error``: logged; the next round comes at the usual time."""
        log.warning(f"{self.name.replace('-', '_')}_failed", error=str(error).strip() or repr(error))

    def wake(self) -> None:
        self._woken.set()

    async def run(self, stop: asyncio.Event) -> None:
        await self._wait(stop, self.first_delay)
        while not stop.is_set():
            self._woken.clear()
            try:
                await self.run_once()
            except Exception as exc:
                self.failed(exc)
            self._rounds += 1
            await self._wait(stop, self.interval * random.uniform(1 - self.jitter, 1 + self.jitter))

    async def _wait(self, stop: asyncio.Event, seconds: float) -> None:
        await sleep_until(seconds, stop, self._woken)


async def sleep_until(seconds: float, *events: asyncio.Event) -> None:
    """The loops' one wait: ``seconds`` at most, less when any of ``events`` (a stop, a wake-up) is
    set; the waiters are gone when it returns, however it ends (a cancellation included)."""
    if seconds <= 0:
        return
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        for waiter in waiters:
            with contextlib.suppress(asyncio.CancelledError):
                await waiter


class Background:
    """A process's loops, each run as a task from ``start`` until ``stop``.

    ``stop`` sets the loops' stop event and waits for every loop to return, but those named in
    ``cancel_last``: they go on until the others have returned, and are then cancelled.
    ``on_failure`` is called as soon as a loop ends with an error (the error is logged at the stop
    otherwise). ``rounds`` publishes each loop's last round (``LoopRounds``).
    """

    def __init__(
        self,
        loops: Iterable[Loop],
        stop: asyncio.Event | None = None,
        *,
        on_failure: Callable[[Loop, BaseException], None] | None = None,
        cancel_last: Iterable[Loop] = (),
        rounds: LoopRounds | None = None,
    ) -> None:
        self.loops = list(loops)
        if rounds is not None:
            rounds.watch(self.loops)
        self.stopping = stop or asyncio.Event()
        self._on_failure = on_failure
        self._last = {id(loop) for loop in cancel_last}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(loop.run(self.stopping), name=loop.name) for loop in self.loops]
        if self._on_failure is not None:
            for loop, task in zip(self.loops, self._tasks, strict=True):
                task.add_done_callback(self._reporter(loop))

    def _reporter(self, loop: Loop) -> Callable[[asyncio.Task[None]], None]:
        def report(task: asyncio.Task[None]) -> None:
            if self._on_failure is not None and not task.cancelled() and (error := task.exception()):
                self._on_failure(loop, error)

        return report

    async def stop(self) -> None:
        self.stopping.set()
        pairs = list(zip(self.loops, self._tasks, strict=True))
        served = [task for loop, task in pairs if id(loop) not in self._last]
        if served:
            await asyncio.wait(served)
        for loop, task in pairs:
            if id(loop) in self._last:
                task.cancel()
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._on_failure is None:
            for loop, result in zip(self.loops, results, strict=True):
                if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                    log.error("background_loop_failed", loop=loop.name, error=repr(result))
        self._tasks = []

    async def __aenter__(self) -> Background:
        self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.stop()
