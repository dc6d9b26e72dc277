"""A minimal HTTP/1.1 keep-alive client for the benches and the rigs.

They share two cores with the service and Postgres and measure the service's CPU, so the client
must cost next to nothing: about a tenth of httpx's CPU per request. One request at a time per
client (one client per worker), bodies with a Content-Length (no chunked answers), raw bytes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

# The service (uvicorn) closes a keep-alive connection idle for 5 s; one idle for longer than this
# is not reused, so that a request never races the server's close.
IDLE_REUSE = 4.0


_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_CLOSE = re.compile(rb"\r\nconnection:[ \t]*close", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:[^\r]*chunked", re.IGNORECASE)


class Answer:
    """The status, the headers (parsed only when read: the benches never read them) and the body;
    unpacks as ``status, headers, body``."""

    __slots__ = ("body", "head", "status")

    def __init__(self, status: int, head: bytes, body: bytes) -> None:
        self.status = status
        self.head = head
        self.body = body

    @property
    def headers(self) -> dict[str, str]:
        """Names in lower case."""
        headers = {}
        for line in self.head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return headers

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.status, self.headers, self.body))


class HttpClient:
    """Requests to one server over one connection, opened when needed and again after an error."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        parts = urlsplit(base_url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self._fixed = (
            f" HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n{auth}Content-Type: application/json\r\n"
        )
        self._heads: dict[tuple[str, str], bytes] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._last_used = 0.0

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        *,
        within: float | None = None,
    ) -> Answer:
        """One request; on any error (a refused or cut connection, ``within`` seconds passed) the
        connection is closed, so the next request starts afresh."""
        if self._writer is not None and time.monotonic() - self._last_used > IDLE_REUSE:
            await self.close()
        try:
            if within is None:
                return await self._exchange(method, path, body, headers)
            async with asyncio.timeout(within):
                return await self._exchange(method, path, body, headers)
        except BaseException:
            await self.close()  # the stream may be mid-answer
            raise

    async def post(self, path: str, payload: Any, headers: Mapping[str, str] | None = None) -> Answer:
        """POST ``payload`` as compact JSON."""
        return await self.request("POST", path, json.dumps(payload, separators=(",", ":")).encode(), headers)

    async def _exchange(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str] | None
    ) -> Answer:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        head = self._heads.get((method, path))
        if head is None:
            head = self._heads[method, path] = f"{method} {path}{self._fixed}".encode()
        if headers:
            head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()).encode("latin-1")
        self._writer.write(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
        answer = await self._reader.readuntil(b"\r\n\r\n")
        if _CHUNKED.search(answer):
            raise RuntimeError(f"{method} {path}: a chunked answer, where a body with a length was expected")
        length = _LENGTH.search(answer)
        data = await self._reader.readexactly(int(length[1]) if length else 0)
        self._last_used = time.monotonic()
        if _CLOSE.search(answer):
            await self.close()
        return Answer(int(answer[9:12]), answer[:-4], data)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None
