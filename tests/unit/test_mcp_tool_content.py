"""A Tool's own MCP result content (``Registration.content``) is held to the SDK's content types
and to base64 where it carries bytes, and reaches the wire as the SDK dumps it; anything else is
the app's defect, a JSON-RPC internal error naming the Tool. The default content is unchanged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from service.domain.outcomes import Answered
from service.mcp.binding import Binding
from service.mcp.content import checked, own_content
from service.mcp.tools import Answer, call_result
from service.tools import Content

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"


def test_every_kind_of_content_block_reaches_the_wire_as_the_sdk_dumps_it() -> None:
    items: list[Content] = [
        {"type": "text", "text": "Hello, World!"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "test://linked", "name": "linked"},
        {"type": "resource", "resource": {"uri": "test://a", "mimeType": "text/plain", "text": "a"}},
        {"type": "resource", "resource": {"uri": "test://b", "mimeType": "image/png", "blob": PNG}},
    ]
    assert checked("app.tool", items) == items


@pytest.mark.parametrize(
    "item",
    [
        {"type": "image", "data": PNG},  # no mimeType
        {"type": "image", "data": "not base64!", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRg", "mimeType": "audio/wav"},  # bad padding
        {"type": "resource", "resource": {"uri": "test://b", "mimeType": "x/y", "blob": "@@"}},
        {"type": "video", "data": PNG, "mimeType": "video/mp4"},
        {"type": "text"},
        "text",
    ],
)
def test_content_that_is_not_mcp_content_is_an_internal_error_naming_the_tool(item: Any) -> None:
    with pytest.raises(MCPError) as caught:
        checked("app.tool", [item])
    assert caught.value.error.code == INTERNAL_ERROR
    assert caught.value.error.data == {"tool": "app.tool"}


def test_a_content_function_that_fails_on_the_answer_is_an_internal_error() -> None:
    def content(body: Mapping[str, Any]) -> Sequence[Content]:
        return [{"type": "text", "text": body["missing"]}]

    with pytest.raises(MCPError) as caught:
        own_content("app.tool", content, {"status": "said"})
    assert caught.value.error.code == INTERNAL_ERROR


def _answer(content: list[dict[str, Any]] | None) -> Answer:
    binding = Binding("conv-1", "call-1", False)
    body = {"tool_call_id": "call-1", "status": "said", "text": "é"}
    return Answer("app.tool", binding, Answered, 200, body, sentence="Said é.", content=content)


def test_without_content_of_its_own_a_result_is_the_sentence_then_the_json() -> None:
    result = call_result(_answer(None))
    assert result["content"] == [
        {"type": "text", "text": 'Said é.\n{"tool_call_id":"call-1","status":"said","text":"é"}'}
    ]


def test_with_content_of_its_own_only_the_content_changes() -> None:
    own = [{"type": "text", "text": "é"}]
    default, result = call_result(_answer(None)), call_result(_answer(own))
    assert result["content"] == own
    assert {k: v for k, v in result.items() if k != "content"} == {
        k: v for k, v in default.items() if k != "content"
    }
