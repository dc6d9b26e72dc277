"""A Tool's own MCP result content (``Registration.content``), checked against the SDK's types.

Every tool result carries, by default, one text item: the Tool's sentence for a person, then the
JSON of its answer. A Tool may give its own instead (exact text, images, audio, resource links,
embedded resources, or several of them), built from its answer; the answer itself stays the
result's ``structuredContent``. What it gives is held to ``mcp_types.ContentBlock`` and, for the
binary kinds, to base64 (which the SDK's types take as any string), then put on the wire as the
SDK dumps it. Content that does not hold is the app's defect, answered as a JSON-RPC internal
error naming the Tool, never sent half-checked.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from pydantic import TypeAdapter, ValidationError

from service.tools import Content

log = structlog.get_logger("service.mcp")

_BLOCKS: TypeAdapter[list[types.ContentBlock]] = TypeAdapter(list[types.ContentBlock])


def _binary(block: types.ContentBlock) -> str | None:
    """The base64 text a block carries, if it is of a binary kind."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        return block.data
    if isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents):
        return block.resource.blob
    return None


def checked(tool: str, items: Sequence[Content]) -> list[dict[str, Any]]:
    """``items`` as the wire carries them, once each is a content block of the SDK's types with
    valid base64 where it carries bytes; otherwise the internal error naming ``tool``."""
    try:
        blocks = _BLOCKS.validate_python(list(items))
        for index, block in enumerate(blocks):
            data = _binary(block)
            if data is not None:
                try:
                    b64decode(data, validate=True)
                except binascii.Error:
                    raise ValueError(f"content[{index}] does not carry base64") from None
    except (ValidationError, ValueError, TypeError) as error:
        log.error("mcp_tool_content_invalid", tool=tool, error=str(error))
        raise MCPError(
            INTERNAL_ERROR, f"{tool} gave content that is not MCP content", data={"tool": tool}
        ) from None
    dumped: list[dict[str, Any]] = _BLOCKS.dump_python(blocks, by_alias=True, mode="json", exclude_none=True)
    return dumped


def own_content(
    tool: str, content: Callable[[Mapping[str, Any]], Sequence[Content]], body: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The Tool's own content for its answer ``body``, checked."""
    try:
        items = content(body)
    except (LookupError, TypeError, ValueError, AttributeError) as error:
        log.error("mcp_tool_content_failed", tool=tool, error=repr(error))
        raise MCPError(
            INTERNAL_ERROR, f"{tool} gave content that is not MCP content", data={"tool": tool}
        ) from None
    return checked(tool, items)
