"""The Agent's webhook endpoint, on 127.0.0.1: one HTTP/1.1 keep-alive server for the tests, the
benches and the rigs.

It verifies Standard Webhooks signatures when it is given secrets (a request that none verifies is
answered 401), records every request, and answers through a ``responder`` the caller chooses, which
can inject faults per request: a status (500, 400, 429 with Retry-After, 302), a hang longer than
the relay's timeout, or a slow answer. ``GET /stats`` and ``GET /arrivals`` say what arrived.

It runs in a thread of its own (``with Receiver(...)``), on the caller's event loop
(``async with Receiver(...)``), or as a process of its own: ``python -m harness.receiver PORT``.
Stopping it and starting another on the same port gives "connection refused" in between.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import secrets
import socket
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, cast

import httpx
from standardwebhooks import Webhook, WebhookVerificationError

from harness.processes import Child, free_port


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass(frozen=True)
class Reply:
    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # answer slowly, within the relay's timeout
    hang: float = 0.0  # answer only after this long, beyond the relay's timeout: never accepted
    body: bytes = b""

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300 and not self.hang

    def encode(self) -> bytes:
        try:
            reason = HTTPStatus(self.status).phrase
        except ValueError:
            reason = "Unknown"
        head = [f"HTTP/1.1 {self.status} {reason}", f"Content-Length: {len(self.body)}"]
        head.extend(f"{name}: {value}" for name, value in self.headers.items())
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + self.body


NO_CONTENT = Reply()
_NO_CONTENT = NO_CONTENT.encode()


_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_WEBHOOK_ID = re.compile(rb"\r\nwebhook-id:[ \t]*([^\r]*)", re.IGNORECASE)


class Delivery:
    """One request as it arrived (its head parsed into ``headers`` only when read) and the reply."""

    __slots__ = ("_headers", "arrived_at", "body", "event_id", "head", "reply", "verified_by")

    def __init__(self, arrived_at: float, head: bytes, body: bytes, event_id: str) -> None:
        self.arrived_at = arrived_at
        self.head = head
        self.body = body
        self.event_id = event_id  # its webhook-id
        self.verified_by: tuple[int, ...] = ()  # indexes of the receiver's secrets whose signature checks out
        self.reply = NO_CONTENT
        self._headers: dict[str, str] | None = None

    @property
    def headers(self) -> dict[str, str]:
        """Names in lower case."""
        if self._headers is None:
            self._headers = {}
            for line in self.head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                self._headers[name.strip().lower()] = value.strip()
        return self._headers

    @property
    def payload(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


# (this request, how many earlier requests carried the same webhook-id) -> the answer
Responder = Callable[[Delivery, int], Reply]


def always(status: int = 204, **kwargs: Any) -> Responder:
    return lambda _delivery, _earlier: Reply(status, **kwargs)


def fail_first(times: int, failure: Reply, then: Reply | None = None) -> Responder:
    """Each event fails ``times`` times, then succeeds."""
    return lambda _delivery, earlier: failure if earlier < times else (then or Reply())


def fail_share(share: float, failure: Reply | None = None, *, seed: int | None = None) -> Responder:
    """A share of the requests, drawn at random, fails (503 unless told otherwise); the rest get 204."""
    rng = random.Random(seed)
    failed = failure or Reply(503)
    return lambda _delivery, _earlier: failed if rng.random() < share else NO_CONTENT


class Receiver:
    def __init__(
        self,
        secrets: Sequence[str] = (),
        *,
        port: int = 0,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.secrets = list(secrets)
        self.host = host  # the address it listens on (a rig's network namespace may give another)
        self.responder: Responder = responder or always()
        self._hooks = [Webhook(secret) for secret in self.secrets]
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.deliveries: list[Delivery] = []
        self._earlier: Counter[str] = Counter()
        self._first_arrival: dict[str, float] = {}
        self._socket = socket.socket()
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._socket.listen(1024)
        self._socket.setblocking(False)
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/webhooks/lineup"

    # -- serving: on the caller's loop, or in a thread with a loop of its own -----------------------

    async def __aenter__(self) -> Receiver:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), sock=self._socket)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for connection in list(self._connections):
            connection.close()
        await self._server.wait_closed()

    def __enter__(self) -> Receiver:
        loop = self._loop = asyncio.new_event_loop()
        listening = threading.Event()

        def run() -> None:
            loop.run_until_complete(self.__aenter__())
            listening.set()
            loop.run_forever()
            loop.run_until_complete(self.__aexit__())
            loop.close()

        self._thread = threading.Thread(target=run, name="receiver", daemon=True)
        self._thread.start()
        listening.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        assert self._loop is not None
        assert self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    # -- one request ------------------------------------------------------------------------------

    def _verify(self, delivery: Delivery) -> tuple[int, ...]:
        verified = []
        for index, hook in enumerate(self._hooks):
            try:
                hook.verify(delivery.body, delivery.headers)
            except (WebhookVerificationError, ValueError):
                continue
            verified.append(index)
        return tuple(verified)

    def _take(self, head: bytes, body: bytes) -> Reply:
        now = time.time()
        found = _WEBHOOK_ID.search(head)
        delivery = Delivery(now, head, body, found[1].decode("latin-1").strip() if found else "")
        if self._hooks:
            delivery.verified_by = self._verify(delivery)
        with self._lock:
            earlier = self._earlier[delivery.event_id]
        if self._hooks and not delivery.verified_by:
            delivery.reply = Reply(401, body=b"bad signature")
        else:
            delivery.reply = self.responder(delivery, earlier)
        with self._arrived:
            self.deliveries.append(delivery)
            self._earlier[delivery.event_id] += 1
            self._first_arrival.setdefault(delivery.event_id, now)
            self._arrived.notify_all()
        return delivery.reply

    def _report(self, path: str) -> Reply:
        with self._lock:
            if path == "/arrivals":
                data: Any = self._first_arrival
            elif path == "/stats":
                arrivals = self._first_arrival.values()
                data = {
                    "requests": len(self.deliveries),
                    "unique": len(self._first_arrival),
                    "first": min(arrivals, default=0.0),
                    "last": max(arrivals, default=0.0),
                }
            else:
                return Reply(404)
            body = json.dumps(data).encode()
        return Reply(200, {"Content-Type": "application/json"}, body=body)

    # -- what the callers read --------------------------------------------------------------------

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def accepted(self) -> list[Delivery]:
        """Deliveries answered 2xx, in arrival order."""
        return [d for d in self.snapshot() if d.reply.accepted]

    def accepted_per_event(self) -> Counter[str]:
        """How many times each webhook-id was answered 2xx (more than once: a duplicate delivery)."""
        return Counter(d.event_id for d in self.accepted())

    def wait_until(
        self, predicate: Callable[[list[Delivery]], bool], timeout: float = 15.0
    ) -> list[Delivery]:
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not predicate(list(self.deliveries)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"receiver: condition not met; {len(self.deliveries)} deliveries")
                self._arrived.wait(remaining)
            return list(self.deliveries)

    def wait_for_accepted(self, event_ids: Sequence[str] | set[str], timeout: float = 15.0) -> list[Delivery]:
        wanted = set(event_ids)

        def done(deliveries: list[Delivery]) -> bool:
            got = {d.event_id for d in deliveries if d.reply.accepted}
            return wanted <= got

        return self.wait_until(done, timeout)


class _Connection(asyncio.Protocol):
    """One keep-alive connection: requests parsed as they arrive, answered in order (a slow answer
    holds back the ones after it, as HTTP/1.1 wants)."""

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.pending: deque[tuple[float, bytes]] = deque()  # (when to write, answer)
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport
        self.receiver._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.receiver._connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        self.pending.clear()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        taken = 0  # what the requests answered below took of the buffer
        while (end := buffer.find(b"\r\n\r\n", taken)) >= 0:
            head = bytes(buffer[taken:end])
            found = _LENGTH.search(head)
            stop = end + 4 + (int(found[1]) if found else 0)
            if len(buffer) < stop:
                break
            body = bytes(buffer[end + 4 : stop])
            taken = stop
            if head.startswith(b"GET "):
                self.send(self.receiver._report(head.split(b" ", 2)[1].decode("latin-1")).encode(), 0.0)
                continue
            reply = self.receiver._take(head, body)
            self.send(_NO_CONTENT if reply is NO_CONTENT else reply.encode(), reply.delay + reply.hang)
        if taken:
            del buffer[:taken]

    def send(self, answer: bytes, delay: float) -> None:
        assert self.transport is not None
        if delay <= 0 and not self.pending:
            self.transport.write(answer)
            return
        loop = asyncio.get_running_loop()
        self.pending.append((loop.time() + delay, answer))
        if self.timer is None:
            self.timer = loop.call_at(self.pending[0][0], self._flush)

    def _flush(self) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.timer = None
        while self.pending and self.pending[0][0] <= loop.time():
            self.transport.write(self.pending.popleft()[1])
        if self.pending:
            self.timer = loop.call_at(self.pending[0][0], self._flush)


class ReceiverProcess:
    """The receiver in a process of its own (on uvloop; its CPU counted apart from the caller's),
    answering 204 at once without checking signatures; read over ``GET /stats`` and ``/arrivals``."""

    def __init__(self, logs: Path | None = None) -> None:
        self.port = free_port()
        log = (logs or Path(tempfile.mkdtemp(prefix="receiver-"))) / f"receiver-{self.port}.log"
        self.process = Child(["-m", "harness.receiver", str(self.port)], log).start()
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)
        try:
            self.process.wait_http(f"http://127.0.0.1:{self.port}/stats", 10, status=200)
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhooks/lineup"

    @property
    def pid(self) -> int:
        return self.process.pid

    def stats(self) -> dict[str, Any]:
        """``requests``, ``unique`` webhook-ids, the ``first`` and ``last`` first arrivals (unix time)."""
        stats: dict[str, Any] = self.client.get("/stats").json()
        return stats

    def arrivals(self) -> dict[str, float]:
        """When each webhook-id first arrived (unix time)."""
        arrivals: dict[str, float] = self.client.get("/arrivals").json()
        return arrivals

    def wait_for(self, unique: int, timeout: float) -> dict[str, Any]:
        """Until ``unique`` webhook-ids arrived; the stats then."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats()
            if stats["unique"] >= unique:
                return stats
            if time.monotonic() > deadline:
                raise TimeoutError(f"{stats['unique']} of {unique} deliveries arrived within {timeout:.0f} s")
            time.sleep(0.02)

    def close(self) -> None:
        self.client.close()
        self.process.stop(10)


async def _serve(port: int) -> None:
    async with Receiver(port=port):
        await asyncio.Event().wait()


if __name__ == "__main__":
    import uvloop

    uvloop.run(_serve(int(sys.argv[1])))
