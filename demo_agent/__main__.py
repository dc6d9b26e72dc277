"""``python -m demo_agent [--host H] [--port P]``: the demo Agent; reads WEBHOOK_SECRET.

With ``LINEUP_URL`` set it also talks: once the service answers ``/readyz`` it follows the
conversations named in ``DEMO_CONVERSATIONS`` (default ``demo``) with ``HOST_TOKEN``, answers the
person's messages through the Tool API with ``AGENT_TOKEN``, and replies with each result the relay
delivers. ``DEMO_AGENT_PROTOCOL=mcp`` makes its tool calls over MCP (``LINEUP_URL``/mcp) instead of
``POST /v1/tool-calls`` (``rest``, the default).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Sequence

import httpx
import uvicorn

from demo_agent.app import WEBHOOK_PATH, create_app
from demo_agent.conversations import DemoAgent, Lineup
from demo_agent.mcp_client import McpLineup, McpTools
from service.logging import configure_logging
from service.settings import Settings, SettingsError, load_settings

PROTOCOLS = ("rest", "mcp")


def _protocol() -> str:
    return os.environ.get("DEMO_AGENT_PROTOCOL", "rest").strip().lower() or "rest"


def _conversations() -> list[str]:
    return os.environ.get("DEMO_CONVERSATIONS", "demo").replace(",", " ").split()


async def _serve(secrets: Sequence[str], host: str, port: int, lineup_url: str, settings: Settings) -> None:
    """The webhook receiver and the conversation followers, until SIGINT or SIGTERM."""
    agent_token, host_token = settings.tokens("agent")[0], settings.tokens("host")[0]
    async with httpx.AsyncClient(base_url=lineup_url, timeout=10.0) as http:
        stop = asyncio.Event()
        background: list[asyncio.Task[None]] = []
        lineup = Lineup(http, agent_token, host_token)
        if _protocol() == "mcp":
            tools = McpTools(lineup_url, agent_token)
            background.append(asyncio.create_task(tools.run(stop), name="mcp-session"))
            lineup = McpLineup(http, tools, agent_token, host_token)
        agent = DemoAgent(lineup)
        app = create_app(secrets, on_result=agent.on_result)
        server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        )
        background.append(asyncio.create_task(agent.run(_conversations(), stop)))
        try:
            await server.serve()
        finally:
            stop.set()
            await asyncio.gather(*background, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo_agent", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8010)
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    secrets = settings.webhook_secrets
    if not secrets:
        print("error: WEBHOOK_SECRET is required", file=sys.stderr)
        return 2
    if _protocol() not in PROTOCOLS:
        print(f"error: DEMO_AGENT_PROTOCOL must be one of {', '.join(PROTOCOLS)}", file=sys.stderr)
        return 2
    lineup_url = os.environ.get("LINEUP_URL")
    if lineup_url and not (settings.tokens("agent") and settings.tokens("host")):
        print("error: with LINEUP_URL, AGENT_TOKEN and HOST_TOKEN are required", file=sys.stderr)
        return 2
    configure_logging()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise
    print(f"demo agent: http://{args.host}:{args.port}{WEBHOOK_PATH}", file=sys.stderr, flush=True)
    if not lineup_url:
        uvicorn.run(
            create_app(secrets), host=args.host, port=args.port, log_level="warning", access_log=False
        )
        return 0
    print(
        f"demo agent: following {' '.join(_conversations())} on {lineup_url}, tools over {_protocol()}",
        file=sys.stderr,
        flush=True,
    )
    # uvicorn stops on SIGINT (Ctrl-C reaches every process of the dev stack), then raises it again.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(secrets, args.host, args.port, lineup_url, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
