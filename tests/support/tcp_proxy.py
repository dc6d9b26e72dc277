"""A TCP proxy on 127.0.0.1 standing for a database node: it can go away, or stop answering."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Forwards connections on ``port`` to ``target``.

    ``freeze()`` is a node that stops answering without closing anything (powered off,
    partitioned): connections stay open, bytes go nowhere, new connections are accepted and
    ignored. ``close()`` is a node that is gone: the port refuses connections.
    """

    def __init__(self, target_host: str, target_port: int, port: int) -> None:
        self.target = (target_host, target_port)
        self.port = port
        self.frozen = False
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    def freeze(self) -> None:
        self.frozen = True

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        if self.frozen:
            return  # accepted, never answered
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        self._writers.add(upstream_writer)
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await source.read(65536):
                if self.frozen:
                    await asyncio.Event().wait()  # never: the bytes go nowhere
                sink.write(data)
                await sink.drain()
        sink.close()
