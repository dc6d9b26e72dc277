"""The files served for the Web Host: a fixed catalogue read once, so no request names a path on disk."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
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
def catalogue(root: Path = STATIC_DIR) -> dict[str, Asset]:
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


def app_scopes() -> frozenset[str]:
    """The MiniApps that have a page (``apps/<scope>/index.html``)."""
    pages = (name.split("/") for name in catalogue())
    return frozenset(parts[1] for parts in pages if len(parts) == 3 and parts[::2] == ["apps", "index.html"])
