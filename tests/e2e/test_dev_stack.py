"""``python -m service dev`` as a new user meets it: it prints one line to paste, the README's curl
examples work after that paste, commands run beside it find its settings by themselves, and the demo
Agent starts without a single connection error."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest

from harness.database import DatabaseFactory, with_database
from harness.processes import ROOT, free_port
from tests.support.logs import at_least, named

pytestmark = pytest.mark.e2e

STARTUP_SECONDS = 90
SETTINGS = (
    "DATABASE_URL",
    "AGENT_TOKEN",
    "HOST_TOKEN",
    "OPERATOR_TOKEN",
    "AGENT_WEBHOOK_URL",
    "WEBHOOK_SECRET",
)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a new user's shell: none of the service's settings, this checkout importable."""
    base = {k: v for k, v in os.environ.items() if k not in SETTINGS and not k.startswith("RELAY_")}
    return {**base, "PYTHONPATH": str(ROOT), **extra}


class DevStack:
    def __init__(
        self, cwd: Path, database_url: str, *, port: int | None = None, under_a_parent: bool = False
    ) -> None:
        self.cwd = cwd
        self.port = port or free_port()
        self.lines: list[str] = []
        command = [sys.executable, "-m", "service", "dev", "--port", str(self.port)]
        if under_a_parent:  # as make runs it: a parent that can go away without telling its child
            command = [sys.executable, "-c", f"import subprocess; subprocess.run({command!r})"]
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=clean_env(DATABASE_URL=database_url, DEMO_CONVERSATIONS="dev-test"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while "Ctrl-C stops everything." not in self.output:
            assert self.process.poll() is None, f"dev exited with {self.process.returncode}:\n{self.output}"
            assert time.monotonic() < deadline, f"dev was not ready in {STARTUP_SECONDS}s:\n{self.output}"
            time.sleep(0.1)

    def export_line(self) -> str:
        [line] = [line.strip() for line in self.lines if line.strip().startswith("export DATABASE_URL=")]
        return line

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode


@pytest.fixture(scope="module")
def dev(database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    """One stack for the tests that only use it (each checks what it left behind, none stops it),
    on a database of its own; the tests that start or stop a stack start their own."""
    name = database_factory.create()
    try:
        stack = DevStack(tmp_path_factory.mktemp("dev"), with_database(database_factory.server, name))
        try:
            stack.wait_ready()
            yield stack
        finally:
            stack.stop()
    finally:
        database_factory.drop(name)


def readme_curl_block(port: int) -> str:
    """The shell block of the README's "A tool call, by hand", aimed at this stack."""
    section = (ROOT / "README.md").read_text().split("## A tool call, by hand", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    assert "8000" not in block.group(1)  # the address comes from the pasted line (LINEUP_URL)
    return block.group(1).replace(".venv/bin/python", sys.executable)


def run_here(dev: DevStack, *args: str) -> subprocess.CompletedProcess[str]:
    """A command in the stack's directory, from a shell where nothing is set."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=dev.cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's examples use curl")
def test_after_pasting_the_one_printed_line_the_readmes_tool_calls_work(dev: DevStack) -> None:
    done = subprocess.run(
        ["bash", "-euc", dev.export_line() + "\n" + readme_curl_block(dev.port)],
        cwd=dev.cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r'"status":\s*"accepted"', done.stdout), done.stdout
    assert re.search(r'"status":\s*"interrupted"', done.stdout), done.stdout
    assert "operation" in done.stdout and "interrupted (agent_interrupt)" in done.stdout  # ops trace call-1


def test_commands_run_beside_it_with_nothing_set_find_its_settings(dev: DevStack) -> None:
    env_file = dev.cwd / ".dev" / "env"
    assert env_file.is_file() and (env_file.stat().st_mode & 0o077) == 0

    stats = run_here(dev, "-m", "service", "ops", "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["outbox"]["by_status"].keys() == {"pending", "delivered", "dead"}
    assert (
        stats.stderr.strip()
        == f"using the dev stack's settings from .dev{os.sep}env (set DATABASE_URL to use another database)"
    )
    migrate = run_here(dev, "-m", "service", "migrate")
    assert migrate.returncode == 0 and migrate.stdout.startswith("migrated to "), migrate.stderr


def test_it_prints_sign_in_links_with_the_tokens_in_their_fragment(dev: DevStack) -> None:
    secrets = json.loads((dev.cwd / ".dev" / "secrets.json").read_text())
    links = [line.strip() for line in dev.lines if "#token=" in line]
    base = f"http://127.0.0.1:{dev.port}"
    assert f"{base}/ops/#token={quote(secrets['OPERATOR_TOKEN'], safe='')}" in links, dev.output
    [host] = [link for link in links if link.startswith(f"{base}/host/?conversation_id=dev-test#token=")]
    # The links end the banner, and `make links` prints them again from a file only its owner reads.
    links_file = dev.cwd / ".dev" / "links"
    assert stat.S_IMODE(links_file.stat().st_mode) == 0o600
    again = links_file.read_text()
    assert host in again and f"{base}/ops/#token=" in again and f"{base}/\n" in again
    banner = dev.output.split("Lineup Runtime (dev) is ready", 1)[1].split("Ctrl-C stops everything.", 1)[0]
    last = banner.rstrip().splitlines()
    assert last[-1].startswith("`make links` prints these links again"), banner
    assert last[-2].strip().startswith(f"{base}/ops/#token="), banner
    assert banner.index(host) > banner.index("Connect an MCP client")
    made = subprocess.run(
        ["make", "-s", "-f", str(ROOT / "Makefile"), "links"],
        cwd=dev.cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert made.returncode == 0 and made.stdout == again, made.stderr
    # Not at a terminal: JSON lines for a collector (a terminal gets structlog's console lines).
    assert "logs           JSON lines" in dev.output
    session = unquote(host.split("#token=", 1)[1])
    shown = httpx.get(
        f"{base}/v1/host/conversations/dev-test/workspace", headers={"Authorization": f"Bearer {session}"}
    )
    assert shown.status_code == 200, shown.text


def test_the_demo_agent_starts_without_connection_errors_and_ctrl_c_leaves_nothing_behind(
    tmp_path: Path, database_url: str
) -> None:
    stack = DevStack(tmp_path, database_url)
    try:
        stack.wait_ready()
        deadline = time.monotonic() + 20
        while not named(stack.output, "following") and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        code = stack.stop()
    output: Any = stack.output
    assert named(output, "following")
    assert [r for r in at_least(output, "warning") if str(r.get("logger")).startswith("demo_agent")] == []
    assert "stream_error" not in output and "All connection attempts failed" not in output
    assert "Traceback" not in output, output
    assert code == 0
    assert not (tmp_path / ".dev" / "env").exists()
    assert not (tmp_path / ".dev" / "links").exists()
    assert (tmp_path / ".dev" / "secrets.json").exists()
    assert stack.lines[-1].startswith("dev: stopped;"), output


def test_a_second_dev_refuses_at_once_naming_the_first_and_leaves_its_files_alone(
    dev: DevStack, tmp_path_factory: pytest.TempPathFactory, database_url: str
) -> None:
    pid = dev.process.pid
    began = time.monotonic()
    second = DevStack(dev.cwd, database_url, port=free_port())
    assert second.process.wait(timeout=30) == 1
    second.stop()
    assert time.monotonic() - began < 15
    assert f"a dev stack already runs from .dev (pid {pid}, http://127.0.0.1:{dev.port})" in second.output
    assert "is ready" not in second.output
    # The first one's settings are still there, and commands beside it still work.
    assert (dev.cwd / ".dev" / "env").is_file()
    assert run_here(dev, "-m", "service", "ops", "stats").returncode == 0

    elsewhere = DevStack(tmp_path_factory.mktemp("elsewhere"), database_url, port=dev.port)
    assert elsewhere.process.wait(timeout=30) == 1
    elsewhere.stop()
    assert f"127.0.0.1:{dev.port} is taken by another program" in elsewhere.output
    assert f"make dev PORT={dev.port + 1}" in elsewhere.output
    assert dev.process.poll() is None


def test_when_its_parent_goes_away_without_a_word_it_stops_everything_it_started(
    tmp_path: Path, database_url: str
) -> None:
    stack = DevStack(tmp_path, database_url, under_a_parent=True)
    try:
        stack.wait_ready()
        stack.process.send_signal(signal.SIGTERM)  # make alone, as an IDE's stop button signals it
        stack.process.wait(timeout=10)
        deadline = time.monotonic() + 40
        while "dev: stopped;" not in stack.output and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stack.stop()
    assert "dev: stopped;" in stack.output, stack.output
    assert not (tmp_path / ".dev" / "env").exists()
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{stack.port}/healthz", timeout=2)
