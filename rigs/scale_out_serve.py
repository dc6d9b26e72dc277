"""``python -m rigs.scale_out_serve SHARED_PORT PRIVATE_PORT``: ``serve`` as ``python -m service serve``
runs it, but listening on a port any number of such processes share (``SO_REUSEPORT``: the kernel
spreads new connections over them) and on a port of its own (so a bench can aim at one process).

For ``rigs.scale_out``; the environment is the service's (``DATABASE_URL``, the tokens, …).
"""

from __future__ import annotations

import socket
import sys

import uvicorn

from service.app import create_app
from service.cli.serve import GracefulServer
from service.logging import configure_logging
from service.manifests import registry_of
from service.settings import load_settings


def listening(port: int, *, shared: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    return sock


def main(shared_port: int, private_port: int) -> None:
    configure_logging()
    settings = load_settings("serve")
    app = create_app(settings, registry_of(settings))
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=20,
    )
    sockets = [listening(shared_port, shared=True), listening(private_port, shared=False)]
    GracefulServer(config, app.state.stopping, app.state).run(sockets=sockets)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
