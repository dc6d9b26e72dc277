"""The Web Host's files (``static/``): the host page, the MiniApp pages and the SDK, in a fixed
catalogue (``service.assets``)."""

from __future__ import annotations

from pathlib import Path

from service import assets
from service.assets import Asset

STATIC_DIR = Path(__file__).resolve().parent / "static"


def catalogue() -> dict[str, Asset]:
    """Every servable file of the Web Host by its path under ``static/`` (``host/…``, ``apps/…``,
    ``sdk/…``)."""
    return assets.catalogue(STATIC_DIR)


def app_scopes() -> frozenset[str]:
    """The MiniApps that have a page (``apps/<scope>/index.html``)."""
    pages = (name.split("/") for name in catalogue())
    return frozenset(parts[1] for parts in pages if len(parts) == 3 and parts[::2] == ["apps", "index.html"])
