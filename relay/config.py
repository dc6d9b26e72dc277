"""The relay's settings, resolved once at start from the shared ``Settings``.

Every default is the one ``service.settings.Settings`` declares; this is only the relay's view of
them, under shorter names.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from service.domain.delivery import AGENT_ENDPOINT
from service.settings import Settings


@dataclass(frozen=True, slots=True)
class RelayConfig:
    database_url: str
    webhook_url: str
    webhook_secrets: tuple[str, ...]
    relay_id: str
    max_attempts: int
    backoff_base: float
    backoff_max: float
    timeout: float
    lease_seconds: float
    poll_only: bool
    poll_interval: float
    concurrency: int
    batch_size: int
    metrics_host: str
    metrics_port: int
    retention_days: int
    dead_retention_days: int
    circuit_failures: int
    circuit_probe_seconds: float
    shutdown_grace: float
    # DB_PREPARED_STATEMENTS, and LISTEN_DATABASE_URL (None: LISTEN on database_url unless that
    # leads through a transaction pooler, then poll only).
    prepared: bool = True
    listen_url: str | None = None
    endpoint: str = AGENT_ENDPOINT
    # READY_CHECK_TIMEOUT_SECONDS: /readyz's database probe, unanswered this long, is a 503.
    ready_timeout: float = 2.0
    # On Citus: claims, outcomes and pruning on the shards of the node DATABASE_URL leads to (a
    # worker), found when the relay connects (relay.worker).
    on_node: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> RelayConfig:
        return cls(
            database_url=settings.psycopg_url,
            webhook_url=settings.agent_webhook_url or "",
            webhook_secrets=settings.webhook_secrets,
            relay_id=settings.relay_id or default_relay_id(),
            max_attempts=settings.relay_max_attempts,
            backoff_base=settings.relay_backoff_base_seconds,
            backoff_max=settings.relay_backoff_max_seconds,
            timeout=settings.relay_timeout_seconds,
            lease_seconds=settings.relay_lease,
            poll_only=settings.relay_poll_only,
            poll_interval=settings.relay_poll_interval_seconds,
            concurrency=settings.relay_concurrency,
            batch_size=settings.relay_batch_size,
            metrics_host=settings.relay_metrics_host,
            metrics_port=settings.relay_metrics_port or 0,
            retention_days=settings.relay_retention_days,
            dead_retention_days=settings.relay_dead_retention_days,
            circuit_failures=settings.relay_circuit_failures,
            circuit_probe_seconds=settings.relay_circuit_probe_seconds,
            shutdown_grace=settings.relay_shutdown_grace_seconds,
            prepared=settings.db_prepared_statements,
            listen_url=settings.listen_psycopg_url,
            ready_timeout=settings.ready_check_timeout_seconds,
        )


def default_relay_id() -> str:
    """Unique per process, readable in ``outbox_attempts.relay_id``: host, pid and a random tag."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def redacted(url: str) -> str:
    """The webhook URL as logs may show it: no user, password, query or fragment (they may hold
    credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
