"""``/healthz``, ``/readyz`` and ``/metrics`` on the relay's own port: a few lines of asyncio HTTP/1.0."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json

import psycopg
import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from relay.database import RelayPool
from relay.metrics import RelayMetrics
from service.db.ready_check import ReadyCheck
from service.db.schema_revision import schema_problem
from service.version import __version__

log = structlog.get_logger("relay.probes")
# The process is up, and the release it runs (as the service's /healthz says it).
_HEALTH = json.dumps({"status": "ok", "version": __version__}).encode()


class ProbePortError(Exception):
    """The probe port cannot be listened on (most often: another process already has it)."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        why = "it is already in use" if error.errno == errno.EADDRINUSE else error.strerror or str(error)
        super().__init__(
            f"RELAY_METRICS_PORT: cannot listen on {host}:{port} for /healthz, /readyz and /metrics: "
            f"{why}; give each relay on this host its own port, or leave RELAY_METRICS_PORT unset"
        )


class ProbeServer:
    def __init__(
        self, metrics: RelayMetrics, pool: RelayPool, *, host: str, port: int, ready_timeout: float = 2.0
    ) -> None:
        self._metrics = metrics
        self._pool = pool
        # /readyz answers within ready_timeout even when the database vanished (service.db.ready_check).
        self._ready = ReadyCheck(self._schema, ready_timeout)
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Listen, or raise ``ProbePortError`` naming the port when that is impossible."""
        try:
            self._server = await asyncio.start_server(self._handle, self._host, self._port)
        except OSError as exc:
            raise ProbePortError(self._host, self._port, exc) from None

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):
                request = await reader.readuntil(b"\r\n\r\n")
                method, _, rest = request.decode("latin-1").partition(" ")
                path = rest.partition(" ")[0].partition("?")[0]
                status, content_type, body = await self._route(method, path)
                head = (
                    f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                )
                writer.write(head.encode("latin-1") + (body if method != "HEAD" else b""))
                await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _route(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n"
        if path == "/healthz":
            return "200 OK", "application/json", _HEALTH
        if path == "/readyz":
            problem = await self._not_ready()
            if problem is None:
                return "200 OK", "application/json", b'{"status": "ready"}'
            body = json.dumps({"status": "not_ready", "reason": problem}).encode()
            return "503 Service Unavailable", "application/json", body
        if path == "/metrics":
            await self._refresh_outbox()
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self._metrics.registry)
        return "404 Not Found", "text/plain", b"not found\n"

    async def _not_ready(self) -> str | None:
        """Why the relay cannot work now: the database unreachable or silent, or not serving this
        release."""
        return await self._ready()

    async def _schema(self) -> str | None:
        try:
            async with self._pool.connection(timeout=self._ready.timeout) as conn:
                return await schema_problem(conn)
        except psycopg.Error as exc:
            return f"database unreachable ({type(exc).__name__})"

    async def _refresh_outbox(self) -> None:
        try:
            async with self._pool.connection(timeout=2) as conn:
                await self._metrics.refresh_outbox(conn)
        except psycopg.Error as exc:
            self._metrics.database_reachable.set(0)
            log.warning("relay_metrics_refresh_failed", error=str(exc).strip())
        else:
            self._metrics.database_reachable.set(1)
