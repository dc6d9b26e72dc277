"""``python -m service serve``: settings and manifests are checked before the port opens."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from types import FrameType

import psycopg
import uvicorn
from litestar.datastructures import State

from service.app import LOOP_FAILURE_GRACE, create_app, session_url
from service.db.pooler import PoolerRefusalError
from service.logging import configure_logging
from service.manifests import ManifestError, registry_of
from service.settings import load_settings
from service.telemetry import TracingConfigError, configure_tracing


def run(host: str, port: int, *, sweeper: bool = True) -> int:
    configure_logging()
    settings = load_settings("serve")
    try:
        # Before the app is built: what it instruments depends on whether this process traces.
        configure_tracing("lineup-serve")
    except TracingConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        registry = registry_of(settings)  # built once: every face and loop gets this object
    except ManifestError as exc:
        print(f"error: bad manifest: {exc}", file=sys.stderr)
        return 2
    if missing := registry.unregistered():
        print(f"error: manifests declare tools this runtime cannot run: {missing}", file=sys.stderr)
        return 2
    try:
        # Before the port opens: a pooler this configuration cannot work behind stops it here.
        asyncio.run(session_url(settings))
    except PoolerRefusalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except psycopg.OperationalError:
        pass  # no database yet: the lifespan's probe, once it answers, decides
    app = create_app(settings, registry, sweeper=sweeper)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=20,
    )
    # What start-up built (modules, the app, its schemas) lives as long as the process: the cyclic
    # collector need not walk it again on every full collection (about 2% of a tool call's CPU).
    gc.freeze()
    server = GracefulServer(config, app.state.stopping, app.state)
    server.run()
    if not server.started:
        # The lifespan refused to start (its reason is logged: a pooler refusal names the setting).
        print("error: serve did not start (see the log line above)", file=sys.stderr)
        return 2
    if (failure := app.state.loop_failure) is not None:
        print(f"error: {failure.reason}", file=sys.stderr)
        return 1
    return 0


class GracefulServer(uvicorn.Server):
    """On SIGTERM/SIGINT: tell long-lived streams to end, drain connections, exit 0. When a
    background loop has failed (``state.loop_failure``): /readyz answers 503 for
    ``LOOP_FAILURE_GRACE`` seconds (load balancers take the replica out), then the same stop."""

    def __init__(self, config: uvicorn.Config, stopping: asyncio.Event, state: State) -> None:
        super().__init__(config)
        self._stopping = stopping
        self._state = state

    async def on_tick(self, counter: int) -> bool:
        failure = self._state.loop_failure
        if failure is not None and time.monotonic() - failure.at >= LOOP_FAILURE_GRACE:
            self._stopping.set()
            return True
        return await super().on_tick(counter)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._stopping.set()
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal after shutting down; a graceful stop exits 0 instead.
        self._captured_signals.clear()
