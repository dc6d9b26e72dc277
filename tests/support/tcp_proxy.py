"""A TCP proxy on 127.0.0.1 standing for a database node: it can go away, or stop answering."""

from __future__ import annotations

import asyncio
import contextlib
import threading


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
        """Refuse new connections, end every task (a connection still being accepted included),
        then close every connection and wait until each is: none is left for the garbage collector
        to find open (a ``ResourceWarning`` in whichever test runs then)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        writers, self._writers = list(self._writers), set()
        for writer in writers:
            writer.close()
        for writer in writers:
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepting = asyncio.current_task()
        if accepting is not None:  # close() ends it too, should it come while this connects upstream
            self._tasks.add(accepting)
            accepting.add_done_callback(self._tasks.discard)
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


class ProxyThread:
    """A ``TcpProxy`` served by an event loop of its own, in a thread: for a test whose own loop
    blocks while the proxy must go on forwarding (Litestar's test client runs the app's start and
    stop in a thread of its own and waits for them)."""

    def __init__(self, target_host: str, target_port: int, port: int) -> None:
        self.proxy = TcpProxy(target_host, target_port, port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)

    @property
    def port(self) -> int:
        return self.proxy.port

    def start(self) -> ProxyThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(10)
        return self

    def freeze(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.freeze)

    def close(self) -> None:
        """The proxy closed (its port refuses, its connections end); it may be started again."""
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self._loop).result(10)

    def reopen(self) -> None:
        self.proxy.frozen = False
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(10)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.close()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()
