"""The loop with LangChain's MCP adapters and LangGraph: the service's tools from a
``MultiServerMCPClient`` in a LangGraph ReAct agent (``create_react_agent``), driven by a fake
tool-calling chat model that calls the step's tool and then answers the tool's output as its text
(no model calls). The adapters take no MCP tasks and cannot set ``params._meta``: the conversation
rides the connection's ``Lineup-Conversation-Id`` header, and the model learns a period's ending by
calling ``operation_status`` with its wait."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from common import ASK, HEADERS, LONG, SHORT, URL, WAIT, report, structured
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.prebuilt import create_react_agent

seen_names: list[str] = []


class Scripted(BaseChatModel):
    """Calls ``tool`` once, then says what it answered."""

    tool: str
    arguments: dict[str, Any]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:
        seen_names[:] = [tool.name for tool in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            content = last.content if isinstance(last.content, str) else json.dumps(last.content)
            message = AIMessage(content=content)
        else:
            message = AIMessage(
                content="",
                tool_calls=[{"name": self.tool, "args": self.arguments, "id": f"call-{self.tool}"}],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


def answer_of(content: str) -> dict[str, Any]:
    """The tool's answer from the tool message's content (its text: a sentence, then the JSON; or the
    content blocks as JSON)."""
    try:
        parsed = json.loads(content)
    except json.JSONDecodeError:
        return structured(content)
    if isinstance(parsed, list):
        return structured(next(block["text"] for block in parsed if block.get("type") == "text"))
    return dict(parsed)


async def main() -> None:
    client = MultiServerMCPClient(
        {"lineup": {"transport": "streamable_http", "url": URL, "headers": HEADERS}}
    )
    tools = await client.get_tools()

    async def step(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        agent = create_react_agent(Scripted(tool=tool, arguments=arguments), tools)
        state = await agent.ainvoke({"messages": [("user", f"call {tool}")]})
        return answer_of(state["messages"][-1].content)

    async def ending(**call: str) -> dict[str, Any]:
        for _ in range(10):
            status = await step("operation_status", {**call, **WAIT})
            if status["result"] is not None:
                return status
        raise AssertionError(f"no ending: {status}")

    report("start", answer=await step("pomodoro_start", SHORT))
    report("list", names=seen_names)
    status = await ending()
    report("ending", via="operation_status", operation_id=status["operation_id"], result=status["result"])

    await step("pomodoro_start", LONG)
    report("interrupt", answer=await step("pomodoro_interrupt", {}))
    status = await ending()
    report(
        "interrupted", via="operation_status", operation_id=status["operation_id"], result=status["result"]
    )
    report("late_interrupt", answer=await step("pomodoro_interrupt", {}))

    asked = await step("interact_ask", ASK)
    report("ask", answer=asked)
    # The person answers at the Host meanwhile; the question is the conversation's latest call.
    status = await ending()
    report("ask_ending", via="operation_status", tool_call_id=status["tool_call_id"], result=status["result"])


asyncio.run(main())
