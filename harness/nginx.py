"""nginx (Debian's package) as the load balancer in front of several ``serve`` replicas.

Run as a plain foreground process — never as root: started by root, it runs as ``nobody`` — with
its configuration, logs and temporary files in a directory of its own (``-p``, ``-c``,
``daemon off``), on free ports of 127.0.0.1. One worker, so round-robin
is strict: with one request in flight at a time, consecutive requests alternate between replicas.

* ``round_robin_url``: round-robin, no affinity of any kind — what a 2026-07-28 client needs.
* ``affinity_url``: every request of one client address to the same replica while it is up, the
  next one when it is not — what a 2025-11-25 session (held in one replica's memory) needs.

Every answer names the replica that served it in ``X-Upstream``, and the access log has a line
per request: the replica, the ``Mcp-Method`` and ``Mcp-Name`` headers, the status.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.processes import ANY_STATUS, free_port, launch, stop, wait_http

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
UPSTREAM_HEADER = "x-upstream"


def available() -> bool:
    """Whether nginx is installed (``scripts/system-deps.sh`` installs Debian's nginx-light)."""
    return os.path.exists(NGINX)


_CONFIG = """
worker_processes 1;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    log_format routed '$upstream_addr $http_mcp_method $http_mcp_name $status';
    access_log {dir}/access.log routed;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;

    upstream round_robin {{
{servers}
        keepalive 32;
        # Below the replicas' own keep-alive timeout (uvicorn's 5 s), so nginx never reuses a
        # connection the replica is closing (that race answers 502).
        keepalive_timeout 2s;
    }}
    upstream affinity {{
        hash $remote_addr consistent;
{servers}
    }}
{blocks}
}}
"""

_SERVER_BLOCK = """
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
            proxy_next_upstream error timeout;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
"""


@dataclass
class Nginx:
    process: subprocess.Popen[bytes]
    round_robin_url: str
    affinity_url: str
    access_log: Path

    def routed(self) -> list[tuple[str, str, str, str]]:
        """The access log so far: (replica, Mcp-Method, Mcp-Name, status) per request."""
        lines = self.access_log.read_text().splitlines() if self.access_log.exists() else []
        return [tuple(line.split(" ", 3)) for line in lines]  # type: ignore[misc]


def config(replicas: Sequence[str], directory: Path, round_robin_port: int, affinity_port: int) -> str:
    servers = "\n".join(f"        server {replica} max_fails=1 fail_timeout=2s;" for replica in replicas)
    blocks = _SERVER_BLOCK.format(port=round_robin_port, upstream="round_robin") + _SERVER_BLOCK.format(
        port=affinity_port, upstream="affinity"
    )
    return _CONFIG.format(dir=directory, servers=servers, blocks=blocks)


@contextlib.contextmanager
def load_balancer(replicas: Sequence[str]) -> Iterator[Nginx]:
    """nginx in front of ``replicas`` (``host:port`` each), ready on entry, stopped on exit."""
    directory = Path(tempfile.mkdtemp(prefix="lineup-nginx-"))
    user = "nobody" if os.geteuid() == 0 else None
    round_robin_port, affinity_port = free_port(), free_port()
    conf = directory / "nginx.conf"
    conf.write_text(config(replicas, directory, round_robin_port, affinity_port))
    if user is not None:
        account = pwd.getpwnam(user)
        os.chown(directory, account.pw_uid, account.pw_gid)
    out = directory / "nginx.out"
    process = launch([NGINX, "-p", str(directory), "-c", str(conf), "-g", "daemon off;"], out, user=user)
    balancer = Nginx(
        process,
        f"http://127.0.0.1:{round_robin_port}",
        f"http://127.0.0.1:{affinity_port}",
        directory / "access.log",
    )
    try:
        try:
            wait_http(f"{balancer.round_robin_url}/healthz", 10, process, status=ANY_STATUS)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {out.read_text()}") from None
        yield balancer
    finally:
        stop(process, 10, signum=signal.SIGQUIT)  # graceful: finish the requests in flight
        shutil.rmtree(directory, ignore_errors=True)
