"""The deadline sweeper: settles focusing operations whose ``ends_at`` has passed.

Each claimer sleeps until the earliest deadline it knows of. A start accepted by this process
wakes it at once when it falls due earlier (``consider``, called after the start commits);
deadlines opened by other replicas are found by its poll, at least every ``max_sleep`` seconds.
A batch is one statement, ``settle_due``: it claims due operations with ``FOR UPDATE OF
workspaces SKIP LOCKED`` and settles them through ``settle_focusing_v2``, so any number of claimers
(``claimers`` here, and those of other replicas) settle side by side, and each decision happens
exactly once — including the backlog that fell due while no service ran.

On Citus (``distributed``) a lock with ``SKIP LOCKED`` must stay within one shard, so a batch is
two steps: the conversations with a due operation, read on every shard without a lock
(``due_conversations``), then each settled by ``settle_due_in``, a function distributed by its
conversation: the coordinator hands the call to the worker holding that conversation, where it
takes the conversation's lock with ``SKIP LOCKED`` (a request holding it settles what is due
itself) and applies the deadline rule. The same decision, exactly once, one conversation at a time.

When the process traces (``service.trace_context.recording_tracer``), a batch that settles
something is one span, ``settle deadlines`` (INTERNAL: the service's own timer, no remote party),
with a link — not a parent: each start call's trace is its own, and one batch settles many — to the
trace context each settled operation kept of the call that started it, and the outbox rows it
queues carry the span's context (the relay's delivery spans link to it). The span needs the links
before it starts (a sampler sees them) and the rows need the span's context, so a traced batch is
two statements in one transaction: the claim (``claim_due``: the due operations with their
contexts, their conversations locked), then their settling (``settle_claimed``) inside the span. A
claim that finds nothing makes no span. Without traces, the batch is the one statement above. On
Citus, one span per due conversation, around its ``settle_due_in_traced``.

A claimer whose statement fails — any error: the database gone (``OperationalError``), or one it
refuses (``ProgrammingError`` and the like, e.g. a pooler that loses a prepared statement) — logs
one ``sweeper_failed`` line per failure and tries again after a pause that doubles from 50 ms to
``max_sleep`` (``service.db.reconnect.Backoff``); it never ends but at the stop. Its rounds stop
advancing meanwhile (``lineup_background_loop_last_round_timestamp_seconds``), which an alert
watches.
"""

from __future__ import annotations

import asyncio
from contextvars import Token
from datetime import datetime
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, StatusCode, Tracer, TracerProvider
from psycopg.rows import DictRow

from service.background import sleep_until
from service.clock import CLOCK
from service.db import operations as operations_db
from service.db.pool import Pool
from service.db.reconnect import Backoff
from service.metrics import SWEEPS
from service.trace_context import carrier, link, recording_tracer
from service.use_cases.unit_of_work import unit_of_work
from service.wakeups import Wakeups

log = structlog.get_logger("service.sweeper")

#: The span of one traced batch (or, on Citus, of one conversation's settling).
SETTLE_SPAN = "settle deadlines"


class DeadlineSweeper:
    """A background loop (``service.background``) of ``claimers`` claimers; a round is one look
    for the next deadline."""

    name = "deadline-sweeper"

    def __init__(
        self,
        pool: Pool,
        wakeups: Wakeups,
        *,
        claimers: int = 2,
        batch_size: int = 200,
        max_sleep: float = 1.0,
        busy_backoff: float = 0.02,
        distributed: bool = False,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self._pool = pool
        # None: the global provider, looked up at each batch (the process may install it later).
        self._tracer_provider = tracer_provider
        self._wakeups = wakeups
        self._claimers = claimers
        self._batch_size = batch_size
        self._max_sleep = max_sleep
        self._distributed = distributed
        self._full = False  # the last batch was full: more may be due at once
        self.interval = max_sleep  # a healthy claimer finishes a round at least this often
        self.failures = 0
        self._busy_backoff = busy_backoff
        # One event per claimer, cleared before it looks: a wake-up that arrives while it works
        # is never lost.
        self._wakes = [asyncio.Event() for _ in range(claimers)]
        # The database's time of the next deadline we know of (service.clock: the host's may be
        # off); a start whose ends_at is later needs no wake-up (the sleep already ends before it).
        self._next_due: float | None = None
        self.settled_total = 0
        # How many times a claimer has looked for the next deadline (and then gone to sleep).
        self.rounds = 0
        wakeups.on_deadline(self.consider)

    def wake(self) -> None:
        for event in self._wakes:
            event.set()

    def consider(self, deadline: datetime) -> None:
        """A start committed here: wake the claimers if it falls due before they would wake."""
        if self._next_due is None or deadline.timestamp() < self._next_due:
            self._next_due = deadline.timestamp()
            self.wake()

    async def sweep_once(self) -> list[dict[str, Any]]:
        """Settle one batch of due operations (one statement; two in a span when tracing); returns
        the settled rows."""
        tracer = recording_tracer(self._tracer_provider)
        if self._distributed:
            return await self._sweep_by_conversation(tracer)
        if tracer is not None:
            return await self._sweep_traced(tracer)
        async with unit_of_work(self._pool, self._wakeups, transaction=False) as work:
            rows = await operations_db.settle_due(work.conn, self._batch_size)
            if rows:
                work.observed(rows)
                work.then(SWEEPS.inc)
        self.settled_total += len(rows)
        self._full = len(rows) >= self._batch_size
        return rows

    async def _sweep_traced(self, tracer: Tracer) -> list[dict[str, Any]]:
        """The batch as a span: claimed, then settled inside ``settle deadlines``."""
        rows: list[DictRow] = []
        claimed: list[DictRow] = []
        with _SettleSpan(tracer) as span:
            async with unit_of_work(self._pool, self._wakeups) as work:
                claimed = await operations_db.claim_due(work.conn, self._batch_size)
                if claimed:
                    found = span.start(claimed)
                    rows = await operations_db.settle_claimed(
                        work.conn, claimed, found.get("traceparent"), found.get("tracestate")
                    )
                    span.settled = len(rows)
                    if rows:
                        work.observed(rows)
                        work.then(SWEEPS.inc)
        self.settled_total += len(rows)
        self._full = len(claimed) >= self._batch_size
        return list(rows)

    async def _sweep_by_conversation(self, tracer: Tracer | None) -> list[dict[str, Any]]:
        """On Citus: the due conversations (read on every shard), each settled on its own worker."""
        if tracer is not None:
            return await self._sweep_by_conversation_traced(tracer)
        async with self._pool.connection() as conn:
            due = await operations_db.due_conversations(conn, self._batch_size)
        rows: list[dict[str, Any]] = []
        for conversation_id in due:
            async with unit_of_work(self._pool, self._wakeups, transaction=False) as work:
                settled = await operations_db.settle_due_in(work.conn, conversation_id)
                if settled:
                    work.observed(settled)
                    work.then(SWEEPS.inc)
            rows += settled
        self.settled_total += len(rows)
        self._full = len(due) >= self._batch_size
        return rows

    async def _sweep_by_conversation_traced(self, tracer: Tracer) -> list[dict[str, Any]]:
        """On Citus, traced: a span per due conversation, linked to its due operations' starts."""
        async with self._pool.connection() as conn:
            due = await operations_db.due_conversations_traced(conn, self._batch_size)
        rows: list[dict[str, Any]] = []
        for found in due:
            claimed = [
                {
                    "conversation_id": found["conversation_id"],
                    "operation_id": operation_id,
                    "traceparent": traceparent,
                    "tracestate": tracestate,
                }
                for operation_id, traceparent, tracestate in zip(
                    found["operation_ids"], found["traceparents"], found["tracestates"], strict=True
                )
            ]
            with _SettleSpan(tracer) as span:
                context = span.start(claimed)
                async with unit_of_work(self._pool, self._wakeups, transaction=False) as work:
                    settled = await operations_db.settle_due_in_traced(
                        work.conn,
                        found["conversation_id"],
                        context.get("traceparent"),
                        context.get("tracestate"),
                    )
                    span.settled = len(settled)
                    if settled:
                        work.observed(settled)
                        work.then(SWEEPS.inc)
            rows += settled
        self.settled_total += len(rows)
        self._full = len(due) >= self._batch_size
        return rows

    async def _seconds_until_next(self) -> float | None:
        async with self._pool.connection() as conn:
            return await operations_db.seconds_until_next_deadline(conn)

    async def run(self, stop: asyncio.Event) -> None:
        claimers = [
            asyncio.create_task(self._claim(wake, stop), name=f"deadline-claimer-{n}")
            for n, wake in enumerate(self._wakes)
        ]
        try:
            await asyncio.gather(*claimers)
        finally:
            for task in claimers:
                task.cancel()
            await asyncio.gather(*claimers, return_exceptions=True)

    async def _claim(self, wake: asyncio.Event, stop: asyncio.Event) -> None:
        backoff = Backoff(last=self._max_sleep)
        while not stop.is_set():
            wake.clear()
            settled: list[dict[str, Any]] = []
            try:
                settled = await self.sweep_once()
                if self._full:
                    self.rounds += 1
                    continue
                wait = await self._seconds_until_next()
                self.rounds += 1
                backoff.reset()
            except Exception as exc:
                self.failures += 1
                pause = backoff.pause()
                log.warning(
                    "sweeper_failed",
                    error=str(exc).strip() or repr(exc),
                    error_type=type(exc).__name__,
                    retry_in=round(pause, 3),
                )
                await sleep_until(pause, wake, stop)
                continue
            self._next_due = None if wait is None else CLOCK.now() + wait
            if wait is None:
                wait = self._max_sleep
            elif wait <= 0:
                # Due but held by someone else (a request, another claimer or replica): look
                # again shortly rather than spin.
                wait = 0 if settled else self._busy_backoff
            await sleep_until(min(wait, self._max_sleep), wake, stop)


class _SettleSpan:
    """The span of a settling, started only once what it settles is known (``start``), current
    until the unit of work has committed and released what it made known, then ended: its status
    an error when the settling failed (the error's type; no message, which may carry data)."""

    __slots__ = ("_span", "_token", "_tracer", "settled")

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._span: Span | None = None
        self._token: Token[Context] | None = None
        self.settled = 0

    def start(self, claimed: list[Any]) -> dict[str, str]:
        """Start the span, linked to each claimed operation's start call; answers its context (as
        ``service.trace_context.carrier``), for the rows it will queue."""
        links: list[Link] = []
        for row in claimed:
            found = link(
                row["traceparent"],
                row["tracestate"],
                {
                    "lineup.operation_id": str(row["operation_id"]),
                    "lineup.conversation_id": row["conversation_id"],
                },
            )
            if found is not None:
                links.append(found)
        span = self._span = self._tracer.start_span(
            SETTLE_SPAN,
            kind=SpanKind.INTERNAL,
            links=links,
            attributes={"lineup.operations.due": len(claimed)},
            record_exception=False,
            set_status_on_exception=False,
        )
        self._token = otel_context.attach(trace.set_span_in_context(span))
        return carrier(span) or {}

    def __enter__(self) -> _SettleSpan:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _: object) -> None:
        span = self._span
        if span is None:
            return
        if self._token is not None:
            otel_context.detach(self._token)
        span.set_attribute("lineup.operations.settled", self.settled)
        if error is not None:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(StatusCode.ERROR, type(error).__qualname__)
        span.end()
