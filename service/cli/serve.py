"""``python -m service serve``: settings and manifests are checked before the port opens."""

from __future__ import annotations

import sys

import uvicorn

from service.api.app import create_app
from service.logging import configure_logging
from service.manifests import ManifestError, load_registry
from service.settings import load_settings


def run(host: str, port: int, *, sweeper: bool = True) -> int:
    configure_logging()
    settings = load_settings("serve")
    try:
        registry = load_registry(settings.manifests_dir)
    except ManifestError as exc:
        print(f"error: bad manifest: {exc}", file=sys.stderr)
        return 2
    app = create_app(settings, registry, sweeper=sweeper)
    uvicorn.run(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=20,
    )
    return 0
