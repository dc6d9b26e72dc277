"""``python -m relay``: deliver outbox rows to the Agent until SIGTERM or SIGINT, then exit 0."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import textwrap
from collections.abc import Coroutine
from typing import Any

from relay.config import RelayConfig
from relay.probes import ProbePortError
from relay.worker import Relay
from service import dev_env
from service.db.pooler import PoolerRefusalError
from service.logging import configure_logging
from service.settings import Settings, SettingsError, load_settings
from service.telemetry import TracingConfigError, configure_tracing

# Each variable with its default, read from the one settings object.
_NOTES = {
    "webhook_secret": "space-separated whsec_ secrets; each one signs",
    "relay_lease_seconds": "max(30, 3 x timeout)",
    "relay_poll_only": "false: LISTEN and poll",
    "relay_metrics_port": "unset: no /healthz /readyz /metrics; one port per relay on a host",
    "relay_id": "host-pid-random",
    "db_prepared_statements": "on; off behind a transaction pooler",
    "listen_database_url": "unset: DATABASE_URL, or poll only behind a transaction pooler",
}


def _environment() -> str:
    names = ["database_url", "agent_webhook_url", "webhook_secret", "db_prepared_statements"]
    names += ["listen_database_url"]
    names += [name for name in Settings.model_fields if name.startswith("relay_")]
    parts = []
    for name in names:
        default = Settings.model_fields[name].default
        note = _NOTES.get(name) or (None if default is None else str(default).lower())
        parts.append(name.upper() + (f" ({note})" if note else ""))
    return (
        "environment:\n  "
        + textwrap.fill(", ".join(parts), width=96, subsequent_indent="  ")
        + "\ntraces: the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER, ...;"
        + " unset: none)\n"
    )


ENVIRONMENT = _environment()


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
    try:
        # Traces only when the OTEL_* variables ask (relay.delivery: a span per delivery attempt).
        configure_tracing("lineup-relay")
    except TracingConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # alembic (read for /readyz) logs its plugin set-up at INFO.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    gc.freeze()  # what start-up built lives as long as the process: the collector skips it
    try:
        _run(_serve(RelayConfig.from_settings(settings)))
    except (ProbePortError, PoolerRefusalError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
