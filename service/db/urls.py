"""``DATABASE_URL`` in the forms each client takes, one host or several.

A highly available Postgres is reached through a URL naming every node, as libpq takes it:
``postgresql://user@h1:5432,h2:5432/db?target_session_attrs=read-write``. libpq (so psycopg) tries
the hosts in order and keeps the first that accepts writes. A multi-host URL that does not say
which session it wants gets ``target_session_attrs=read-write`` (every process here writes, and a
standby would refuse each write) and ``connect_timeout=3`` (a node that does not answer at all must
not hold up the walk to the next one). SQLAlchemy (Alembic) cannot parse a comma-separated host list, so
the migrations get the same hosts as repeated ``host=`` query parameters, which its psycopg dialect
turns back into libpq's lists. A single-host URL is passed on as written (only the scheme is
normalised), with the connection defaults its caller gives (``Settings.connection_parameters``:
TCP keepalives, ``tcp_user_timeout`` and ``connect_timeout``) for those it does not name.

The connection defaults are libpq's own parameters, read by the client and never sent to the server,
so a pooler in between (PgBouncer, which refuses a startup parameter it does not know) never sees
them: they bound how long a process waits on a connection whose peer has vanished (a partition
leaves it half-open) — a statement sent and never acknowledged (``tcp_user_timeout``), a connection
silent for too long (keepalives) — and how long one connect may take (``connect_timeout``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
# What a multi-host URL gets unless it says otherwise: the writable host, and a node that does not
# answer at all (powered off, partitioned) given up after 3 s so that the next host is tried.
MULTI_HOST_DEFAULTS = (("target_session_attrs", "read-write"), ("connect_timeout", "3"))


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    userinfo: str  # as written, percent-encoded; "" when absent
    hosts: tuple[str, ...]  # "host" or "host:port", as written ("[::1]:5432" for IPv6)
    path: str  # "/dbname" or ""
    query: str  # as written, without the "?"

    @property
    def multi_host(self) -> bool:
        return len(self.hosts) > 1

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(pair.partition("=")[0] for pair in self.query.split("&") if pair)


def parse(url: str) -> DatabaseUrl:
    """Split a ``postgresql://`` URL; ``ValueError`` naming what is wrong."""
    scheme = next((s for s in SCHEMES if url.startswith(s)), None)
    if scheme is None:
        raise ValueError("must be a postgresql:// URL")
    rest, _, fragment = url[len(scheme) :].partition("#")
    if fragment:
        raise ValueError("must not have a #fragment")
    rest, _, query = rest.partition("?")
    if any("=" not in pair for pair in query.split("&") if pair):
        raise ValueError("has a query string that is not name=value pairs")
    netloc, slash, database = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    hosts = tuple(hostlist.split(",")) if hostlist else ()
    for host in hosts:
        _check_host(host)
    return DatabaseUrl(userinfo if at else "", hosts, slash + database, query)


def password(url: str) -> str | None:
    """The password a URL carries, decoded; None when it has none (or the URL is not one)."""
    try:
        userinfo = parse(url).userinfo
    except ValueError:
        return None
    _, colon, secret = userinfo.partition(":")
    return unquote(secret) if colon else None


def _check_host(host: str) -> None:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise ValueError(f"host {host!r} has no closing ]")
        name, after = host[1:end], host[end + 1 :]
        if after and not after.startswith(":"):
            raise ValueError(f"host {host!r} is not [address]:port")
        port = after[1:]
    else:
        name, _, port = host.partition(":")
    if not name:
        raise ValueError("names an empty host (two commas, or a comma at an end)")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"host {host!r} has an invalid port")


def psycopg_url(url: str, defaults: Iterable[tuple[str, str]] = ()) -> str:
    """The URL psycopg takes: ``postgresql://``; several hosts default to the writable one; each
    of ``defaults`` (name, value) added unless the URL names it."""
    parsed = parse(url)
    wanted = [*defaults, *(MULTI_HOST_DEFAULTS if parsed.multi_host else ())]
    named = set(parsed.parameters)
    added = []
    for name, value in wanted:
        if name not in named:
            named.add(name)
            added.append(f"{name}={quote(value, safe='')}")
    query = "&".join(filter(None, (parsed.query, *added)))
    return _build("postgresql://", parsed.userinfo, ",".join(parsed.hosts), parsed.path, query)


def sqlalchemy_url(url: str) -> str:
    """The URL SQLAlchemy's psycopg dialect takes: several hosts become ``?host=h:p&host=…``."""
    parsed = parse(psycopg_url(url))
    if not parsed.multi_host:
        return _build(
            "postgresql+psycopg://", parsed.userinfo, ",".join(parsed.hosts), parsed.path, parsed.query
        )
    hosts = "&".join("host=" + quote(host, safe=":") for host in parsed.hosts)
    return _build("postgresql+psycopg://", parsed.userinfo, "", parsed.path, f"{hosts}&{parsed.query}")


def _build(scheme: str, userinfo: str, hosts: str, path: str, query: str) -> str:
    netloc = f"{userinfo}@{hosts}" if userinfo else hosts
    if not query:
        return f"{scheme}{netloc}{path}"
    return f"{scheme}{netloc}{path or '/'}?{query}"
