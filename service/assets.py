"""Static files served from a fixed catalogue read once, so no request names a path on disk: the
Web Host's (``web_host/static/``) and the operator console's (``service/console/static/``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

MEDIA_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


@cache
def catalogue(root: Path) -> dict[str, Asset]:
    """Every servable file under ``root`` by its ``/``-separated relative path."""
    assets: dict[str, Asset] = {}
    for path in sorted(root.rglob("*")):
        media_type = MEDIA_TYPES.get(path.suffix)
        if media_type is None or not path.is_file():
            continue
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        assets[path.relative_to(root).as_posix()] = Asset(body, media_type, etag)
    return assets
