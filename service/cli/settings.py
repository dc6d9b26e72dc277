"""``python -m service settings``: every environment variable the service and the relay read, grouped
by who needs them (required, common, tuning, roles, development only), with the value this
environment gives each and its default; secrets are masked. See docs/operations.md, "Settings".

It reads the environment as every command does (next to a running ``make dev`` with no
``DATABASE_URL``, that stack's ``.dev/env``) and checks nothing a command would require: exit 2
when a value is invalid, naming it.
"""

from __future__ import annotations

import argparse
from typing import Any

from service.db import urls
from service.settings import GROUPS, Settings, group_of, is_secret, load_settings

DESCRIPTION = __doc__
MASK = "****"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", choices=list(GROUPS), help="only the variables of this group")


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _masked(name: str, value: Any) -> str:
    if value is None or value == "":
        return "unset"
    if name.endswith("database_url"):  # the URL shows; its password does not
        password = urls.password(str(value))
        return str(value).replace(f":{password}@", f":{MASK}@") if password else str(value)
    return f"set ({MASK})"


def lines(settings: Settings, only: str | None = None) -> list[str]:
    """The report: a heading per group, then one line per variable: name, value, default."""
    fields = Settings.model_fields
    width = max(len(name) for name in fields)
    out: list[str] = []
    for group, title in GROUPS.items():
        if only is not None and group != only:
            continue
        out.append(f"{title}:")
        for name, field in fields.items():
            if group_of(name) != group:
                continue
            value = getattr(settings, name)
            shown = _masked(name, value) if is_secret(name) else _shown(value)
            default = "" if value == field.default else f"  (default {_shown(field.default)})"
            out.append(f"  {name.upper():<{width}}  {shown}{default}")
        out.append("")
    return out


def run(args: argparse.Namespace) -> int:
    settings = load_settings()  # SettingsError: python -m service says which and exits 2
    print("\n".join(lines(settings, args.group)).rstrip())
    return 0
