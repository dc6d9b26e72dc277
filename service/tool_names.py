"""The names a tool is listed under where model providers see it (MCP ``tools/list``).

A manifest names its Tools with their app's scope and a dot (``pomodoro.start``); REST's ``tool``
field, the webhooks and the events keep that name. Model providers take function names matching
``^[a-zA-Z0-9_-]{1,64}$`` only (OpenAI's API and those compatible with it refuse the whole request
otherwise; Anthropic's tool names follow the same pattern), and an agent framework hands every
listed MCP tool to its model under the listed name. So MCP lists each tool under ``listed_name``:
every character outside ``[a-zA-Z0-9_-]`` becomes ``_`` (``pomodoro.start`` → ``pomodoro_start``,
``pomodoro.app.read`` → ``pomodoro_app_read``). ``listed_names`` maps a set of names and refuses
one whose listed name is too long, empty, or the same as another's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What every model provider takes as a function (tool) name.
PROVIDER_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


class ToolNameError(ValueError):
    """A set of tool names that cannot all be listed under provider-safe names."""


def listed_name(name: str) -> str:
    """The provider-safe name a tool is listed under: ``name`` with every character outside
    ``[a-zA-Z0-9_-]`` replaced by ``_`` (it may still be too long or empty: ``listed_names``)."""
    return _UNSAFE.sub("_", name)


def listed_names(names: Iterable[str]) -> dict[str, str]:
    """Each listed name → the tool's own name, or ``ToolNameError`` naming what cannot be listed:
    a listed name past 64 characters (or empty), or two tools that would be listed alike."""
    listed: dict[str, str] = {}
    for name in names:
        safe = listed_name(name)
        if not PROVIDER_SAFE.match(safe):
            raise ToolNameError(
                f"the tool {name!r} cannot be listed: {safe!r} must match {PROVIDER_SAFE.pattern}"
            )
        other = listed.get(safe)
        if other is not None and other != name:
            raise ToolNameError(f"the tools {other!r} and {name!r} would both be listed as {safe!r}")
        listed[safe] = name
    return listed
