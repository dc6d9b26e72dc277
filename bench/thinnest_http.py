"""The thinnest Python HTTP service over the tool-call statement: the floor under ``serve``.

    .venv/bin/python -m bench.thinnest_http --database-url URL --port PORT [--pool-size 10]

``bench.tool_cycles --thinnest`` runs it as its phase (d). It is what any Python service that
answers ``POST /v1/tool-calls`` with the service's own statement must do at the least, and nothing
more: uvicorn with httptools on uvloop (as ``serve`` runs), a bare ASGI callable instead of
Litestar, the body decoded by msgspec, one psycopg pool of autocommit connections, the statement
prepared, the database's answer text sent back as it is. It checks no credentials, arguments or
schema, writes no log line or metric, wakes nobody after commit and runs no sweeper. Not a service:
a measuring stick for how much of the gap between ``serve`` and the raw-SQL ceiling any Python
code of ours could close on this machine.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec
from psycopg import AsyncConnection, AsyncRawCursor
from psycopg_pool import AsyncConnectionPool

from bench.common import tool_contexts
from service.db.tool_calls import CALL_TOOL
from service.manifests import registry_of
from service.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Call(msgspec.Struct):
    tool_call_id: str
    conversation_id: str
    tool: str
    arguments: dict[str, Any] = {}


_DECODE = msgspec.json.Decoder(Call).decode
_ENCODE = msgspec.json.encode


class ThinApp:
    """``POST /v1/tool-calls`` and nothing else: 202 for ``accepted``, 200 for any other answer."""

    def __init__(self, database_url: str, pool_size: int) -> None:
        self.pool = AsyncConnectionPool(
            database_url,
            min_size=pool_size,
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=False,
            name="thinnest",
        )
        self.decide = {name: runner.decide for name, runner in registry_of(Settings()).runners.items()}
        self.context = tool_contexts()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        call = _DECODE(body)
        connection: AsyncConnection[Any]
        async with self.pool.connection() as connection:
            cursor = AsyncRawCursor(connection)  # the statement's placeholders are Postgres' own
            await cursor.execute(
                CALL_TOOL,
                (
                    call.tool_call_id,
                    call.conversation_id,
                    call.tool,
                    hashlib.sha256(body).hexdigest(),
                    _ENCODE(call.arguments).decode(),
                    self.decide[call.tool],
                    self.context[call.tool],
                ),
                prepare=True,
            )
            row = await cursor.fetchone()
        assert row is not None
        answer = row[1].encode()
        await send(
            {
                "type": "http.response.start",
                "status": 202 if row[0] == "accepted" else 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))],
            }
        )
        await send({"type": "http.response.body", "body": answer})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.pool.open(wait=True)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pool-size", type=int, default=10)
    args = parser.parse_args(argv)
    config = uvicorn.Config(
        ThinApp(args.database_url, args.pool_size),
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    gc.freeze()  # as serve does
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
