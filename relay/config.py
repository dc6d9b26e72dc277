"""The relay's settings, resolved once at start from the shared ``Settings``."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from service.settings import Settings


@dataclass(frozen=True, slots=True)
class RelayConfig:
    database_url: str
    webhook_url: str
    webhook_secrets: tuple[str, ...]
    relay_id: str
    max_attempts: int = 25
    backoff_base: float = 1.0
    backoff_max: float = 600.0
    timeout: float = 10.0
    lease_seconds: float = 30.0
    poll_only: bool = False
    poll_interval: float = 1.0
    concurrency: int = 64
    batch_size: int = 100
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    retention_days: int = 7
    shutdown_grace: float = 5.0

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
            shutdown_grace=settings.relay_shutdown_grace_seconds,
        )


def default_relay_id() -> str:
    """Unique per process, readable in ``outbox_attempts.relay_id``: host, pid and a random tag."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
