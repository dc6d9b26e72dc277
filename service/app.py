"""The Litestar application: handlers, error mapping, and the lifespan that owns the pool."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import structlog
from litestar import Litestar
from litestar.datastructures import ResponseHeader, State
from litestar.exceptions import HTTPException, ValidationException
from psycopg import InternalError, OperationalError

from service.api import probes
from service.api.bodies import ContractRequest
from service.api.document import (
    openapi_config,
    ui_asset,
    without_litestar_validation_answers,
)
from service.api.errors import (
    database_unavailable,
    http_error,
    internal_database_error,
    refusal,
    unexpected_error,
    validation_failed,
)
from service.api.events import HostEventsController
from service.api.front_door import front_door
from service.api.host import HostController
from service.api.host_capability import HostCapabilityController
from service.api.host_sessions import HostSessionsController
from service.api.lean_route import check_lean_routes
from service.api.ops import OpsController
from service.api.sdk import SdkController
from service.api.tools import agent_tool_controller
from service.api.web import WebHostController
from service.background import Background, Loop, default_loop_rounds
from service.console.routes import ConsoleController
from service.db import citus
from service.db.pool import RecoveringPool, idle_transaction_bound, open_pool
from service.db.pooler import PoolerRefusalError, pooler_refusal, transaction_pooling
from service.domain.errors import Refusal
from service.host_names import HostAllowList
from service.host_streams import HostStreams
from service.http import TokenBook
from service.http_tracing import route_middleware, with_http_spans
from service.loop_lag import LoopLag, default_lag_histogram
from service.manifests import Registry
from service.mcp.endpoint import mcp_endpoint, mcp_lifespan, protected_resource_metadata
from service.metrics import POOLS
from service.outbox_history import OutboxHistory
from service.projection_hub import ProjectionHub
from service.settings import Settings
from service.use_cases.deadlines import DeadlineSweeper
from service.use_cases.delegation import DelegationWatch
from service.use_cases.history_retention import HistoryPruning
from service.use_cases.host_sessions import SessionTokens
from service.use_cases.maintenance import Maintenance
from service.use_cases.runtime import Runtime
from service.wakeups import Wakeups
from service.web.console_cookie import ConsoleSessions

# The audiences whose bearer tokens the service takes (``Settings.tokens``).
AUDIENCES = ("agent", "host", "operator", "metrics")

log = structlog.get_logger("service.app")


LOOP_FAILURE_GRACE = 3.0


@dataclass(frozen=True, slots=True)
class LoopFailure:
    """A background loop of this process ended with an error: /readyz says so, the process exits."""

    loop: str
    error: str
    at: float  # time.monotonic()

    @property
    def reason(self) -> str:
        return f"background loop {self.loop} failed: {self.error}"


async def session_url(settings: Settings) -> str | None:
    """Where this process LISTENs (None: it polls), once the pooler in front of the database, if
    any, has been told apart (``service.db.pooler``); refuses a combination that cannot work."""
    pooled = await transaction_pooling(settings.psycopg_url)
    refusal = pooler_refusal(transaction_pooled=pooled, prepared=settings.db_prepared_statements)
    listen_url = settings.listen_psycopg_url
    if refusal is None and listen_url is not None and await transaction_pooling(listen_url):
        refusal = (
            "LISTEN_DATABASE_URL leads through a connection pooler in transaction mode, where LISTEN "
            "hears nothing: point it at Postgres itself or at a pooler in session mode, or unset it"
        )
    if refusal is not None:
        log.error("start_refused", reason=refusal)
        raise PoolerRefusalError(refusal)
    if listen_url is None and not pooled:
        return settings.psycopg_url
    if listen_url is None:
        log.info("projections_polling", reason="DATABASE_URL leads through a transaction pooler")
    return listen_url


def create_app(settings: Settings, registry: Registry, *, sweeper: bool = True) -> Litestar:
    """The service. ``sweeper=False`` leaves deadlines to the requests and to other replicas."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        prepared = settings.db_prepared_statements
        listen_url = await session_url(settings)
        pool = await open_pool(
            settings.psycopg_url,
            size=settings.db_pool_size,
            name="lineup-service",
            prepared=prepared,
            timeout=settings.db_unavailable_after_seconds,
        )
        async with pool.connection() as conn:
            distributed = await citus.is_distributed(conn)
            idle_bound = await idle_transaction_bound(conn)
        if idle_bound == "0":
            # Connected as a role without the runtime role's limits (a superuser, say): a replica
            # cut off with a conversation's lock held keeps it until TCP gives up (minutes).
            log.warning(
                "db_idle_transactions_unbounded",
                setting="idle_in_transaction_session_timeout",
                hint="connect as the runtime role made by `python -m service roles` (docs/operations.md,"
                " Database roles), or set it for this role",
            )
        if distributed:
            # On Citus a connection that saw a failed statement may never delegate again: closed.
            if isinstance(pool, RecoveringPool):
                pool.discard_after_error = True
            log.info("citus_distributed", sweeper="by conversation", failed_connections="discarded")
        app.state.distributed = distributed
        wakeups = Wakeups(settings.psycopg_url, prepared=prepared)
        runtime = Runtime(pool=pool, settings=settings, registry=registry, wakeups=wakeups)
        app.state.runtime = runtime
        app.state.projections = ProjectionHub(
            listen_url,
            wakeups,
            pool=pool,
            poll_seconds=settings.projection_poll_seconds,
            prepared=prepared,
            wake_interval=settings.projection_wake_interval_seconds,
        )
        app.state.host_streams = HostStreams(
            pool,
            app.state.projections,
            per_session=settings.sse_streams_per_session,
            total=settings.sse_streams_total,
            session_check_seconds=settings.sse_session_check_seconds,
        )
        loops: list[Loop] = [
            wakeups,
            app.state.projections,
            Maintenance(
                pool,
                app.state.outbox_history,
                write_window=settings.write_limit_window_seconds,
                distributed=distributed,
            ),
        ]
        loops.append(HistoryPruning(pool, settings.history_retention_days, distributed=distributed))
        if sweeper:
            app.state.sweeper = DeadlineSweeper(
                pool,
                wakeups,
                claimers=settings.sweeper_claimers,
                batch_size=settings.sweeper_batch_size,
                max_sleep=settings.sweeper_poll_seconds,
                distributed=distributed,
            )
            loops.append(app.state.sweeper)
        app.state.loop_lag = LoopLag(default_lag_histogram())
        loops.append(app.state.loop_lag)
        if distributed:
            loops.append(DelegationWatch(pool))
        app.state.loop_failure = None

        def failed(loop: Loop, error: BaseException) -> None:
            # No loop of serve ends but at the stop: one that does is a bug or a state it cannot
            # leave. Say so at once, fail /readyz naming it, and have the process exit non-zero
            # (``service.cli.serve``) after LOOP_FAILURE_GRACE seconds, for its supervisor.
            log.error("background_loop_failed", loop=loop.name, error=repr(error))
            app.state.loop_failure = LoopFailure(loop.name, repr(error), time.monotonic())

        POOLS.watch(pool)
        try:
            # Stopped on SIGTERM before connections drain (app.state.stopping), so streams end promptly.
            async with Background(loops, app.state.stopping, on_failure=failed, rounds=default_loop_rounds()):
                yield
        finally:
            POOLS.forget(pool)
            await pool.close()

    app = Litestar(
        route_handlers=[
            agent_tool_controller(registry),
            HostController,
            HostCapabilityController,
            HostSessionsController,
            HostEventsController,
            OpsController,
            ConsoleController,
            SdkController,
            WebHostController,
            *probes.HANDLERS,
            front_door,
            ui_asset,
            mcp_endpoint,
            protected_resource_metadata,
        ],
        exception_handlers={
            Refusal: refusal,
            ValidationException: validation_failed,
            HTTPException: http_error,
            OperationalError: database_unavailable,
            # Class XX (Citus' failed node among them) and the sessions the server ended (25P0x).
            InternalError: internal_database_error,
            Exception: unexpected_error,
        },
        state=State(
            {
                "tokens": TokenBook(
                    {a: settings.tokens(a) for a in ("agent", "host", "operator", "metrics")}
                ),
                "session_tokens": SessionTokens(settings.host_session_secret),
                # The Host names the token-less endpoints answer to (service.host_names).
                "allowed_hosts": HostAllowList.of(settings.public_origin, settings.host_names),
                "console_sessions": ConsoleSessions(settings.tokens("operator")),
                "outbox_history": OutboxHistory(),
                # The apps it runs: its OpenAPI document is theirs (service.api.document).
                "registry": registry,
                # Set on SIGTERM before connections drain, so event streams end promptly.
                "stopping": asyncio.Event(),
                # A LoopFailure once a background loop has ended with an error.
                "loop_failure": None,
            }
        ),
        lifespan=[lifespan, mcp_lifespan],
        # The HTTP server span named by its route, when this process traces (none otherwise).
        middleware=route_middleware(),
        request_max_body_size=settings.request_max_body_bytes,
        openapi_config=openapi_config(ui=settings.api_docs_ui),
        # Every answer is fresh and typed as it says, unless a handler says otherwise (pages, assets).
        response_headers=[
            ResponseHeader(name="Cache-Control", value="no-store"),
            ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
        ],
        # Reads JSON bodies with the contract's errors (service/api/bodies.py).
        request_class=ContractRequest,
        debug=False,
        # Logging is configured once per process by service.logging (JSON lines on stderr).
        logging_config=None,
    )
    without_litestar_validation_answers(app)
    check_lean_routes(app)
    with_http_spans(app)  # the HTTP server span of each request, when this process traces
    return app
