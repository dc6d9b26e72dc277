"""One signed POST of an outbox row to the Agent, over one pooled keep-alive HTTP client.

aiohttp's client costs about a tenth of the CPU per request of httpx's here (bench/relay_drain.py).
Transport failures are recorded under a small vocabulary of their own, the same whatever client
sends the request: ``Timeout``, ``ConnectError``, ``RemoteProtocolError``, ``ReadError``.
"""

from __future__ import annotations

import asyncio
import string
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

import aiohttp

from relay.claims import Claim
from relay.policy import AttemptResult
from relay.signing import Signer

EXCERPT_BYTES = 512
USER_AGENT = "lineup-relay/0.1"
# Printable ASCII but the space and "%": what an Idempotency-Key carries as it is.
_HEADER_SAFE = "".join(c for c in string.printable if c.isprintable() and c not in " %")


def idempotency_key(tool_call_id: str) -> str:
    """The ``Idempotency-Key`` of a row: its tool call id, which the service's id rule makes
    header-safe. A row recorded under the earlier rule (a space, a line break, non-ASCII) gets
    those bytes percent-encoded (UTF-8) rather than a header that fails on every attempt and holds
    back its conversation; the body carries the id unchanged."""
    return quote(tool_call_id, safe=_HEADER_SAFE)


@dataclass(frozen=True, slots=True)
class Attempt:
    started_at: datetime
    duration_ms: int
    result: AttemptResult


def transport_error(exc: BaseException) -> str:
    """The stable name of a transport failure (what ``outbox_attempts.error_class`` records)."""
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return "Timeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "ConnectError"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "RemoteProtocolError"
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientOSError):
        return "ReadError"
    return type(exc).__name__


class Deliverer:
    def __init__(self, url: str, signer: Signer, *, timeout: float, concurrency: int) -> None:
        self._url = url
        self._signer = signer
        self._timeout = timeout
        # Created on first use, inside the running event loop.
        self._session: aiohttp.ClientSession | None = None
        self._concurrency = concurrency

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._concurrency, limit_per_host=self._concurrency),
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                headers={"user-agent": USER_AGENT, "content-type": "application/json"},
                auto_decompress=False,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def attempt(self, claim: Claim) -> Attempt:
        """POST the row's stored payload; the body bytes are the same on every attempt."""
        started_at = datetime.now(UTC)
        started = time.perf_counter()
        headers = self._signer.headers(str(claim.event_id), claim.body, started_at)
        headers["idempotency-key"] = idempotency_key(claim.tool_call_id)
        try:
            # The client's timeout bounds the request; this bounds the whole attempt, excerpt included.
            async with (
                asyncio.timeout(self._timeout),
                self._client().post(
                    self._url, data=claim.body.encode(), headers=headers, allow_redirects=False
                ) as reply,
            ):
                excerpt = await reply.content.read(EXCERPT_BYTES)
                result = AttemptResult(
                    status_code=reply.status,
                    retry_after=reply.headers.get("retry-after"),
                    # Postgres text cannot hold NUL.
                    excerpt=excerpt.decode("utf-8", "replace").replace("\x00", "\ufffd") or None,
                )
        except TimeoutError:
            result = AttemptResult(None, "Timeout", f"no answer within {self._timeout:g}s")
        except aiohttp.ClientError as exc:
            result = AttemptResult(None, transport_error(exc), str(exc) or type(exc).__name__)
        duration_ms = round((time.perf_counter() - started) * 1000)
        return Attempt(started_at, duration_ms, result)
