"""The Web Host's files (``static/``): the host page, the MiniApp pages and the SDK. The service
serves them from a fixed catalogue of this folder (``service.assets``, ``service.api.web``); this
package imports nothing of the service."""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"


def app_scopes() -> frozenset[str]:
    """The MiniApps that have a page (``apps/<scope>/index.html``)."""
    return frozenset(page.parent.name for page in STATIC_DIR.glob("apps/*/index.html"))
