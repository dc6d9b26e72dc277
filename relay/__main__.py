"""``python -m relay``: deliver outbox rows to the Agent until SIGTERM or SIGINT, then exit 0."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from relay.config import RelayConfig
from relay.probes import ProbePortError
from relay.worker import Relay
from service import dev_env
from service.logging import configure_logging
from service.settings import SettingsError, load_settings

ENVIRONMENT = """\
environment:
  DATABASE_URL, AGENT_WEBHOOK_URL, WEBHOOK_SECRET (space-separated whsec_ secrets; each one signs)
  RELAY_MAX_ATTEMPTS (25), RELAY_BACKOFF_BASE_SECONDS (1), RELAY_BACKOFF_MAX_SECONDS (600),
  RELAY_TIMEOUT_SECONDS (10), RELAY_LEASE_SECONDS (max(30, 3 x timeout)), RELAY_CONCURRENCY (64),
  RELAY_BATCH_SIZE (100), RELAY_POLL_ONLY (false: LISTEN and poll), RELAY_POLL_INTERVAL_SECONDS (1),
  RELAY_METRICS_HOST (127.0.0.1), RELAY_METRICS_PORT (unset: no /healthz /readyz /metrics; one port
  per relay on a host),
  RELAY_RETENTION_DAYS (7), RELAY_SHUTDOWN_GRACE_SECONDS (5), RELAY_ID (host-pid-random)
"""


async def _serve(config: RelayConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await Relay(config).run(stop)


def _run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m relay",
        description="The outbox relay: delivers tool results to the Agent; any number may run at once.",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(argv)
    if (found := dev_env.adopt(os.environ)) is not None:
        print(dev_env.note(found), file=sys.stderr)
    try:
        settings = load_settings("relay")
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging()
    # httpx logs one INFO line per request; alembic (read for /readyz) its plugin set-up.
    for noisy in ("httpx", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        _run(_serve(RelayConfig.from_settings(settings)))
    except ProbePortError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
