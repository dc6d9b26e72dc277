"""Receiving a tool result from the relay: verify the Standard Webhooks signature, parse the body.

Reusable by any Agent: ``WebhookVerifier(secrets).verify(body, headers)`` returns a ``ToolResult`` or
raises ``InvalidDeliveryError``; ``SeenEvents`` drops repeats (delivery is at least once).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


class InvalidDeliveryError(Exception):
    """Not a request from our relay: a bad or missing signature, or a body of the wrong shape."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    event_id: str
    tool: str
    tool_call_id: str
    conversation_id: str
    operation_id: str | None
    sequence: int
    result: dict[str, Any]

    @classmethod
    def from_payload(cls, payload: Any) -> ToolResult:
        if not isinstance(payload, dict) or payload.get("type") != "tool.result":
            raise InvalidDeliveryError("the body is not a tool.result event")
        try:
            return cls(
                event_id=str(payload["event_id"]),
                tool=str(payload["tool"]),
                tool_call_id=str(payload["tool_call_id"]),
                conversation_id=str(payload["conversation_id"]),
                operation_id=None if payload.get("operation_id") is None else str(payload["operation_id"]),
                sequence=int(payload["sequence"]),
                result=dict(payload["result"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidDeliveryError(f"the tool.result event is malformed: {exc!r}") from None


class WebhookVerifier:
    """Accepts a delivery signed by any of ``secrets`` (several during a rotation)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        if not secrets:
            raise ValueError("at least one webhook secret is required")
        self._hooks = [Webhook(secret) for secret in secrets]

    def verify(self, body: bytes, headers: Mapping[str, str]) -> ToolResult:
        plain = {name.lower(): value for name, value in headers.items()}
        for hook in self._hooks:
            try:
                payload = hook.verify(body, plain)
            except (WebhookVerificationError, ValueError):
                continue
            result = ToolResult.from_payload(payload)
            if result.event_id != plain.get("webhook-id"):
                raise InvalidDeliveryError("webhook-id does not match the event_id in the body")
            return result
        raise InvalidDeliveryError("no valid signature for any configured secret")


class SeenEvents:
    """The most recent event ids, to recognise a repeated delivery."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()

    def first_time(self, event_id: str) -> bool:
        if event_id in self._seen:
            self._seen.move_to_end(event_id)
            return False
        self._seen[event_id] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return True


def describe(result: ToolResult) -> dict[str, Any]:
    """The fields worth a log line."""
    return {
        "event_id": result.event_id,
        "tool": result.tool,
        "tool_call_id": result.tool_call_id,
        "conversation_id": result.conversation_id,
        "sequence": result.sequence,
        "result": result.result,
    }
