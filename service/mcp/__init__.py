"""The MCP face: the Agent Tool API for MCP clients at ``/mcp`` (streamable HTTP), in ``serve``.

Built on the ``mcp`` SDK's low-level ``Server`` and its streamable HTTP session manager; every
tool call goes through the same use case, and the same idempotency record, as
``POST /v1/tool-calls``.
"""
