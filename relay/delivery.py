"""One signed POST of an outbox row to the Agent, over a shared keep-alive client."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from relay.claims import Claim
from relay.policy import AttemptResult
from relay.signing import Signer

EXCERPT_BYTES = 512
USER_AGENT = "lineup-relay/0.1"
# httpcore's pool does work quadratic in its connection count on every request, so the deliveries
# are spread over several small clients, each used by at most this many attempts at a time.
CONNECTIONS_PER_CLIENT = 8


@dataclass(frozen=True, slots=True)
class Attempt:
    started_at: datetime
    duration_ms: int
    result: AttemptResult


class Deliverer:
    def __init__(self, url: str, signer: Signer, *, timeout: float, concurrency: int) -> None:
        self._url = url
        self._signer = signer
        self._timeout = timeout
        per_client = min(concurrency, CONNECTIONS_PER_CLIENT)
        self._clients = [
            httpx.AsyncClient(
                timeout=httpx.Timeout(timeout),
                limits=httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client),
                follow_redirects=False,
                headers={"user-agent": USER_AGENT, "content-type": "application/json"},
            )
            for _ in range(-(-concurrency // per_client))
        ]
        # One slot per allowed attempt in flight; slot i uses client i // per_client. The caller
        # never runs more than ``concurrency`` attempts at once, so a slot is always free.
        self._slots = deque(range(concurrency))
        self._per_client = per_client

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()

    async def attempt(self, claim: Claim) -> Attempt:
        """POST the row's stored payload; the body bytes are the same on every attempt."""
        started_at = datetime.now(UTC)
        started = time.perf_counter()
        headers = self._signer.headers(str(claim.event_id), claim.body, started_at)
        headers["idempotency-key"] = claim.tool_call_id
        slot = self._slots.popleft()
        client = self._clients[slot // self._per_client]
        try:
            # httpx's timeout bounds each phase; this bounds the whole attempt.
            async with (
                asyncio.timeout(self._timeout),
                client.stream("POST", self._url, content=claim.body.encode(), headers=headers) as reply,
            ):
                excerpt = await _read_excerpt(reply)
                result = AttemptResult(
                    status_code=reply.status_code,
                    retry_after=reply.headers.get("retry-after"),
                    excerpt=excerpt,
                )
        except TimeoutError:
            result = AttemptResult(None, "Timeout", f"no answer within {self._timeout:g}s")
        except httpx.HTTPError as exc:
            result = AttemptResult(None, type(exc).__name__, str(exc) or type(exc).__name__)
        finally:
            self._slots.appendleft(slot)  # most recently used first: its connection is warm
        duration_ms = round((time.perf_counter() - started) * 1000)
        return Attempt(started_at, duration_ms, result)


async def _read_excerpt(reply: httpx.Response) -> str | None:
    received = bytearray()
    async for chunk in reply.aiter_bytes():
        received += chunk
        if len(received) >= EXCERPT_BYTES:
            break
    if not received:
        return None
    # Postgres text cannot hold NUL.
    return bytes(received[:EXCERPT_BYTES]).decode("utf-8", "replace").replace("\x00", "\ufffd")
