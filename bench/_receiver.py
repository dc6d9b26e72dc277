"""A fast local Agent for the benches: raw asyncio HTTP/1.1 with keep-alive, answers 204 at once.

``python -m bench._receiver PORT``. It records the first arrival time of every ``webhook-id``;
``GET /stats`` answers ``{"requests", "unique", "first", "last"}`` and ``GET /arrivals`` the
``{event_id: unix time}`` map. Signatures are not checked here (the tests do that); this measures
the relay, not the receiver.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

NO_CONTENT = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"


class State:
    def __init__(self) -> None:
        self.requests = 0
        self.arrivals: dict[str, float] = {}
        self.first = 0.0
        self.last = 0.0

    def stats(self) -> bytes:
        return json.dumps(
            {"requests": self.requests, "unique": len(self.arrivals), "first": self.first, "last": self.last}
        ).encode()


class Protocol(asyncio.Protocol):
    def __init__(self, state: State) -> None:
        self.state = state
        self.buffer = b""
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length = 0
            webhook_id = None
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "webhook-id":
                    webhook_id = value.strip()
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            self.answer(head.split(" ", 2)[:2], webhook_id)

    def answer(self, request_line: list[str], webhook_id: str | None) -> None:
        assert self.transport is not None
        method, path = [*request_line, "", ""][:2]
        if method == "GET":
            body = json.dumps(self.state.arrivals).encode() if path == "/arrivals" else self.state.stats()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                + body
            )
            return
        now = time.time()
        state = self.state
        state.requests += 1
        if webhook_id is not None and webhook_id not in state.arrivals:
            state.arrivals[webhook_id] = now
        if not state.first:
            state.first = now
        state.last = now
        self.transport.write(NO_CONTENT)


async def serve(port: int) -> None:
    state = State()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Protocol(state), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    import uvloop

    uvloop.run(serve(int(sys.argv[1])))
