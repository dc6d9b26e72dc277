"""The loop with PydanticAI: an ``Agent`` with the service as an ``MCPToolset``, driven by a
``FunctionModel`` that calls the step's tool and then answers the tool's result as its text (no
model calls). PydanticAI declares MCP tasks: a long call's ending is the call's result, the agent
run held until then. The conversation rides each call's ``_meta`` (``process_tool_call``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from common import ASK, AUTHORIZATION, LONG, META, SHORT, URL, report, structured
from pydantic_ai import Agent, RunContext
from pydantic_ai.mcp import CallToolFunc, MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

seen_names: list[str] = []


async def bind(ctx: RunContext[Any], call_tool: CallToolFunc, name: str, args: dict[str, Any]) -> Any:
    return await call_tool(name, args, metadata=META)


toolset = MCPToolset(URL, headers=AUTHORIZATION, process_tool_call=bind)


def scripted(tool: str, arguments: dict[str, Any]) -> FunctionModel:
    """A model that calls ``tool`` once, then says what it answered."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen_names[:] = [t.name for t in info.function_tools]
        last = messages[-1]
        returned = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        )
        if returned:
            return ModelResponse(parts=[TextPart(json.dumps(returned[0].content, default=str))])
        return ModelResponse(parts=[ToolCallPart(tool, arguments)])

    return FunctionModel(respond)


async def step(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    agent = Agent(scripted(tool, arguments), toolsets=[toolset])
    run = await agent.run(f"call {tool}")
    answer = json.loads(run.output)
    return answer if isinstance(answer, dict) else structured(answer)


async def main() -> None:
    async with toolset:
        done = await step("pomodoro_start", SHORT)
        report("list", names=seen_names)
        report("start", answer=done)
        report("ending", via="task", result=done)

        held = asyncio.create_task(step("pomodoro_start", LONG))
        while True:  # until the long period is focusing (its run is held by its task)
            status = await toolset.direct_call_tool("operation_status", {}, metadata=META)
            status = status if isinstance(status, dict) else structured(str(status))
            if status["state"] == "focusing":
                break
            await asyncio.sleep(0.1)
        report("interrupt", answer=await step("pomodoro_interrupt", {}))
        report("interrupted", via="task", result=await held)
        report("late_interrupt", answer=await step("pomodoro_interrupt", {}))

        asked = await step("interact_ask", ASK)
        report("ask", answer=asked)
        report("ask_ending", via="task", result=asked)


asyncio.run(main())
