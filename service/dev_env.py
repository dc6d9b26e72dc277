"""The dev stack's settings on disk, so that every command run beside ``make dev`` finds them.

``python -m service dev`` writes ``<data-dir>/env`` (``.dev/env`` by default) while it runs: one
``export NAME=value`` line per setting, so a shell can also ``. .dev/env``. ``migrate``, ``serve``,
``ops`` and ``python -m relay`` started with no ``DATABASE_URL`` read ``.dev/env`` of the directory
they run in and take from it every variable the environment does not set; a ``DATABASE_URL`` of
their own turns this off. The tokens themselves are made once per data directory and kept in
``<data-dir>/secrets.json``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, MutableMapping
from pathlib import Path

DEV_DIR = Path(".dev")
ENV_FILE = "env"
#: What the dev stack's env file holds, in this order.
NAMES = ("DATABASE_URL", "AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN", "AGENT_WEBHOOK_URL", "WEBHOOK_SECRET")
#: The line ``make dev`` prints for a shell (curl and the like; ``LINEUP_URL`` is the service's
#: address, which the README's examples use); the rest is for the relay.
SHELL_NAMES = ("DATABASE_URL", "AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN", "LINEUP_URL")


def export_line(values: Mapping[str, str], names: tuple[str, ...] = SHELL_NAMES) -> str:
    """``export A=… B=…``, quoted for a POSIX shell."""
    return "export " + " ".join(f"{name}={shlex.quote(values[name])}" for name in names)


def write(data_dir: Path, values: Mapping[str, str]) -> Path:
    """Write the running stack's settings, readable by their owner only."""
    path = data_dir / ENV_FILE
    lines = [
        "# The settings of the running `python -m service dev` (removed when it stops).",
        "# Commands run in this directory with no DATABASE_URL use them; a shell can `. .dev/env`.",
        *(export_line(values, (name,)) for name in NAMES if values.get(name)),
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def remove(data_dir: Path) -> None:
    (data_dir / ENV_FILE).unlink(missing_ok=True)


def read(path: Path) -> dict[str, str]:
    """The ``export NAME=value`` lines of an env file; other names and lines are ignored."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            words = words[1:]
        for word in words:
            name, sep, value = word.partition("=")
            if sep and name in NAMES:
                found[name] = value
    return found


def adopt(environ: MutableMapping[str, str], directory: Path = DEV_DIR) -> Path | None:
    """With no ``DATABASE_URL`` in ``environ``, fill every unset variable from the dev stack's env
    file in ``directory``; returns that file, or None when there is none to use."""
    if environ.get("DATABASE_URL"):
        return None
    path = directory / ENV_FILE
    if not path.is_file():
        return None
    for name, value in read(path).items():
        if not environ.get(name):
            environ[name] = value
    return path


def note(path: Path) -> str:
    """What a command says on stderr when it runs on the dev stack's settings."""
    return f"using the dev stack's settings from {path} (set DATABASE_URL to use another database)"
