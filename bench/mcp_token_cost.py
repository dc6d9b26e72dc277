"""CPU of checking a person's access token on ``/mcp`` (``service.mcp.oauth``), in-process.

    .venv/bin/python -m bench.mcp_token_cost [--tokens 2000]

An RS256 JWT access token as an authorization server issues it (a 2048-bit RSA key, the claims of
RFC 9068), checked by the service's ``ResourceServer``: the first use of each token (signature,
``iss``, ``aud``, ``exp``, scope) and each later use (the cache of verified tokens), beside the
Agent token's check (``TokenBook``). The issuer's metadata and JWKS are served by an in-memory
httpx transport: the figure is the service's CPU, not the network. Compare with a tool call's CPU
over MCP (``bench/mcp_cost.py``: 2,000-2,700 us in its latest runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from service.http import TokenBook
from service.mcp.oauth import ResourceServer
from service.settings import Settings

ISSUER = "https://id.example"
RESOURCE = "https://lineup.example/mcp"


async def main(tokens: int) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="k1", use="sig", alg="RS256")

    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(200, json={"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"})
        return httpx.Response(200, json={"keys": [jwk]})

    settings = Settings(mcp_oauth_issuer=ISSUER, mcp_resource_url=RESOURCE, mcp_oauth_scopes="mcp:tools")
    server = ResourceServer(settings, httpx.AsyncClient(transport=httpx.MockTransport(serve)))
    now = int(time.time())
    minted = [
        jwt.encode(
            {
                "iss": ISSUER,
                "sub": f"person-{n}",
                "aud": RESOURCE,
                "iat": now,
                "exp": now + 3600,
                "scope": "mcp:tools",
                "client_id": "c",
                "jti": str(uuid.uuid4()),
            },
            key,
            algorithm="RS256",
            headers={"kid": "k1", "typ": "at+jwt"},
        )
        for n in range(tokens)
    ]
    await server.authenticate(minted[0])  # fetches the metadata and the keys once

    started = time.process_time()
    for token in minted[1:]:
        await server.authenticate(token)
    first = (time.process_time() - started) / (tokens - 1)

    started = time.process_time()
    for _ in range(5):
        for token in minted:
            await server.authenticate(token)
    cached = (time.process_time() - started) / (5 * tokens)

    book = TokenBook({"agent": ["an-agent-token-of-the-tests-0123456789"]})
    started = time.process_time()
    for _ in range(5 * tokens):
        book.accepts("agent", "an-agent-token-of-the-tests-0123456789")
    agent = (time.process_time() - started) / (5 * tokens)
    await server.close()
    print(f"first use of a token (RS256 verify + claims): {first * 1e6:.1f} us CPU")
    print(f"later uses (cache of verified tokens):         {cached * 1e6:.1f} us CPU")
    print(f"the Agent token's check:                       {agent * 1e6:.1f} us CPU")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    asyncio.run(main(parser.parse_args().tokens))
