"""``python -m service dev``: the whole stack on one machine.

With no ``DATABASE_URL`` it starts an embedded Postgres (the ``pgserver`` package) in
``<data-dir>/pg``, migrates, runs the service, and once the service answers ``/readyz`` the demo
Agent and a relay, as child processes. It prints the address, a ready-to-paste ``export`` line of
the settings and a sign-in link, and keeps those settings in ``<data-dir>/env`` while it runs
(``service.dev_env``). Ctrl-C stops them all.

One stack per data directory and port: a second ``dev`` refuses at once, naming the running one
(its pid and address, from ``<data-dir>/dev.lock``, which the running one holds locked), or the
program holding the port; it never touches the first one's files. Stopping — Ctrl-C, SIGTERM, or
the parent (``make``) going away without a word, as an IDE's stop button does — stops every child
and ends with one line saying so.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlsplit

import httpx
import psycopg

from service import dev_env
from service.db import roles
from service.db.migrate import upgrade
from service.logging import in_container
from service.manifests import registry_of
from service.settings import Settings, split_tokens

TOKEN_NAMES = ("AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN")
#: The password of each database role, kept with the tokens; no child process sees them.
ROLE_PASSWORDS = {kind: f"DB_{kind.upper()}_PASSWORD" for kind in roles.KINDS}
READY_SECONDS = 60.0
LOCK_FILE = "dev.lock"
#: The banner's addresses and sign-in links, while the stack runs: ``make links`` prints them again.
LINKS_FILE = "links"


def log_format(environ: dict[str, str], terminal: bool) -> str:
    """What the stack's processes log as: ``LOG_FORMAT`` when set; otherwise lines for a person when
    ``dev``'s output is a terminal outside a container, JSON for a collector or a file."""
    chosen = environ.get("LOG_FORMAT")
    if chosen:
        return chosen
    return "console" if terminal and not in_container() else "json"


def write_links(data_dir: Path, text: str) -> Path:
    """``<data-dir>/links``, readable by this user only (the links carry sign-in tokens)."""
    path = data_dir / LINKS_FILE
    fd = os.open(path.with_suffix(".new"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(path.with_suffix(".new"), path)
    return path


class AlreadyRunning(SystemExit):
    """Another dev stack runs from this data directory, or something holds the port."""


def _claim(data_dir: Path, base: str) -> TextIO:
    """Hold ``<data-dir>/dev.lock`` while this stack runs (the lock ends with the process, however
    it ends), with this stack's pid and address in it for a second ``dev`` to name."""
    handle = (data_dir / LOCK_FILE).open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        try:
            running = json.loads(handle.read())
        except ValueError:
            running = {}
        handle.close()
        pid, address = running.get("pid", "?"), running.get("address", "?")
        raise AlreadyRunning(
            f"dev: a dev stack already runs from {_shown(data_dir)} (pid {pid}, {address}); use that one, "
            f"or stop it first (Ctrl-C where it runs, or kill {pid})"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "address": base}) + "\n")
    handle.flush()
    return handle


def _check_port(host: str, port: int) -> None:
    """Refuse at once when something already listens on the address the service would take."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise AlreadyRunning(
                f"dev: {host}:{port} is taken by another program; stop it, or start on another port: "
                f"make dev PORT={port + 1}"
            ) from None


def _secrets(data_dir: Path) -> dict[str, str]:
    """Tokens made once per data directory, so a restart keeps the same sign-in link."""
    path = data_dir / "secrets.json"
    stored: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    made = {name: secrets.token_urlsafe(24) for name in TOKEN_NAMES if name not in stored}
    if "WEBHOOK_SECRET" not in stored:
        made["WEBHOOK_SECRET"] = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    if "HOST_SESSION_SECRET" not in stored:  # data directories from before host sessions get one
        made["HOST_SESSION_SECRET"] = secrets.token_urlsafe(32)
    for name in ROLE_PASSWORDS.values():  # the database roles' (data directories from before them too)
        if name not in stored:
            made[name] = secrets.token_urlsafe(24)
    if made:
        stored.update(made)
        fd = os.open(path.with_suffix(".new"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(stored, indent=2))
        os.replace(path.with_suffix(".new"), path)
    return stored


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _database_url(data_dir: Path) -> tuple[str, Any]:
    """``DATABASE_URL``, or an embedded Postgres in ``<data-dir>/pg``. A ``DATABASE_URL`` that is
    the embedded one of an earlier run (pasted from its ``export`` line) means the embedded one."""
    url = os.environ.get("DATABASE_URL")
    embedded = data_dir / "pg.url"
    if url and not (embedded.exists() and embedded.read_text().strip() == url):
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
    url = str(server.get_uri())
    embedded.write_text(url + "\n")
    return url, server


def as_role(url: str, role: str, password: str | None) -> str:
    """``url`` logging in as ``role`` (with ``password``): same server, database and parameters."""
    scheme, sep, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    hosts = authority.rsplit("@", 1)[-1]
    user = quote(role, safe="") + (f":{quote(password, safe='')}" if password else "")
    return f"{scheme}{sep}{user}@{hosts}{slash}{tail}"


def _user(url: str) -> str:
    return urlsplit(url).username or "(the default user)"


def _role_urls(url: str, env: dict[str, str], stored: dict[str, str]) -> dict[str, str]:
    """The database roles made (or brought up to date) with the admin ``url``, and each one's URL
    by kind; with an ``url`` that may not make roles, that one URL for every process, said once."""
    names = roles.Names(
        **{kind: env.get(f"DB_{kind.upper()}_ROLE") or roles.DEFAULT_NAMES[kind] for kind in roles.KINDS}
    )
    passwords = {kind: stored[name] for kind, name in ROLE_PASSWORDS.items()}
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            roles.ensure(conn, names, registry_of(Settings()), passwords)
    except (psycopg.errors.InsufficientPrivilege, ValueError) as exc:
        reason = exc.diag.message_primary if isinstance(exc, psycopg.Error) else str(exc)
        print(
            f"dev: cannot make the database roles ({reason}); every process connects with DATABASE_URL",
            file=sys.stderr,
        )
        return dict.fromkeys(roles.KINDS, url)
    return {kind: as_role(url, names.of(kind), passwords[kind]) for kind in roles.KINDS}


def _demo_conversations(env: dict[str, str]) -> list[str]:
    return env.setdefault("DEMO_CONVERSATIONS", "demo").replace(",", " ").split() or ["demo"]


def _sign_in_link(base: str, env: dict[str, str]) -> str:
    """The host page of the first demo conversation with a sign-in for the demo person: a session
    the dev stack mints for them with HOST_TOKEN, as a Host backend would, scoped to the demo
    conversations. The token rides in the fragment, which the browser never sends; the sign-in page
    drops it from the address bar, shows whom it signs in as, and signs in on the person's click."""
    conversations = _demo_conversations(env)
    response = httpx.post(
        f"{base}/v1/host/sessions",
        json={"subject": "demo person", "conversation_ids": conversations, "ttl_seconds": 86400},
        headers={"Authorization": f"Bearer {split_tokens(env['HOST_TOKEN'])[0]}"},
        timeout=10,
    )
    response.raise_for_status()
    token = response.json()["session"]
    return f"{base}/host/?conversation_id={quote(conversations[0], safe='')}#token={quote(token, safe='')}"


def _console_link(base: str, env: dict[str, str]) -> str:
    """The operator console's sign-in with the first OPERATOR_TOKEN: the token rides in the
    fragment, which the browser never sends; the console's sign-in page fills it in, drops it from
    the address bar and waits for the operator's click."""
    token = split_tokens(env["OPERATOR_TOKEN"])[0]
    return f"{base}/ops/#token={quote(token, safe='')}"


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _wait_ready(url: str, service: subprocess.Popen[bytes], stopping: Callable[[], bool]) -> bool:
    """Until the service answers ``/readyz`` (database reachable, migrations at head); False when
    it exits, does not answer within READY_SECONDS, or Ctrl-C comes first."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline and not stopping():
        if service.poll() is not None:
            return False
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def run(host: str, port: int, data_dir_name: str) -> int:
    data_dir = Path(data_dir_name).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    base = f"http://{host}:{port}"
    try:
        lock = _claim(data_dir, base)
        _check_port(host, port)
    except AlreadyRunning as refused:
        print(refused, file=sys.stderr)
        return 1
    with lock:
        return _run(host, port, data_dir, base)


def _run(host: str, port: int, data_dir: Path, base: str) -> int:
    stopping = False
    parent = os.getppid()

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    def _stopped() -> bool:
        # An IDE's stop button signals make alone: its children find themselves orphaned.
        return stopping or os.getppid() != parent

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    url, server = _database_url(data_dir)
    env = dict(os.environ)
    env["LOG_FORMAT"] = log_format(env, sys.stderr.isatty())
    stored = _secrets(data_dir)
    for name, value in stored.items():
        if name not in ROLE_PASSWORDS.values():
            env.setdefault(name, value)
    # The database roles (docs/operations.md, "Database roles"), made with the one admin URL:
    # migrate runs as the owner, the service and the relay as their own roles; commands run beside
    # the stack (ops, migrate) take the owner's URL from .dev/env.
    role_urls = _role_urls(url, env, stored)
    env["DATABASE_URL"] = role_urls[roles.OWNER]
    upgrade(
        role_urls[roles.OWNER],
        registry_of(Settings()),  # the apps the environment names, as serve will run them
        roles.Names(**{k: env.get(f"DB_{k.upper()}_ROLE") or v for k, v in roles.DEFAULT_NAMES.items()}),
    )

    # The demo Agent follows the demo conversation(s) and answers the person there; the relay
    # delivers results to it, and it verifies their signatures.
    env.setdefault("LINEUP_URL", base)
    # Plain http on this machine: cookies without Secure; the MiniApp pages name this origin;
    # HOST_TOKEN itself may sign in to the page here (one person, their own machine).
    env.setdefault("COOKIE_SECURE", "false")
    env.setdefault("PUBLIC_ORIGIN", base)
    env.setdefault("HOST_TOKEN_SIGN_IN", "true")
    # Its secrets are random (or the person's own choice on their own machine): no deployment checks.
    env["LINEUP_DEV_STACK"] = "true"
    _demo_conversations(env)
    agent_port = str(_free_port(host))
    env.setdefault("AGENT_WEBHOOK_URL", f"http://{host}:{agent_port}/webhooks/lineup")
    env.setdefault("RELAY_METRICS_PORT", str(_free_port(host)))
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    exit_code = 0
    env_file: Path | None = None
    try:
        serve = [sys.executable, "-m", "service", "serve", "--host", host, "--port", str(port)]
        children.append(
            ("service", subprocess.Popen(serve, env={**env, "DATABASE_URL": role_urls[roles.RUNTIME]}))
        )
        # The demo Agent talks to the service: it starts once the service is ready.
        if not _wait_ready(f"{base}/readyz", children[0][1], _stopped):
            if not _stopped():
                print(f"dev: the service did not become ready at {base}/readyz; stopping", file=sys.stderr)
                exit_code = 1
            return exit_code
        sign_in = _sign_in_link(base, env)
        agent = [sys.executable, "-m", "demo_agent", "--host", host, "--port", agent_port]
        agent_env = {name: value for name, value in env.items() if name != "DATABASE_URL"}
        children.append(("demo-agent", subprocess.Popen(agent, env=agent_env)))
        relay_env = {**env, "DATABASE_URL": role_urls[roles.RELAY]}
        children.append(("relay", subprocess.Popen([sys.executable, "-m", "relay"], env=relay_env)))
        env_file = dev_env.write(data_dir, env)
        links = (
            f"Open the front door (what runs here and how to sign in to each):\n  {base}/\n"
            f"Open the web host (it shows whom the link signs in as; click Sign in), and type"
            f' "focus 1 minute on tests":\n  {sign_in}\n'
            f"Open the operator console (the link fills in OPERATOR_TOKEN; click Sign in):\n"
            f"  {_console_link(base, env)}\n"
        )
        links_file = write_links(data_dir, links)
        print(
            "\nLineup Runtime (dev) is ready\n"
            f"  service        {base}\n"
            f"  database       {url}\n"
            f"  roles          migrate as {_user(role_urls[roles.OWNER])}, the service as"
            f" {_user(role_urls[roles.RUNTIME])}, the relay as {_user(role_urls[roles.RELAY])}\n"
            f"  relay          posts results to {env['AGENT_WEBHOOK_URL']} (the demo Agent logs each one);"
            f" metrics http://{host}:{env['RELAY_METRICS_PORT']}/metrics\n"
            f"  tokens         made once, kept in {_shown(data_dir / 'secrets.json')}; while this runs, every"
            f" command started here (make ops ARGS=…, migrate, serve, relay) finds them and the database"
            f" in {_shown(env_file)}\n"
            f"  logs           {'lines to read' if env['LOG_FORMAT'] == 'console' else 'JSON lines'}"
            " (LOG_FORMAT=json or console chooses)\n"
            "\nFor curl and other shells, paste:\n"
            f"  {dev_env.export_line(env)}\n"
            f'  curl -H "Authorization: Bearer $AGENT_TOKEN" {base}/v1/tools\n'
            "\nConnect an MCP client (streamable HTTP; each tools/call names its conversation in"
            ' params._meta["io.lineup/conversation_id"]):\n'
            f"  URL     {base}/mcp\n"
            f"  header  Authorization: Bearer {env['AGENT_TOKEN'].split()[0]}\n"
            f"\n{links}"
            f"`make links` prints these links again ({_shown(links_file)}). Ctrl-C stops everything.\n",
            flush=True,
        )
        while not _stopped():
            for name, child in children:
                code = child.poll()
                if code is not None:
                    print(f"dev: {name} exited with {code}; stopping", file=sys.stderr)
                    exit_code = code or 1
                    stopping = True
            time.sleep(0.2)
    finally:
        if env_file is not None:  # only this run's: a refused second run never gets here
            dev_env.remove(data_dir)
            (data_dir / LINKS_FILE).unlink(missing_ok=True)
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
        with contextlib.suppress(OSError):  # the terminal may be gone with make
            print(
                "dev: stopped; the service, the relay, the demo Agent and the database it started are down",
                flush=True,
            )
    return exit_code
