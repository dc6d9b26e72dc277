"""``python -m service dev``: the whole stack on one machine.

With no ``DATABASE_URL`` it starts an embedded Postgres (the ``pgserver`` package) in
``<data-dir>/pg``, migrates, then runs the service (and, as they land, the relay and the demo
Agent) as child processes, printing the address and the tokens it made. Ctrl-C stops them all.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from service.db.migrate import upgrade

TOKEN_NAMES = ("AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN")


def _secrets(data_dir: Path) -> dict[str, str]:
    """Tokens made once per data directory, so a restart keeps the same sign-in link."""
    path = data_dir / "secrets.json"
    if path.exists():
        stored: dict[str, str] = json.loads(path.read_text())
    else:
        stored = {name: secrets.token_urlsafe(24) for name in TOKEN_NAMES}
        stored["WEBHOOK_SECRET"] = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        path.write_text(json.dumps(stored, indent=2))
        path.chmod(0o600)
    return stored


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _database_url(data_dir: Path) -> tuple[str, Any]:
    url = os.environ.get("DATABASE_URL")
    if url:
        return url, None
    runtime_dir = data_dir / "run"
    runtime_dir.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime_dir))
    try:
        import pgserver
    except ImportError:
        raise SystemExit(
            "DATABASE_URL is not set and the embedded Postgres is not installed: "
            "pip install -e '.[embedded]' or set DATABASE_URL"
        ) from None
    server = pgserver.get_server(data_dir / "pg", cleanup_mode="stop")  # type: ignore[attr-defined]
    return str(server.get_uri()), server


def _sign_in_link(base: str, env: dict[str, str]) -> str:
    """The host page of the first demo conversation; the token rides in the fragment, which the
    browser never sends, and the sign-in page submits it and drops it from the address bar."""
    conversation = (env.setdefault("DEMO_CONVERSATIONS", "demo").replace(",", " ").split() or ["demo"])[0]
    token = env["HOST_TOKEN"].replace(",", " ").split()[0]
    return f"{base}/host/?conversation_id={quote(conversation, safe='')}#token={quote(token, safe='')}"


def run(host: str, port: int, data_dir_name: str) -> int:
    data_dir = Path(data_dir_name).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    url, server = _database_url(data_dir)
    env = dict(os.environ)
    env["DATABASE_URL"] = url
    for name, value in _secrets(data_dir).items():
        env.setdefault(name, value)
    upgrade(url)

    base = f"http://{host}:{port}"
    children: list[tuple[str, subprocess.Popen[bytes]]] = [
        (
            "service",
            subprocess.Popen(
                [sys.executable, "-m", "service", "serve", "--host", host, "--port", str(port)],
                env=env,
            ),
        )
    ]
    # The demo Agent also follows the demo conversation(s) and answers the person there.
    env.setdefault("LINEUP_URL", base)
    sign_in = _sign_in_link(base, env)
    # The relay delivers results to a demo Agent that verifies the signatures and logs them.
    agent_port = str(_free_port(host))
    env.setdefault("AGENT_WEBHOOK_URL", f"http://{host}:{agent_port}/webhooks/lineup")
    env.setdefault("RELAY_METRICS_PORT", str(_free_port(host)))
    children.append(
        (
            "demo-agent",
            subprocess.Popen(
                [sys.executable, "-m", "demo_agent", "--host", host, "--port", agent_port], env=env
            ),
        )
    )
    children.append(("relay", subprocess.Popen([sys.executable, "-m", "relay"], env=env)))
    print(
        "\nLineup Runtime (dev)\n"
        f"  service       {base}\n"
        f"  database      {url}\n"
        f"  relay posts to {env['AGENT_WEBHOOK_URL']} (the demo agent logs each result)\n"
        f"  relay metrics http://{host}:{env['RELAY_METRICS_PORT']}/metrics\n"
        f"  AGENT_TOKEN   {env['AGENT_TOKEN']}\n"
        f"  HOST_TOKEN    {env['HOST_TOKEN']}\n"
        f"  OPERATOR_TOKEN {env['OPERATOR_TOKEN']}\n"
        f"  try: curl -H 'Authorization: Bearer {env['AGENT_TOKEN']}' {base}/v1/tools\n"
        f"\nOpen the web host (signed in, conversation with the demo Agent):\n  {sign_in}\n"
        "Ctrl-C stops everything.\n",
        flush=True,
    )
    stopping = False

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    exit_code = 0
    try:
        while not stopping:
            for name, child in children:
                code = child.poll()
                if code is not None:
                    print(f"dev: {name} exited with {code}; stopping", file=sys.stderr)
                    exit_code = code or 1
                    stopping = True
            time.sleep(0.2)
    finally:
        for _, child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for _, child in children:
            try:
                child.wait(timeout=25)
            except subprocess.TimeoutExpired:
                child.kill()
        if server is not None:
            server.cleanup()
    return exit_code
