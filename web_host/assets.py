"""The Web Host's files (``static/``): the host page, its sign-in page and the SDK. The service
serves them from a fixed catalogue of this folder (``service.assets``, ``service.api.web``), and
each MiniApp's page from the app's own folder (``service/apps/<app>/surface/``); this package knows
of no app and imports nothing of the service."""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
