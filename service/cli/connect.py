"""The first connection of a one-shot command (``migrate``, ``roles``, ``distribute``): the database
may still be starting (a compose stack without health gating, a Kubernetes Job beside a Postgres
pod), so it is tried again for a bounded time, one line per try, then given up with the last error."""

from __future__ import annotations

import sys
import time
from typing import Any

import psycopg

from service.db import urls

#: Seconds between two tries of the first connection.
RETRY_SECONDS = 2.0


def shown(url: str) -> str:
    """The URL without its password, for a log line."""
    secret = urls.password(url)
    return url.replace(f":{secret}@", ":***@") if secret else url


def connect_when_ready(
    url: str,
    seconds: float,
    *,
    command: str,
    setting: str,
    sleep: float = RETRY_SECONDS,
    **connect_options: Any,
) -> psycopg.Connection[Any]:
    """A connection to ``url`` once the database takes one, tried for at most ``seconds`` (the
    variable ``setting``), one line per try on stderr prefixed ``command:``; SystemExit naming the
    setting and the last error (never the password) once the time is up. ``connect_options`` go to
    :func:`psycopg.connect`."""
    deadline = time.monotonic() + seconds
    tries = 0
    while True:
        tries += 1
        try:
            return psycopg.connect(url, connect_timeout=5, **connect_options)
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(
                    f"{command}: cannot connect to {shown(url)} after {tries} tries in"
                    f" {seconds:g} s ({setting}): {reason}"
                ) from None
            wait = min(sleep, left)
            print(
                f"{command}: cannot connect to the database yet (try {tries}: {reason}); trying again in"
                f" {wait:.0f} s, {left:.0f} s left",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(wait)
