"""Every Agent Tool the service runs, declared once.

A Tool belongs to a MiniApp, one folder (``service/apps/<app>/``): its manifest entry (what the
Agent sees — name, description, input schema), its decision function in the app's SQL and its
registration (the app's ``registration.py``, of the type defined here): how it runs. A
registration names the SQL function that decides the Tool, the outcome words it answers with and
the kind of answer each is, what an accepted call opens (an operation or an interaction, which an
MCP client may await as a task), the settings its decision reads, its MCP annotations, one
sentence for a person about an answer, and, by outcome word, the type of each answer that is not a
refusal, for the OpenAPI document; and, if the app wants them, the MCP result's own content of
an answer (``content``: exact text, images, audio, embedded resources) in place of the sentence and
the JSON. It speaks words and kinds only: the faces name the HTTP status of a kind
(``service.http``). REST, MCP, ``GET /v1/tools`` and the document all read this one
declaration; adding a Tool touches neither face. A registration knows its own app's manifest
(``service.app_manifest``), never the registry that loads it (``service.manifests``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from service.app_manifest import AppManifest

Opens = Literal["operation", "interaction"]
#: One MCP content block as the wire carries it (``{"type": "text", "text": …}``, ``image``,
#: ``audio``, ``resource_link``, ``resource``); the MCP face checks each against the SDK's types.
Content = Mapping[str, Any]
_SQL_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class Hints:
    """MCP's tool annotations: how the Tool behaves, for a client deciding whether to ask first."""

    title: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = True  # per tool_call_id: a repeat replays the first answer


def _no_settings(settings: Any, app: AppManifest) -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class Registration:
    name: str
    decide: str  # the SQL function: (tool_call_id, conversation_id, arguments, context) -> decision
    outcomes: Mapping[str, type]  # each outcome word it answers with -> its kind of answer
    hints: Hints
    sentence: Callable[[Mapping[str, Any]], str]  # an answer that is not a refusal, for a person
    opens: Opens | None = None
    # What its decision reads (``p_context``), from the settings (``service.settings.Settings``,
    # typed loosely: the settings name the apps, so this declaration cannot import them) and its own
    # app's manifest.
    context: Callable[[Any, AppManifest], Mapping[str, Any]] = _no_settings
    # Each outcome word that is not a refusal -> the type of its answer, for the OpenAPI document (a
    # refusal's is the contract's error body). Words, not statuses: the faces name the status.
    answers: Mapping[str, Any] = field(default_factory=dict)
    # The MCP result's ``content`` for an answer that is not a refusal, from that answer (the REST
    # body, which stays the ``structuredContent``): a pure function of it, so a replay answers the
    # same bytes. None (the default): one text item, the sentence and then the JSON.
    content: Callable[[Mapping[str, Any]], Sequence[Content]] | None = None

    def __post_init__(self) -> None:
        if not _SQL_NAME.match(self.decide):
            raise ValueError(f"{self.name}: {self.decide!r} is not the name of a SQL function")
