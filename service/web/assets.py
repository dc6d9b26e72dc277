"""Static files answered from a catalogue (``service.assets``): the Web Host's and the operator
console's. Only a catalogued file of a kind a page loads, revalidated by its ETag."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from litestar import Request, Response

from service.assets import Asset
from service.domain.errors import not_found

ASSET_SUFFIXES = (".js", ".css", ".svg", ".png")


def asset_headers(etag: str) -> dict[str, str]:
    return {
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
        "ETag": etag,
    }


def asset_response(
    request: Request[Any, Any, Any], assets: Mapping[str, Asset], name: str
) -> Response[bytes]:
    """The file ``name`` of ``assets``, or 304 when the browser holds it already; 404 otherwise."""
    asset: Asset | None = assets.get(name) if name.endswith(ASSET_SUFFIXES) else None
    if asset is None:
        raise not_found("file")
    if request.headers.get("if-none-match") == asset.etag:
        return Response(b"", status_code=304, headers=asset_headers(asset.etag))
    return Response(asset.body, media_type=asset.media_type, headers=asset_headers(asset.etag))
