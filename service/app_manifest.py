"""One MiniApp's manifest as the Runtime holds it once loaded and checked (``service.manifests``):
its Tools with their input schemas, its instance-state feature, its lifecycle and its surface.

These types sit below the registry and the registrations (``service.tools``), so that an app's
registration can read its own manifest (``Registration.context``) without importing the registry
that loads it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from service.json_errors import ErrorDetail, validate

INSTANCE_STATE_FEATURE = "app.instance-state.v1"
FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER


@dataclass(frozen=True)
class ToolSpec:
    name: str
    app_scope: str
    kind: str
    description: str
    input_schema: dict[str, Any]
    # The forms its decision may ask the person (key -> an MCP elicitation requestedSchema; the
    # Runtime API's app_ask), checked when the manifest is loaded.
    forms: dict[str, dict[str, Any]] = field(default_factory=dict)
    # An MCP call that opens an operation ending within this many seconds waits for its ending
    # (the manifest's ``operation.await_in_call_seconds``; service.mcp.progress). None: it never waits.
    await_in_call_seconds: int | None = None
    _validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_validator", Draft202012Validator(self.input_schema))

    def validate_arguments(self, arguments: object, prefix: str = "arguments") -> list[ErrorDetail]:
        return validate(self._validator, arguments, prefix)

    def normalized(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Valid arguments as the decision takes them: a number the schema says is an integer, sent
        as ``1500.0`` (which JSON Schema counts as an integer), becomes ``1500``."""
        properties = self.input_schema.get("properties", {})
        return {
            name: int(value)
            if isinstance(value, float) and properties.get(name, {}).get("type") == "integer"
            else value
            for name, value in arguments.items()
        }

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "app_scope": self.app_scope,
            "kind": self.kind,
            "description": self.description,
            "input_schema": copy.deepcopy(self.input_schema),
        }


@dataclass(frozen=True)
class InstanceStateFeature:
    state_schema_version: int
    state_schema: dict[str, Any]
    max_bytes: int
    retention: str
    _validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validator = Draft202012Validator(self.state_schema, format_checker=FORMAT_CHECKER)
        object.__setattr__(self, "_validator", validator)

    def validate_state(self, data: object, prefix: str = "data") -> list[ErrorDetail]:
        """Validate a snapshot's `data`; `format` (uuid, date-time) is asserted."""
        return validate(self._validator, data, prefix)


@dataclass(frozen=True)
class Lifecycle:
    """What the app declares about its instances (the manifest's ``lifecycle``): whether the person
    may open one by bringing the app to the foreground or only its Tools open one, and whether
    leaving the foreground ends its focusing operation (``interrupt``) or leaves it running."""

    opened_by: str = "person"  # or "tools"
    on_leave: str = "keep"  # or "interrupt"


@dataclass(frozen=True)
class McpApp:
    """A workspace app's page as an MCP App (the manifest's ``surface.mcp_app``): its ``ui://``
    resource (URI, name, title, description), the app's Tool whose calls a host renders it beside,
    what the app calls that Tool's operation in its View tools' sentences, and, by what they do
    (``read``, ``close``), descriptions of its View tools of its own (``service.mcp.app_tools``)."""

    uri: str
    name: str
    title: str
    description: str
    tool: str
    operation: str = "operation"
    tool_descriptions: Mapping[str, str] = field(default_factory=dict)


#: The largest file an app serves as a resource: read once per process and held in memory.
RESOURCE_MAX_BYTES = 1 << 20
#: Types served as text (UTF-8) besides ``text/*``; any other is served as base64 (a blob).
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/yaml", "application/javascript"})


@dataclass(frozen=True)
class AppResource:
    """A file of the app's folder (``resources/<file>``) that MCP clients list and read as a
    resource (the manifest's ``resources``; ``service.mcp.app_resource``)."""

    uri: str
    name: str
    title: str | None
    description: str
    mime_type: str
    path: Path

    @property
    def is_text(self) -> bool:
        kind = self.mime_type
        return kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml"))


@dataclass(frozen=True)
class AppManifest:
    app_scope: str
    name: str
    description: str
    surface_kind: str
    entry: str | None
    tools: tuple[ToolSpec, ...]
    instance_state: InstanceStateFeature | None
    file: str
    lifecycle: Lifecycle = Lifecycle()
    surface: Path | None = None  # a workspace app's page and its files (``<app>/surface/``)
    mcp_app: McpApp | None = None  # its page as an MCP App, when it declares one
    resources: tuple[AppResource, ...] = ()  # files of its folder it serves as MCP resources
