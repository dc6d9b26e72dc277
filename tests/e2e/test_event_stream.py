"""The Host's event stream: projection changes over SSE, from any replica, resumable.

Three replicas on a database of the module's own serve the tests that do not stop their service,
each in conversations of its own: the reader checks its streams' sessions every 0.5 s
(``SSE_SESSION_CHECK_SECONDS``), the writer with the default, and the direct one every 60 s (no
check helps it). A test that stops its service starts its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest

from harness.calls import interrupt_body, start_body
from harness.database import DatabaseFactory, with_database
from tests.conftest import AGENT, HOST, ServiceProcess

pytestmark = pytest.mark.e2e


@dataclass
class Replicas:
    reader: ServiceProcess  # SSE_SESSION_CHECK_SECONDS=0.5
    writer: ServiceProcess
    direct: ServiceProcess  # SSE_SESSION_CHECK_SECONDS=60
    database_url: str


@pytest.fixture(scope="module")
def replicas(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    """The replicas start at once (each on a port of its own), and go at the end with their
    database, even when one failed to start."""
    logs = tmp_path_factory.mktemp("event-stream")
    name = database_factory.create()
    url = with_database(database_factory.server, name)
    started: list[ServiceProcess] = []
    for env in ({"SSE_SESSION_CHECK_SECONDS": "0.5"}, {}, {"SSE_SESSION_CHECK_SECONDS": "60"}):
        process = ServiceProcess(url, logs, **env)
        while process.port in {other.port for other in started}:
            process = ServiceProcess(url, logs, **env)
        started.append(process)
    try:
        with ThreadPoolExecutor(len(started)) as pool:
            for starting in [pool.submit(process.start) for process in started]:
                starting.result()
        reader, writer, direct = started
        yield Replicas(reader, writer, direct, url)
    finally:
        running = [
            process for process in started if process.process is not None and process.process.poll() is None
        ]
        with ThreadPoolExecutor(len(started)) as pool:
            list(pool.map(lambda process: process.stop(), running))
        database_factory.drop(name)


async def events(
    client: httpx.AsyncClient, conversation_id: str, headers: dict[str, str] | None = None
) -> AsyncIterator[dict[str, Any]]:
    async with client.stream(
        "GET", f"/v1/host/conversations/{conversation_id}/events", headers={**HOST, **(headers or {})}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event: dict[str, Any] = {}
        async for line in response.aiter_lines():
            if line == "":
                if "data" in event:
                    yield event
                event = {}
            elif line.startswith("id:"):
                event["id"] = int(line[3:].strip())
            elif line.startswith("event:"):
                event["event"] = line[6:].strip()
            elif line.startswith("data:"):
                event["data"] = json.loads(line[5:].strip())


async def collect(
    stream: AsyncIterator[dict[str, Any]], count: int, seconds: float = 10.0
) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []

    async def take() -> None:
        async for item in stream:
            got.append(item)
            if len(got) >= count:
                return

    await asyncio.wait_for(take(), seconds)
    return got


async def test_stream_pushes_operation_and_workspace_changes_and_resumes_from_last_event_id(
    replicas: Replicas,
) -> None:
    service = replicas.writer
    async with httpx.AsyncClient(base_url=service.base_url, timeout=20) as client:
        stream = events(client, "conv-sse")
        opened = asyncio.ensure_future(collect(stream, 4))
        await asyncio.sleep(0.3)  # let the stream subscribe
        started = (await client.post("/v1/tool-calls", json=start_body("conv-sse"), headers=AGENT)).json()
        await client.post("/v1/tool-calls", json=interrupt_body("conv-sse"), headers=AGENT)
        received = await opened
        kinds = [(e["event"], e["data"].get("state")) for e in received]
        assert kinds == [
            ("operation", "focusing"),
            ("workspace", None),
            ("operation", "interrupted"),
            ("workspace", None),
        ]
        assert received[0]["data"]["operation_id"] == started["operation"]["operation_id"]
        assert received[1]["data"]["foreground_instance_id"] == started["instance_id"]
        assert received[3]["data"]["foreground_instance_id"] is None
        ids = [e["id"] for e in received]
        assert ids == sorted(ids)

        resumed = await collect(events(client, "conv-sse", {"Last-Event-ID": str(ids[1])}), 2)
        assert [e["id"] for e in resumed] == ids[2:]


async def test_a_change_committed_through_one_replica_is_pushed_by_another(replicas: Replicas) -> None:
    reader, writer = replicas.reader, replicas.writer
    async with (
        httpx.AsyncClient(base_url=reader.base_url, timeout=20) as reading,
        httpx.AsyncClient(base_url=writer.base_url, timeout=20) as writing,
    ):
        waiting = asyncio.ensure_future(collect(events(reading, "conv-x"), 1))
        await asyncio.sleep(0.3)
        posted = await writing.post(
            "/v1/host/conversations/conv-x/messages", json={"role": "user", "text": "hello"}, headers=HOST
        )
        [message] = await waiting
        assert message["event"] == "message"
        assert message["data"]["message_id"] == posted.json()["message_id"]


async def test_stream_refuses_a_missing_token(replicas: Replicas) -> None:
    service = replicas.writer
    async with httpx.AsyncClient(base_url=service.base_url) as client:
        response = await client.get("/v1/host/conversations/c/events")
        assert response.status_code == 401


async def test_sigterm_ends_open_streams_promptly_and_exits_0(service_process: Any) -> None:
    service = service_process()
    async with httpx.AsyncClient(base_url=service.base_url, timeout=20) as client:
        streaming = asyncio.ensure_future(collect(events(client, "conv-t"), 1, seconds=15))
        await asyncio.sleep(0.3)
        loop = asyncio.get_running_loop()
        began = loop.time()
        code = await loop.run_in_executor(None, service.stop)
        assert code == 0
        assert loop.time() - began < 10  # the stream did not hold shutdown for the drain timeout
        assert await streaming == []  # the server ended the stream cleanly


async def mint_session(client: httpx.AsyncClient, conversation_id: str) -> dict[str, Any]:
    response = await client.post(
        "/v1/host/sessions", json={"subject": "a person", "conversation_ids": [conversation_id]}, headers=HOST
    )
    assert response.status_code == 201, response.text
    session: dict[str, Any] = response.json()
    return session


async def everything(stream: AsyncIterator[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    """Every event until the server ends the stream (a TimeoutError if it does not in time)."""
    got: list[dict[str, Any]] = []

    async def take() -> None:
        async for item in stream:
            got.append(item)

    await asyncio.wait_for(take(), seconds)
    return got


async def test_a_session_ended_on_one_replica_ends_its_stream_on_another_within_the_bound(
    replicas: Replicas,
) -> None:
    # Every SSE_SESSION_CHECK_SECONDS the reader asks the database which of its streams' sessions
    # are still open: a revocation through the other replica ends the stream within that bound.
    reader, writer = replicas.reader, replicas.writer
    async with (
        httpx.AsyncClient(base_url=reader.base_url, timeout=20) as reading,
        httpx.AsyncClient(base_url=writer.base_url, timeout=20) as writing,
    ):
        session = await mint_session(writing, "conv-revoked")
        person = {"Authorization": f"Bearer {session['session']}"}
        streaming = asyncio.ensure_future(everything(events(reading, "conv-revoked", person), 10))
        await asyncio.sleep(0.5)
        before = await writing.post(
            "/v1/host/conversations/conv-revoked/messages",
            json={"role": "agent", "text": "before"},
            headers=HOST,
        )
        await asyncio.sleep(0.3)
        loop = asyncio.get_running_loop()
        revoked_at = loop.time()
        assert (
            await writing.delete(f"/v1/host/sessions/{session['session_id']}", headers=HOST)
        ).status_code == 204
        received = await streaming
        assert loop.time() - revoked_at < 0.5 + 1.0  # the bound, and a second for the round trips
        await writing.post(
            "/v1/host/conversations/conv-revoked/messages",
            json={"role": "agent", "text": "after"},
            headers=HOST,
        )
        assert [e["event"] for e in received] == ["message", "session_ended"]
        assert received[0]["data"]["message_id"] == before.json()["message_id"]
        assert received[1]["data"] == {"reason": "ended"}
        again = await reading.get("/v1/host/conversations/conv-revoked/events", headers=person)
        assert again.status_code == 401


async def test_a_stream_ends_at_once_where_its_session_is_revoked_and_at_its_expiry(
    replicas: Replicas,
) -> None:
    service = replicas.direct  # SSE_SESSION_CHECK_SECONDS=60: no check helps, both are direct
    async with httpx.AsyncClient(base_url=service.base_url, timeout=20) as client:
        revoked = await mint_session(client, "conv-direct")
        person = {"Authorization": f"Bearer {revoked['session']}"}
        streaming = asyncio.ensure_future(everything(events(client, "conv-direct", person), 5))
        await asyncio.sleep(0.5)
        await client.delete(f"/v1/host/sessions/{revoked['session_id']}", headers=HOST)
        assert [e["data"] for e in await streaming] == [{"reason": "revoked"}]

        expiring = await mint_session(client, "conv-expiring")
        with psycopg.connect(replicas.database_url, autocommit=True) as db:
            db.execute(
                "UPDATE host_sessions SET expires_at = now() + interval '2 seconds' WHERE session_id = %s",
                [expiring["session_id"]],
            )
        person = {"Authorization": f"Bearer {expiring['session']}"}
        loop = asyncio.get_running_loop()
        opened_at = loop.time()
        ended = await everything(events(client, "conv-expiring", person), 6)
        assert [e["data"] for e in ended] == [{"reason": "expired"}]
        assert 1.0 < loop.time() - opened_at < 4.0
