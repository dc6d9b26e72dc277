"""One signed POST of an outbox row to the Agent, over the relay's pooled keep-alive connections
(``relay.webhook_client``).

The request is the row's stored payload, byte for byte the same on every attempt, with the fixed
headers (``user-agent``, ``content-type``), the Standard Webhooks headers (``relay.signing``) and
the ``Idempotency-Key``. Transport failures are recorded under a small vocabulary of their own:
``Timeout``, ``ConnectError``, ``RemoteProtocolError``, ``ReadError`` (and ``RelayShutdown`` when the
relay stops during an attempt).
"""

from __future__ import annotations

import asyncio
import re
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from relay.claims import Claim
from relay.clock import ClockSkew, database_time
from relay.policy import AttemptResult
from relay.signing import Signer
from relay.webhook_client import EXCERPT_BYTES, WebhookClient

__all__ = ["EXCERPT_BYTES", "Attempt", "Deliverer", "idempotency_key"]

USER_AGENT = "lineup-relay/0.1"
# Printable ASCII but the space and "%": what an Idempotency-Key carries as it is.
_HEADER_SAFE = "".join(c for c in string.printable if c.isprintable() and c not in " %")
_ALL_SAFE = re.compile("[" + re.escape(_HEADER_SAFE) + "]*")


def idempotency_key(tool_call_id: str) -> str:
    """The ``Idempotency-Key`` of a row: its tool call id, which the service's id rule makes
    header-safe. A row recorded under the earlier rule (a space, a line break, non-ASCII) gets
    those bytes percent-encoded (UTF-8) rather than a header that fails on every attempt and holds
    back its conversation; the body carries the id unchanged."""
    if _ALL_SAFE.fullmatch(tool_call_id):
        return tool_call_id
    return quote(tool_call_id, safe=_HEADER_SAFE)


@dataclass(frozen=True, slots=True)
class Attempt:
    started_at: datetime
    duration_ms: int
    result: AttemptResult


#: Called once per attempt, from the event loop, when it has ended.
Delivered = Callable[[Claim, Attempt], None]


class Deliverer:
    def __init__(
        self,
        url: str,
        signer: Signer,
        *,
        timeout: float,
        concurrency: int,
        lease_seconds: float,
        skew: ClockSkew | None = None,
    ) -> None:
        self._signer = signer
        self._lease_seconds = lease_seconds
        self._skew = skew
        self.client = WebhookClient(
            url,
            timeout=timeout,
            limit=concurrency,
            headers={"user-agent": USER_AGENT, "content-type": "application/json"},
        )

    def headers(self, claim: Claim, timestamp: int) -> bytes:
        """The request's own headers, as HTTP/1.1 lines: the signature's three and the key."""
        return self._signer.header_lines(str(claim.event_id), timestamp, claim.body) + (
            b"idempotency-key: %s\r\n" % idempotency_key(claim.tool_call_id).encode("ascii")
        )

    def send(self, claim: Claim, delivered: Delivered) -> None:
        """POST the row's stored payload; ``delivered`` is called with the attempt once it ends. It
        is stamped with the database's clock (``relay.clock``), whatever the host's says."""
        now = database_time(claim, self._lease_seconds)
        if self._skew is not None:
            self._skew.observe(now, time.time())
        started_at = datetime.fromtimestamp(now, UTC)

        def done(result: AttemptResult, seconds: float) -> None:
            delivered(claim, Attempt(started_at, round(seconds * 1000), result))

        self.client.post(self.headers(claim, int(now)), claim.body, done)

    async def attempt(self, claim: Claim) -> Attempt:
        """``send`` as a coroutine: the attempt once it has ended."""
        ended: asyncio.Future[Attempt] = asyncio.get_running_loop().create_future()

        def delivered(_: Claim, attempt: Attempt) -> None:
            if not ended.done():
                ended.set_result(attempt)

        self.send(claim, delivered)
        return await ended

    def abort(self, reason: str) -> None:
        """End every attempt in flight as ``RelayShutdown``."""
        self.client.abort(reason)

    async def aclose(self) -> None:
        await self.client.aclose()
