"""Running processes, ours (``python -m service serve``, ``python -m relay``) and others (``pg_ctl``,
``patroni``), for the tests, the benches and the rigs alike: started with their output in a log,
stopped (SIGTERM, then SIGKILL) or killed (SIGKILL), and waited for over HTTP.

A process of ours gets the caller's environment without the service's own settings (``DATABASE_URL``,
the tokens, ``RELAY_*``…): it runs with what the caller chose and the defaults, never with whatever
the shell that ran the tests happened to export.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Self

import httpx

from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]

# The variables the service and the relay read their settings from.
SETTINGS = frozenset(name.upper() for name in Settings.model_fields)


# Ports for our servers come from below the kernel's range for outgoing connections' local ports
# (``net.ipv4.ip_local_port_range``, 32768-60999 by default). A port from inside it, free when
# picked, can be taken as the local port of any short connection (a poll, a client's reconnect) in
# the seconds before its server starts, which then fails to listen.
_LISTEN_PORTS = range(10000, 32768)


def _ephemeral_ports() -> range:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return range(32768, 61000)
    return range(low, high + 1)


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on or connects from, outside the range the kernel hands
    to outgoing connections (the kernel's own pick when that range leaves no room)."""
    ephemeral = _ephemeral_ports()
    candidates = [port for port in _LISTEN_PORTS if port not in ephemeral]
    for port in random.sample(candidates, min(len(candidates), 50)):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment(env: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without the settings of ours, then ``env``."""
    return {**{k: v for k, v in os.environ.items() if k not in SETTINGS}, **env}


def launch(
    command: Sequence[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    *,
    user: str | None = None,
    new_group: bool = False,
    cwd: Path = ROOT,
) -> subprocess.Popen[bytes]:
    """Any command, its output appended to ``log``; as ``user`` (and that user's group) when given;
    ``new_group`` makes it the leader of a process group of its own, so that ``stop``/``kill`` with
    ``group`` reach its children too."""
    account = pwd.getpwnam(user) if user is not None else None
    # The child keeps its own descriptor of the log; ours is closed at once.
    with log.open("ab") as handle:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=handle,
            stderr=subprocess.STDOUT,
            user=account.pw_uid if account is not None else None,
            group=account.pw_gid if account is not None else None,
            start_new_session=new_group,
        )


def spawn(
    args: Sequence[str], env: Mapping[str, str], log: Path, *, cwd: Path = ROOT
) -> subprocess.Popen[bytes]:
    """``python ARGS`` from the repository root (or ``cwd``) with the settings in ``env`` (and no
    others of ours)."""
    return launch([sys.executable, *args], log, environment(env), cwd=cwd)


ANY_STATUS = 0  # for wait_http: any answer will do


def wait_http(
    url: str,
    timeout: float = 20.0,
    process: subprocess.Popen[bytes] | None = None,
    *,
    status: int | None = None,
) -> None:
    """Until ``url`` answers ``status`` (any status under 500 when None, any at all with
    ``ANY_STATUS``); an error when ``process`` exits first or the time is up."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            answer = httpx.get(url, timeout=1.0)
            code = answer.status_code
            if code < 500 if status is None else status in (code, ANY_STATUS):
                return
            last = f"{answer.status_code} {answer.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s (last: {last})")


def _signal(process: subprocess.Popen[bytes], signum: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)


def stop(
    process: subprocess.Popen[bytes],
    timeout: float = 20.0,
    *,
    group: bool = False,
    signum: int = signal.SIGTERM,
) -> int:
    """SIGTERM (or ``signum``), then SIGKILL if it has not exited within ``timeout``; its exit code."""
    if process.poll() is None:
        _signal(process, signum, group)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal(process, signal.SIGKILL, group)
            process.wait()
    return process.returncode


def kill(process: subprocess.Popen[bytes], *, group: bool = False) -> None:
    """SIGKILL, and wait for it."""
    _signal(process, signal.SIGKILL, group)
    process.wait()


def log_tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class ExitedError(RuntimeError):
    """A process ended before it was ready; the message holds its last log lines."""


class Child:
    """A command of ours (``python ARGS``) that can be started again after a stop or a SIGKILL, with
    the same settings and the same log."""

    def __init__(
        self, args: Sequence[str], log: Path, env: Mapping[str, str] | None = None, *, cwd: Path = ROOT
    ) -> None:
        self.args = list(args)
        self.log = log
        self.env = dict(env or {})
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def command(self) -> list[str]:
        return self.args

    def start(self) -> Self:
        self.process = spawn(self.command(), self.env, self.log, cwd=self.cwd)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_http(self, url: str, timeout: float = 60.0, *, status: int | None = None) -> float:
        """Until ``url`` answers (see ``wait_http``); the seconds it took."""
        began = time.monotonic()
        try:
            wait_http(url, timeout, self.process, status=status)
        except RuntimeError as exc:
            raise ExitedError(f"{exc}; log {self.log}:\n{log_tail(self.log)}") from None
        return time.monotonic() - began

    def kill(self) -> None:
        """SIGKILL (counted in ``kills``)."""
        assert self.process is not None
        kill(self.process)
        self.kills += 1

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code (None if it never started)."""
        return None if self.process is None else stop(self.process, timeout)


def _token(kind: str) -> str:
    return f"{kind}-{secrets.token_hex(16)}"


class ServiceProcess(Child):
    """``python -m service serve`` on 127.0.0.1 and a port of its own (the same on every start),
    with tokens of its own unless ``env`` names them."""

    def __init__(
        self,
        database_url: str,
        log_dir: Path,
        *,
        port: int | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> None:
        self.port = port or free_port()
        settings = {
            "DATABASE_URL": database_url,
            "AGENT_TOKEN": _token("agent"),
            "HOST_TOKEN": _token("host"),
            "OPERATOR_TOKEN": _token("operator"),
            **(env or {}),
        }
        super().__init__(args, log_dir / f"service-{self.port}.log", settings, cwd=cwd)
        self.database_url = database_url
        self.ready_in = 0.0

    def command(self) -> list[str]:
        return ["-m", "service", "serve", "--host", "127.0.0.1", "--port", str(self.port), *self.args]

    @property
    def agent_token(self) -> str:
        return self.env["AGENT_TOKEN"]

    @property
    def host_token(self) -> str:
        return self.env["HOST_TOKEN"]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def agent_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.agent_token}"}

    def wait_ready(self, timeout: float = 60.0) -> float:
        """Until ``/readyz`` answers 200 (its database reached); the seconds it took."""
        self.ready_in = self.wait_http(f"{self.base_url}/readyz", timeout, status=200)
        return self.ready_in

    def start_ready(self, attempts: int = 3) -> None:
        """Start and wait until ready; on a port another process took meanwhile, again on a new one."""
        for attempt in range(attempts):
            self.start()
            try:
                self.wait_ready()
                return
            except ExitedError as exc:
                if attempt == attempts - 1 or "address already in use" not in str(exc):
                    raise
                self.port = free_port()
                self.log = self.log.with_name(f"service-{self.port}.log")


class RelayProcess(Child):
    """``python -m relay`` delivering to ``webhook_url``; a fixed ``RELAY_ID`` makes a restarted relay
    hand back at once the leases its killed predecessor held."""

    def __init__(
        self,
        database_url: str,
        webhook_url: str,
        secret: str,
        log: Path,
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path = ROOT,
    ) -> None:
        settings = {
            "DATABASE_URL": database_url,
            "AGENT_WEBHOOK_URL": webhook_url,
            "WEBHOOK_SECRET": secret,
            **(env or {}),
        }
        super().__init__(["-m", "relay"], log, settings, cwd=cwd)

    def wait_ready(self, timeout: float = 20.0) -> float:
        """Until its probe port (``RELAY_METRICS_PORT``) answers ``/readyz`` 200."""
        return self.wait_http(
            f"http://127.0.0.1:{self.env['RELAY_METRICS_PORT']}/readyz", timeout, status=200
        )


@contextlib.contextmanager
def running_service(
    database_url: str,
    log_dir: Path,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    cwd: Path = ROOT,
) -> Iterator[ServiceProcess]:
    """``python -m service serve`` with its default settings (but for ``env``) on a free port of
    127.0.0.1, ready (``/readyz`` 200) on entry; stopped with SIGTERM on the way out. ``cwd``:
    another checkout's service (with ``harness.releases.release_env`` in ``env``)."""
    service = ServiceProcess(database_url, log_dir, args=args, env=env, cwd=cwd)
    service.start()
    try:
        service.wait_ready(timeout)
        yield service
    finally:
        code = service.stop(20.0)
        if code not in (0, -signal.SIGTERM):
            print(f"warning: the service exited with {code}; log {service.log}", file=sys.stderr)
