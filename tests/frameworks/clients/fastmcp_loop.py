"""The loop with the FastMCP client (no model: the client is the agent). It declares MCP tasks, so a
long call's ending arrives as the call's result; the conversation rides each call's ``_meta``."""

from __future__ import annotations

import asyncio

import fastmcp
import fastmcp_tasks.client
from common import ASK, LONG, META, SHORT, TOKEN, URL, report


async def main() -> None:
    async with fastmcp.Client(URL, auth=TOKEN) as client:
        report("list", names=[tool.name for tool in await client.list_tools()])

        done = await client.call_tool("pomodoro_start", SHORT, meta=META)
        report("start", answer=done.structured_content)
        report("ending", via="task", result=done.structured_content)

        task = await fastmcp_tasks.client.call_tool_task(client, "pomodoro_start", LONG, meta=META)
        interrupted = await client.call_tool("pomodoro_interrupt", {}, meta=META)
        report("interrupt", answer=interrupted.structured_content)
        await task.wait(timeout=30)
        report("interrupted", via="task", result=(await task.result()).structured_content)
        late = await client.call_tool("pomodoro_interrupt", {}, meta=META)
        report("late_interrupt", answer=late.structured_content)

        asked = await client.call_tool("interact_ask", ASK, meta=META)
        report("ask", answer=asked.structured_content)
        report("ask_ending", via="task", result=asked.structured_content)


asyncio.run(main())
