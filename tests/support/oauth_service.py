"""A ``serve`` on a database of its own that takes persons' tokens from a local OpenID issuer, for the
end-to-end tests of persons over MCP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from harness import processes
from harness.database import DatabaseFactory, with_database
from tests.conftest import ServiceProcess

SCOPE = "mcp:tools"


@contextlib.contextmanager
def service_for_issuer(
    database_factory: DatabaseFactory, logs: Path, issuer: str, **env: str
) -> Iterator[ServiceProcess]:
    """The service (ready) trusting ``issuer`` for ``SCOPE``, with ``env`` besides; stopped and its
    database dropped on the way out."""
    name = database_factory.create()
    process = ServiceProcess(
        with_database(database_factory.server, name),
        logs,
        MCP_OAUTH_ISSUER=issuer,
        MCP_OAUTH_SCOPES=SCOPE,
        **env,
    )
    try:
        processes.ServiceProcess.start(process)
        process.wait_http(f"{process.base_url}/healthz", 90.0)
        yield process
    finally:
        if process.process is not None:
            process.stop()
        database_factory.drop(name)
