"""The loop with the OpenAI Agents SDK: an ``Agent`` with the service as an
``MCPServerStreamableHttp``, driven by a custom ``Model`` that calls the step's tool and then answers
the tool's output as its text (no model calls). The SDK does not take MCP tasks: its model learns a
period's ending by calling ``operation_status`` with its wait (under the SDK's 5 s tool timeout).
The conversation rides each call's ``_meta`` (``tool_meta_resolver``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from common import ASK, AUTHORIZATION, LONG, META, SHORT, URL, WAIT, report, structured
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

seen_names: list[str] = []


class Scripted(Model):
    """Calls ``tool`` once, then says what it answered."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool, self.arguments = tool, arguments

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        seen_names[:] = [tool.name for tool in tools]
        outputs = (
            [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if isinstance(input, list)
            else []
        )
        if outputs:
            output = outputs[-1]["output"]
            text = output if isinstance(output, str) else json.dumps(output)
            message = ResponseOutputMessage(
                id="msg",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        call = ResponseFunctionToolCall(
            id="fc",
            call_id=f"call-{self.tool}",
            type="function_call",
            name=self.tool,
            arguments=json.dumps(self.arguments),
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def answer_of(text: str) -> dict[str, Any]:
    """The tool's answer from the output the SDK handed the model (the structured content's JSON, or
    the text content: a sentence, then the JSON)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return structured(text)
    if isinstance(parsed, dict) and parsed.get("type") == "text":
        return structured(parsed["text"])
    if isinstance(parsed, list):
        return structured(parsed[0]["text"])
    return dict(parsed)


async def main() -> None:
    set_tracing_disabled(True)
    server = MCPServerStreamableHttp(
        {"url": URL, "headers": AUTHORIZATION},
        tool_meta_resolver=lambda context: META,
        use_structured_content=True,
    )

    async def step(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        agent = Agent(name="focus", model=Scripted(tool, arguments), mcp_servers=[server])
        run = await Runner.run(agent, f"call {tool}")
        return answer_of(run.final_output)

    async def ending(**call: str) -> dict[str, Any]:
        for _ in range(10):
            status = await step("operation_status", {**call, **WAIT})
            if status["result"] is not None:
                return status
        raise AssertionError(f"no ending: {status}")

    async with server:
        report("start", answer=await step("pomodoro_start", SHORT))
        report("list", names=seen_names)
        status = await ending()
        report("ending", via="operation_status", operation_id=status["operation_id"], result=status["result"])

        await step("pomodoro_start", LONG)
        report("interrupt", answer=await step("pomodoro_interrupt", {}))
        status = await ending()
        report(
            "interrupted",
            via="operation_status",
            operation_id=status["operation_id"],
            result=status["result"],
        )
        report("late_interrupt", answer=await step("pomodoro_interrupt", {}))

        asked = await step("interact_ask", ASK)
        report("ask", answer=asked)
        # The person answers at the Host meanwhile; the call is named by the id it answered with.
        status = await ending(tool_call_id=asked["tool_call_id"])
        report(
            "ask_ending", via="operation_status", tool_call_id=status["tool_call_id"], result=status["result"]
        )


asyncio.run(main())
