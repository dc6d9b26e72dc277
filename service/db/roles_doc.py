"""The grants map of ``service.db.roles`` as Markdown, for docs/operations.md ("Database roles"):
``python -m service.db.roles_doc`` prints it, and a test keeps the document's copy equal to it."""

from __future__ import annotations

from service.db.roles import GRANTEES, TABLES, VIEWS, functions
from service.manifests import registry_of
from service.settings import Settings

BEGIN = (
    "<!-- grants: generated from service/db/roles.py by `python -m service.db.roles_doc`; a test compares -->"
)
NONE = "\N{EN DASH}"
END = "<!-- /grants -->"


def _privileges(privileges: tuple[str, ...]) -> str:
    return ", ".join(privileges) if privileges else NONE


def grants_markdown() -> str:
    """Every table and view with what each role may do on it, then the functions each may execute
    (the engine's and those of the apps the default settings run: the shipped ones)."""
    executable = functions(registry_of(Settings()))
    lines = [
        "| table or view | " + " | ".join(GRANTEES) + " |",
        "| --- | " + " | ".join("---" for _ in GRANTEES) + " |",
    ]
    for table, grants in sorted(TABLES.items()):
        cells = [_privileges(grants.get(role, ())) for role in GRANTEES]
        lines.append(f"| `{table}` | " + " | ".join(cells) + " |")
    for view, readers in sorted(VIEWS.items()):
        cells = ["SELECT" if role in readers else NONE for role in GRANTEES]
        lines.append(f"| `{view}` (view) | " + " | ".join(cells) + " |")
    lines.append("")
    for role in GRANTEES:
        names = sorted(name for name, roles in executable.items() if role in roles)
        listed = ", ".join(f"`{name}`" for name in names) if names else "none"
        lines.append(f"- `EXECUTE`, {role}: {listed}")
    triggers = sorted(name for name, roles in executable.items() if not roles)
    lines.append(f"- no role (trigger functions): {', '.join(f'`{name}`' for name in triggers)}")
    return "\n".join(lines) + "\n"


def block() -> str:
    """The generated block as docs/operations.md holds it, between its markers."""
    return f"{BEGIN}\n{grants_markdown()}{END}"


if __name__ == "__main__":
    print(block())
