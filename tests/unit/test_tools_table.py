"""The docs' table of Tools is what the apps' registrations and manifests declare (service/apps/*/):
it changes with them or this test fails."""

from __future__ import annotations

from pathlib import Path

from service.http import status_of_kind
from service.manifests import registry_of
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def tools_table() -> str:
    registry = registry_of(Settings())
    lines = [
        "| tool | kind | outcomes (HTTP status) | an accepted call opens | MCP annotations |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in sorted(registry.tools):
        spec, runner = registry.tools[name], registry.runner(name)
        outcomes = ", ".join(f"`{o}` ({status_of_kind(k)})" for o, k in runner.outcomes.items())
        hints = runner.hints
        flags = [
            flag
            for flag, on in (
                ("read-only", hints.read_only),
                ("destructive", hints.destructive),
                ("idempotent", hints.idempotent),
            )
            if on
        ]
        lines.append(
            f"| `{name}` | {spec.kind} | {outcomes} | {runner.opens or '—'} | "
            f"“{hints.title}”; {', '.join(flags) or 'none'} |"
        )
    return "\n".join(lines)


def test_the_docs_table_of_tools_is_the_registry() -> None:
    table = tools_table()
    assert table in (ROOT / "docs" / "api.md").read_text(), (
        "docs/api.md's table of Tools should read:\n" + table
    )
