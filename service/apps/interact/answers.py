"""The answers of Interact's Tool, as types: its registration names them, and the OpenAPI
document of ``POST /v1/tool-calls`` is built from them (the Host API shows a pending
``Interaction`` too).

No ``from __future__ import annotations`` here: TypedDict needs its ``NotRequired`` markers as
objects, not strings.
"""

from typing import Any, Literal, NotRequired, TypedDict

from service.documented import Time, Uuid


class Interaction(TypedDict):
    tool_call_id: str
    conversation_id: str
    prompt: str
    choices: list[str]
    status: Literal["pending", "answered"]
    asked_in_sub_session_id: Uuid | None
    answer: NotRequired[str | None]
    answered_at: NotRequired[Time | None]
    # An app's question of its own forms (the Runtime API's app_ask) only: key -> {message,
    # requestedSchema}, and the answers so far (key -> content).
    forms: NotRequired[dict[str, Any]]
    answers: NotRequired[dict[str, Any]]


class InteractAskAccepted(TypedDict):
    tool_call_id: str
    status: Literal["accepted"]
    interaction: Interaction
