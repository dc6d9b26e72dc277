"""Running the real commands (``python -m service serve``, ``python -m relay``) as processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(args: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, **env}
    # The child keeps its own descriptor of the log; ours is closed at once.
    with log.open("ab") as handle:
        return subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=full_env, stdout=handle, stderr=subprocess.STDOUT
        )


def wait_http(url: str, timeout: float = 20.0, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


def stop(process: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode
