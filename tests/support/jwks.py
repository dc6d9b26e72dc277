"""A minimal issuer for unit tests of the resource server (service.mcp.oauth): a real HTTP server
on loopback publishing OpenID metadata and a JWKS, signing RS256 tokens with its own key — any
claim or header a test needs, which a full provider (tests/support/oidc.py) will not sign."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


@dataclass
class LocalIssuer:
    issuer: str = ""
    kid: str = "k1"
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    cache_control: str | None = None  # the JWKS answer's Cache-Control
    jwks_fetches: int = 0

    def jwks(self) -> dict[str, Any]:
        public = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def sign(self, claims: dict[str, Any], headers: dict[str, Any] | None = None) -> str:
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid, **(headers or {})})

    def rotate(self, kid: str) -> None:
        """A new key under a new kid; the old one is no longer published."""
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = kid


@contextlib.contextmanager
def local_issuer() -> Iterator[LocalIssuer]:
    state = LocalIssuer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers: dict[str, str] = {}
            if self.path == "/.well-known/openid-configuration":
                body: object = {"issuer": state.issuer, "jwks_uri": f"{state.issuer}/jwks"}
            elif self.path == "/jwks":
                state.jwks_fetches += 1
                body = state.jwks()
                if state.cache_control is not None:
                    headers["Cache-Control"] = state.cache_control
            else:
                self.send_error(404)
                return
            encoded = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(encoded)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
