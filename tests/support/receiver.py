"""A local Agent: a real HTTP server on 127.0.0.1 that verifies Standard Webhooks signatures.

It records every request and answers through a ``responder`` the test chooses, which can inject
faults per request: a status (500, 400, 429 with Retry-After, 302), a hang longer than the relay's
timeout, or a slow answer. Stopping it and starting another on the same port gives "connection refused".
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


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


@dataclass(frozen=True)
class Delivery:
    arrived_at: float
    headers: dict[str, str]
    body: bytes
    verified_by: tuple[int, ...]  # indexes of the receiver's secrets whose signature checks out
    reply: Reply

    @property
    def event_id(self) -> str:
        return self.headers["webhook-id"]

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


class Receiver:
    def __init__(self, secrets: Sequence[str], *, port: int = 0, responder: Responder | None = None) -> None:
        self.secrets = list(secrets)
        self.responder: Responder = responder or always()
        self._hooks = [Webhook(secret) for secret in self.secrets]
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.deliveries: list[Delivery] = []
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.receiver = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhooks/lineup"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _verify(self, body: bytes, headers: dict[str, str]) -> tuple[int, ...]:
        verified = []
        for index, hook in enumerate(self._hooks):
            try:
                hook.verify(body, headers)
            except (WebhookVerificationError, ValueError):
                continue
            verified.append(index)
        return tuple(verified)

    def _take(self, headers: dict[str, str], body: bytes) -> Delivery:
        arrived = Delivery(time.time(), headers, body, self._verify(body, headers), Reply())
        with self._lock:
            earlier = sum(
                1 for d in self.deliveries if d.headers.get("webhook-id") == headers.get("webhook-id")
            )
        reply = self.responder(arrived, earlier) if arrived.verified_by else Reply(401, body=b"bad signature")
        delivery = Delivery(arrived.arrived_at, headers, body, arrived.verified_by, reply)
        with self._arrived:
            self.deliveries.append(delivery)
            self._arrived.notify_all()
        return delivery

    # -- what the tests read ------------------------------------------------------------------

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def accepted(self) -> list[Delivery]:
        """Deliveries answered 2xx, in arrival order."""
        return [d for d in self.snapshot() if d.reply.accepted]

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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    receiver: Receiver


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        delivery = self.server.receiver._take(headers, body)
        reply = delivery.reply
        if reply.delay or reply.hang:
            time.sleep(reply.delay + reply.hang)
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return
