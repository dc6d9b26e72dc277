"""The relay's HTTP client against real sockets: keep-alive reuse, the shapes an answer can take
(chunked, long, interim, cut short, not HTTP), the failures' names, and what the request carries."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.processes import free_port
from relay.policy import AttemptResult
from relay.webhook_client import EXCERPT_BYTES, WebhookClient

NO_CONTENT = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"


@dataclass
class Server:
    """A raw HTTP/1.1 server: each request's head and body are kept, ``answer`` says what to write
    back (None: close the connection without a word)."""

    answer: Callable[[bytes], bytes | None] = lambda _head: NO_CONTENT
    heads: list[bytes] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    connections: int = 0
    port: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
                self.heads.append(head)
                self.arrived.set()
                self.bodies.append(await reader.readexactly(int(length[1]) if length else 0))
                answer = self.answer(head)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook?x=1"


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    serving = Server()
    listener = await asyncio.start_server(serving.handle, "127.0.0.1", 0)
    serving.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield serving


async def post(client: WebhookClient, body: bytes = b'{"a": 1}') -> tuple[AttemptResult, float]:
    ended: asyncio.Future[tuple[AttemptResult, float]] = asyncio.get_running_loop().create_future()
    client.post(b"x-test: 1\r\n", body, lambda result, seconds: ended.set_result((result, seconds)))
    return await ended


def client_for(url: str, timeout: float = 5.0) -> WebhookClient:
    return WebhookClient(url, timeout=timeout, limit=4, headers={"user-agent": "test/1"})


async def test_sequential_posts_share_one_connection(server: Server) -> None:
    client = client_for(server.url)
    for _ in range(5):
        result, _ = await post(client)
        assert (result.status_code, result.excerpt) == (204, None)
    await client.aclose()
    assert server.connections == 1 and len(server.heads) == 5


async def test_the_request_carries_its_target_host_headers_and_body_exactly(server: Server) -> None:
    client = client_for(server.url)
    await post(client, b'{"caf\xc3\xa9": 1}')
    await client.aclose()
    assert server.heads[0] == (
        b"POST /hook?x=1 HTTP/1.1\r\nhost: 127.0.0.1:%d\r\nuser-agent: test/1\r\n"
        b"content-length: 12\r\nx-test: 1\r\n\r\n" % server.port
    )
    assert server.bodies == [b'{"caf\xc3\xa9": 1}']


async def test_credentials_in_the_url_are_sent_as_basic_authorization(server: Server) -> None:
    client = client_for(f"http://agent:p%40ss@127.0.0.1:{server.port}/hook")
    await post(client)
    await client.aclose()
    expected = base64.b64encode(b"agent:p@ss")
    assert b"\r\nauthorization: Basic " + expected + b"\r\n" in server.heads[0]
    assert b"p%40ss" not in server.heads[0]


async def test_a_chunked_answer_gives_its_status_excerpt_and_retry_after(server: Server) -> None:
    server.answer = lambda _head: (
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nagent\r\n9\r\n overload\r\n0\r\n\r\n"
    )
    client = client_for(server.url)
    first, _ = await post(client)
    second, _ = await post(client)
    await client.aclose()
    assert (first.status_code, first.retry_after, first.excerpt) == (503, "7", "agent overload")
    assert second == first
    assert server.connections == 1


async def test_a_long_answer_is_cut_to_the_excerpt_and_the_next_post_still_goes(server: Server) -> None:
    body = b"x" * 100_000
    server.answer = lambda _head: b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)
    client = client_for(server.url)
    first, _ = await post(client)
    server.answer = lambda _head: NO_CONTENT
    second, _ = await post(client)
    await client.aclose()
    assert (first.status_code, first.excerpt) == (500, "x" * EXCERPT_BYTES)
    assert second.status_code == 204


async def test_an_interim_answer_is_followed_by_the_final_one(server: Server) -> None:
    server.answer = lambda _head: (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    )
    client = client_for(server.url)
    result, _ = await post(client)
    await client.aclose()
    assert (result.status_code, result.excerpt) == (200, "ok")


async def test_an_answer_that_closes_the_connection_is_not_reused(server: Server) -> None:
    server.answer = lambda _head: b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
    client = client_for(server.url)
    results = [await post(client) for _ in range(3)]
    await client.aclose()
    assert [r.status_code for r, _ in results] == [204, 204, 204]
    assert server.connections == 3


async def test_a_redirect_is_an_answer_not_followed(server: Server) -> None:
    server.answer = lambda _head: b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n"
    client = client_for(server.url)
    result, _ = await post(client)
    await client.aclose()
    assert result.status_code == 302 and len(server.heads) == 1


async def test_a_server_that_closes_without_answering_is_a_remote_protocol_error(server: Server) -> None:
    server.answer = lambda _head: None
    client = client_for(server.url)
    result, _ = await post(client)
    await client.aclose()
    assert (result.status_code, result.error_class) == (None, "RemoteProtocolError")


async def test_an_answer_that_is_not_http_is_a_remote_protocol_error(server: Server) -> None:
    server.answer = lambda _head: b"SSH-2.0-OpenSSH_9.6\r\n\r\n"
    client = client_for(server.url)
    result, _ = await post(client)
    await client.aclose()
    assert (result.status_code, result.error_class) == (None, "RemoteProtocolError")


async def test_a_closed_port_is_a_connect_error() -> None:
    client = client_for(f"http://127.0.0.1:{free_port()}/hook")
    result, _ = await post(client)
    await client.aclose()
    assert (result.status_code, result.error_class) == (None, "ConnectError")
    assert "cannot connect to 127.0.0.1" in result.error_message


async def test_no_answer_within_the_timeout_is_a_timeout_and_the_connection_is_dropped(
    server: Server,
) -> None:
    server.answer = lambda _head: b""  # says nothing, keeps the connection open
    client = client_for(server.url, timeout=0.3)
    started = time.monotonic()
    result, seconds = await post(client)
    assert (result.status_code, result.error_class) == (None, "Timeout")
    assert 0.25 <= seconds < 2.0 and time.monotonic() - started < 2.0
    server.answer = lambda _head: NO_CONTENT
    after, _ = await post(client)
    await client.aclose()
    assert after.status_code == 204 and server.connections == 2


async def test_aborting_ends_what_is_in_flight_as_relay_shutdown(server: Server) -> None:
    server.answer = lambda _head: b""
    client = client_for(server.url)
    pending = asyncio.ensure_future(post(client))
    await server.arrived.wait()
    client.abort("stopping")
    result, _ = await pending
    assert (result.error_class, result.error_message) == ("RelayShutdown", "stopping")
    late, _ = await post(client)
    assert late.error_class == "RelayShutdown"
    with contextlib.suppress(Exception):
        await client.aclose()


async def test_more_posts_than_connections_wait_for_a_free_one(server: Server) -> None:
    client = client_for(server.url)
    results = await asyncio.gather(*(post(client) for _ in range(20)))
    await client.aclose()
    assert [r.status_code for r, _ in results] == [204] * 20
    assert server.connections <= 4


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, signed by its own key, and that key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "relay-test")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


@contextlib.asynccontextmanager
async def tls_server(cert_file: Path, key_file: Path) -> AsyncIterator[Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    serving = Server()
    listener = await asyncio.start_server(serving.handle, "127.0.0.1", 0, ssl=context)
    serving.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield serving


async def test_an_https_endpoint_is_posted_to_over_tls_with_the_systems_trust_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    # OpenSSL's default verify paths honour SSL_CERT_FILE: how a deployment trusts a private CA.
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    async with tls_server(cert_file, key_file) as server:
        client = client_for(f"https://127.0.0.1:{server.port}/hook")
        for _ in range(3):
            result, _ = await post(client, b'{"tls": true}')
            assert (result.status_code, result.error_class) == (204, None)
        await client.aclose()
    assert server.connections == 1 and server.bodies == [b'{"tls": true}'] * 3
    assert server.heads[0].startswith(b"POST /hook HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n" % server.port)


async def test_an_https_endpoint_whose_certificate_is_not_trusted_is_a_connect_error(tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    async with tls_server(cert_file, key_file) as server:
        client = client_for(f"https://127.0.0.1:{server.port}/hook")
        result, _ = await post(client)
        await client.aclose()
    assert (result.status_code, result.error_class) == (None, "ConnectError")
    assert "certificate" in result.error_message.lower()
    assert server.heads == []
