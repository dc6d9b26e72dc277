"""The ``Host`` names the token-less endpoints answer to (a guard against DNS rebinding).

``/metrics``, ``/healthz``, ``/readyz`` and the sign-in pages of ``/host/`` and ``/ops/`` answer
without a bearer token (``/metrics`` to peers on a private network). A page on another site whose
name an attacker points at ``127.0.0.1`` (DNS rebinding) would reach them from an operator's
browser as same-origin, with ``Host: <the attacker's name>``; such a request is refused with
``421 misdirected_request`` before the handler runs.

A name is allowed when it is:
- the host of ``PUBLIC_ORIGIN``, or one of ``ALLOWED_HOSTS`` (names separated by spaces or commas;
  ``*.example.com`` allows every name under ``example.com``; ``*`` alone allows every name);
- ``localhost`` or a name under ``.localhost`` (browsers resolve these to loopback themselves);
- an IP literal (``10.1.2.3``, ``[::1]``): a browser sends one only for a URL that names that
  address, which DNS cannot rebind. So Kubernetes probes (``Host: <pod IP>:<port>``), the image's
  ``HEALTHCHECK`` (``127.0.0.1``) and a scraper addressing a replica by its IP keep working;
- absent (no browser sends a request without ``Host``).

The port is not compared: a rebinding page sits on the service's own port anyway.
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from service.domain.errors import Misdirected


def host_name(header: str) -> str:
    """The name of a ``Host`` header's value, without its port, lowered and without a final dot;
    an IPv6 literal without its brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        literal, bracket, _ = value[1:].partition("]")
        return literal if bracket else ""
    name, colon, port = value.rpartition(":")
    if colon and port.isdigit() and ":" not in name:
        value = name
    return value.rstrip(".")


def _is_ip_literal(name: str) -> bool:
    try:
        ip_address(name)
    except ValueError:
        return False
    return True


class HostAllowList:
    """The names (and ``*.`` suffixes) allowed in ``Host`` on the token-less endpoints."""

    def __init__(self, names: Iterable[str]) -> None:
        cleaned = {host_name(name) for name in names if name.strip()}
        self.any = "*" in cleaned
        self.exact = frozenset(name for name in cleaned if not name.startswith("*."))
        self.suffixes = tuple(name[1:] for name in cleaned if name.startswith("*."))

    @classmethod
    def of(cls, public_origin: str | None, allowed_hosts: Iterable[str]) -> HostAllowList:
        names = list(allowed_hosts)
        if public_origin:
            names.append(urlsplit(public_origin).hostname or "")
        return cls(names)

    def allows(self, header: str | None) -> bool:
        if header is None or self.any:
            return True
        name = host_name(header)
        if not name:
            return False
        if name in self.exact or name == "localhost" or name.endswith(".localhost"):
            return True
        if any(name.endswith(suffix) for suffix in self.suffixes):
            return True
        return _is_ip_literal(name)


def _host_header(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    for name, value in connection.scope["headers"]:
        if name.lower() == b"host":
            return value.decode("latin-1")
    return None


def allowed_host(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """A Litestar guard: refuse a token-less endpoint's request whose ``Host`` is not allowed."""
    allow_list: HostAllowList = connection.app.state.allowed_hosts
    header = _host_header(connection)
    if not allow_list.allows(header):
        raise Misdirected(
            "this service does not answer to that Host name here: it answers to its PUBLIC_ORIGIN's"
            " host, ALLOWED_HOSTS, localhost and IP addresses"
        )
