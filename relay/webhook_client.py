"""The relay's HTTP/1.1 client for the one endpoint it posts to: keep-alive connections pooled, each
request written as one block of bytes, each answer parsed by ``httptools`` (llhttp, the parser
uvicorn runs on) and handed to a callback, with no task, future or per-request object of a general
client in between.

It does what the relay needs and nothing else: ``POST`` to one URL (``http`` or ``https``, with
the URL's user and password as Basic credentials), one request per connection at a time, at most
``limit`` connections, redirects never followed (a 3xx is an answer like any other), a deadline per
attempt that covers connecting, sending and the answer, and the first ``EXCERPT_BYTES`` of the
answer's body. An answer's status is final as soon as its head and the excerpt (or the whole body)
are in; a connection is used again only when its answer was read to the end and the server keeps it
open. Why not a general client: per delivery aiohttp's client cost about half the relay's Python
(the one-off ``relay_instructions`` bench, bench/HISTORY.md).

Failures get the names ``outbox_attempts.error_class`` records: ``Timeout`` (no answer within the
deadline), ``ConnectError`` (no connection), ``RemoteProtocolError`` (the server closed the
connection before answering, or answered something that is not HTTP/1.x), ``ReadError`` (the
connection failed while reading).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

import httptools
import structlog

from relay.policy import AttemptResult

log = structlog.get_logger("relay")

EXCERPT_BYTES = 512

#: What an attempt ends with: its result and how long it took (seconds).
Done = Callable[[AttemptResult, float], None]


class Exchange:
    """One request on its way: written, then answered, failed or timed out — exactly one of them
    calls ``done``."""

    __slots__ = ("connection", "done", "excerpt", "request", "retry_after", "started", "status", "timer")

    def __init__(self, request: bytes, done: Done, started: float) -> None:
        self.request = request
        self.done: Done | None = done
        self.started = started
        self.connection: _Connection | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.status = 0
        self.retry_after: str | None = None
        self.excerpt = b""

    def finish(self, result: AttemptResult) -> None:
        done, self.done = self.done, None
        if done is None:
            return
        if self.timer is not None:
            self.timer.cancel()
        try:
            done(result, time.perf_counter() - self.started)
        except Exception:
            # The caller's bug: logged, and the connection goes on.
            log.exception("relay_attempt_callback_failed")

    def answered(self) -> None:
        excerpt = self.excerpt.decode("utf-8", "replace").replace("\x00", "\ufffd") or None
        self.finish(AttemptResult(self.status, retry_after=self.retry_after, excerpt=excerpt))


class WebhookClient:
    def __init__(self, url: str, *, timeout: float, limit: int, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the webhook URL must be http:// or https:// with a host")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.timeout = timeout
        self.limit = limit
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = self.host if ":" not in self.host else f"[{self.host}]"
        if parts.port is not None:
            authority += f":{parts.port}"
        fixed = {"host": authority.encode("idna").decode("ascii"), **headers}
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            fixed["authorization"] = "Basic " + base64.b64encode(credentials).decode("ascii")
        self._head = (
            f"POST {target} HTTP/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        ).encode("latin-1")
        self._idle: list[_Connection] = []
        self._opened = 0  # connections open or opening
        self._waiting: deque[Exchange] = deque()
        self._in_flight: set[Exchange] = set()
        self._connecting: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def post(self, headers: bytes, body: bytes, done: Done) -> None:
        """Send ``body`` with ``headers`` (``name: value\\r\\n`` lines) besides the fixed ones; ``done``
        is called once, from the event loop, with the result."""
        exchange = Exchange(
            b"%bcontent-length: %d\r\n%b\r\n%b" % (self._head, len(body), headers, body),
            done,
            time.perf_counter(),
        )
        if self._closed:
            exchange.finish(AttemptResult(None, "RelayShutdown", "the relay is stopping"))
            return
        loop = asyncio.get_running_loop()
        exchange.timer = loop.call_later(self.timeout, self._timed_out, exchange)
        self._in_flight.add(exchange)
        if self._idle:
            self._idle.pop().send(exchange)
        elif self._opened < self.limit:
            self._open(exchange)
        else:
            self._waiting.append(exchange)

    def _open(self, exchange: Exchange) -> None:
        self._opened += 1
        task = asyncio.get_running_loop().create_task(self._connect(exchange))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def _connect(self, exchange: Exchange) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                lambda: _Connection(self), self.host, self.port, ssl=self._ssl
            )
        except asyncio.CancelledError:
            self._opened -= 1
            raise
        except (OSError, ssl.SSLError, UnicodeError) as exc:
            self._opened -= 1
            self._end(exchange, AttemptResult(None, "ConnectError", _cannot_connect(self, exc)))
            self._next()
            return
        if exchange.done is None:  # timed out or aborted while connecting: keep the connection
            self.release(connection)
        else:
            connection.send(exchange)

    def _timed_out(self, exchange: Exchange) -> None:
        exchange.timer = None
        connection = exchange.connection
        self._end(exchange, AttemptResult(None, "Timeout", f"no answer within {self.timeout:g}s"))
        if connection is not None:
            connection.abandon()

    def _end(self, exchange: Exchange, result: AttemptResult) -> None:
        self._in_flight.discard(exchange)
        with contextlib.suppress(ValueError):
            self._waiting.remove(exchange)
        exchange.finish(result)

    def answered(self, connection: _Connection, exchange: Exchange, reusable: bool) -> None:
        """``connection``'s answer is in: its exchange ends, and the connection serves the next."""
        self._in_flight.discard(exchange)
        exchange.answered()
        if reusable:
            self.release(connection)
        else:
            connection.abandon()

    def failed(self, exchange: Exchange, result: AttemptResult) -> None:
        self._end(exchange, result)

    def release(self, connection: _Connection) -> None:
        if self._closed or not connection.open:
            connection.abandon()
            return
        if self._waiting:
            connection.send(self._waiting.popleft())
        else:
            self._idle.append(connection)

    def lost(self, connection: _Connection) -> None:
        self._opened -= 1
        with contextlib.suppress(ValueError):
            self._idle.remove(connection)
        self._next()

    def _next(self) -> None:
        if self._waiting and not self._closed and self._opened < self.limit:
            self._open(self._waiting.popleft())

    def abort(self, reason: str) -> None:
        """End every request in flight with ``RelayShutdown`` (the relay stops) and send no more."""
        self._closed = True
        for task in list(self._connecting):
            task.cancel()
        for exchange in list(self._in_flight):
            connection = exchange.connection
            self._end(exchange, AttemptResult(None, "RelayShutdown", reason))
            if connection is not None:
                connection.abandon()

    async def aclose(self) -> None:
        self.abort("the relay stopped during the attempt")
        for task in list(self._connecting):
            with contextlib.suppress(BaseException):
                await task
        for connection in list(self._idle):
            connection.abandon()
        self._idle.clear()


def _cannot_connect(client: WebhookClient, exc: BaseException) -> str:
    return f"cannot connect to {client.host}:{client.port}: {exc}".strip()


class _Connection(asyncio.Protocol):
    """One keep-alive connection; its parser reads the answers as they come."""

    def __init__(self, client: WebhookClient) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.open = False
        self._head_done = False

    # -- the client's side -----------------------------------------------------------------------

    def send(self, exchange: Exchange) -> None:
        assert self.transport is not None
        self.exchange = exchange
        exchange.connection = self
        self._head_done = False
        self.transport.write(exchange.request)

    def abandon(self) -> None:
        """Closed, whatever it was doing (its exchange, if any, has ended or ends now)."""
        self.exchange = None
        if self.transport is not None:
            self.transport.abort()

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.open = True

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # nothing asked: an answer nobody waits for
            self.abandon()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail("RemoteProtocolError", f"not an HTTP answer: {exc}")

    def eof_received(self) -> bool | None:
        return None  # close

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        exchange = self.exchange
        if exchange is not None:
            self.exchange = None
            if self._head_done:  # the status is in; the body was cut short
                self.client.answered(self, exchange, reusable=False)
            elif exc is None:
                self.client.failed(
                    exchange, AttemptResult(None, "RemoteProtocolError", "server disconnected")
                )
            else:
                self.client.failed(exchange, AttemptResult(None, "ReadError", str(exc) or type(exc).__name__))
        self.client.lost(self)

    # -- httptools' callbacks --------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 11 and name.lower() == b"retry-after" and self.exchange is not None:
            self.exchange.retry_after = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        exchange = self.exchange
        if exchange is not None:
            exchange.status = self.parser.get_status_code()
            self._head_done = exchange.status >= 200  # 1xx: an interim answer, the final one follows

    def on_body(self, body: bytes) -> None:
        exchange = self.exchange
        if exchange is not None and len(exchange.excerpt) < EXCERPT_BYTES:
            exchange.excerpt = (exchange.excerpt + body)[:EXCERPT_BYTES]
            if len(exchange.excerpt) == EXCERPT_BYTES:  # enough read: the rest is not waited for
                self.exchange = None
                self.client.answered(self, exchange, reusable=False)

    def on_message_complete(self) -> None:
        exchange = self.exchange
        if exchange is None or not self._head_done:
            if exchange is not None:  # an interim answer: start over for the final one
                exchange.retry_after = None
                exchange.excerpt = b""
            return
        self.exchange = None
        self.client.answered(self, exchange, reusable=self.parser.should_keep_alive())

    def _fail(self, error_class: str, message: str) -> None:
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            self.client.failed(exchange, AttemptResult(None, error_class, message))
        self.abandon()
