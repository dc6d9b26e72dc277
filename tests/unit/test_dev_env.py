"""The dev stack's settings on disk: written by ``dev``, read by every command run beside it."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from service import dev_env

VALUES = {
    "DATABASE_URL": "postgresql://postgres:@/postgres?host=/home/a b/.dev/pg",
    "AGENT_TOKEN": "agent-token-with-dash-and_underscore",
    "HOST_TOKEN": "host'token\"with quotes",
    "OPERATOR_TOKEN": "operator-token-000000001",
    "AGENT_WEBHOOK_URL": "http://127.0.0.1:4321/webhooks/lineup",
    "WEBHOOK_SECRET": "whsec_Md/+zYr3nHn+gq/Rg/VJmRQVUi3zZ02bYU4CNM9j1p8=",
}


def shell_values(script: str, names: tuple[str, ...]) -> list[str]:
    """What a POSIX shell sees after running ``script``."""
    printed = "".join(f'printf "%s\\0" "${name}";' for name in names)
    done = subprocess.run(
        ["sh", "-c", f"{script}\n{printed}"], capture_output=True, check=True, timeout=30, env={}
    )
    return done.stdout.decode().split("\0")[:-1]


def test_the_env_file_round_trips_every_value_and_only_its_owner_reads_it(tmp_path: Path) -> None:
    path = dev_env.write(tmp_path, {**VALUES, "UNRELATED": "x"})
    assert dev_env.read(path) == VALUES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert shell_values(f". {path}", dev_env.NAMES) == [VALUES[name] for name in dev_env.NAMES]


def test_the_printed_export_line_is_one_line_a_shell_takes_as_it_is() -> None:
    values = {**VALUES, "LINEUP_URL": "http://127.0.0.1:8001"}
    line = dev_env.export_line(values)
    assert "\n" not in line and line.startswith("export DATABASE_URL=")
    assert shell_values(line, dev_env.SHELL_NAMES) == [values[name] for name in dev_env.SHELL_NAMES]


def test_with_no_database_url_a_command_takes_the_dev_settings_it_lacks(tmp_path: Path) -> None:
    path = dev_env.write(tmp_path, VALUES)
    environ = {"AGENT_TOKEN": "my-own-agent-token-0001", "DATABASE_URL": ""}
    assert dev_env.adopt(environ, tmp_path) == path
    assert environ == {**VALUES, "AGENT_TOKEN": "my-own-agent-token-0001"}
    assert dev_env.note(path).startswith(f"using the dev stack's settings from {path}")


def test_a_database_url_of_its_own_turns_the_dev_settings_off(tmp_path: Path) -> None:
    dev_env.write(tmp_path, VALUES)
    environ = {"DATABASE_URL": "postgresql://elsewhere/db"}
    assert dev_env.adopt(environ, tmp_path) is None
    assert environ == {"DATABASE_URL": "postgresql://elsewhere/db"}


def test_without_a_running_dev_stack_nothing_is_taken(tmp_path: Path) -> None:
    dev_env.write(tmp_path, VALUES)
    dev_env.remove(tmp_path)
    environ: dict[str, str] = {}
    assert dev_env.adopt(environ, tmp_path) is None
    assert environ == {}
