"""The official MCP conformance suite against a stack of ours: every server scenario, two releases.

```
.venv/bin/python -m rigs.mcp_conformance [--suite VERSION ...] [--scenario NAME ...] [--keep]
```

The suite is the npm package ``@modelcontextprotocol/conformance`` at the versions pinned in
``SUITES`` (a stable one and the current prerelease, which also knows the 2026-07-28 revision). It
needs Node 22 (Debian's Node 20 fails on ``fs.globSync``), so each version is installed with the
npm package ``node@22`` beside it, into ``.cache/mcp-conformance/<version>/`` (git-ignored; kept
between runs, installed again only when the pin changes), and run with that ``node``.

The stack: a fresh database of the server ``DATABASE_URL`` names (default the local one),
``migrate``, one ``python -m service serve``, both with the shipped apps and one test-only app,
``tests/fixtures/conformance_app/`` (``APP_FOLDERS``; no other process loads it): the suite's
fixture tools that the engine can truly serve, built on the Runtime API like any app —
``slow_compute`` an operation with its deadline in Postgres (so a task), ``test_simple_text`` and
``json_schema_2020_12_tool`` direct answers, ``test_error_handling`` a refusal,
``test_tool_with_progress`` a two-second operation its MCP call waits for, with progress; the
resources ``test://static-text`` and ``test://static-binary`` files of its folder; the content
fixtures (``test_image_content``, ``test_audio_content``, ``test_embedded_resource``,
``test_multiple_content_types``, and ``greet``'s exact text) answers whose MCP content their
registration gives, ``test_custom_headers`` a tool whose arguments ride as SEP-2243 ``Mcp-Param-*``
headers. The suite cannot send credentials, so a loopback proxy in front of ``/mcp``
(``CredentialsProxy``) adds what our own Agent sends: its bearer token on every request, and on
``tools/call`` the conversation, ``params._meta["io.lineup/conversation_id"]``. Every tool of an app
is named under its app's scope (``conformance.slow-compute``, listed ``conformance_slow-compute``),
which the suite's bare names (``slow_compute``) can never be; so the proxy also translates the
fixture app's names, and only them: the suite's name to the listed one in a ``tools/call`` (its body
and its ``Mcp-Name`` header), the listed one to the suite's in a ``tools/list`` answer
(``fixture_names``). It forwards everything else as it came (the ``Host`` and ``Origin`` headers
included, for the DNS rebinding scenario) and streams the answers back. The product has no switch
that turns its checks off.

Every server scenario of each version runs (``--suite all``), one process per scenario; a scenario
passes when none of its checks is a ``FAILURE``. A failing scenario must be listed, with its
reason, in ``rigs/mcp_conformance_not_applicable.json`` — under ``not_applicable`` (it needs what
this server deliberately lacks — prompts, resource templates, capabilities it does not declare — or
what the engine cannot do by design, such as a task that fails, or SEP-2322's ephemeral input
rounds; the reason says which) or under ``pending`` (a defect of ours being fixed elsewhere, named
by its issue). Exits 1 when a scenario fails that neither list
names, and names the listed ones that now pass (the list must then shrink).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from harness.database import named_server, throwaway_database
from harness.processes import ROOT, free_port, running_service
from service.tool_names import listed_name

#: The suite's versions, each with the Node it runs on (from npm: Debian's Node is 20).
SUITES = ("0.1.16", "0.2.0-alpha.12")
NODE = "node@22.23.3"
PACKAGE = "@modelcontextprotocol/conformance"
CACHE = ROOT / ".cache" / "mcp-conformance"
LISTS = Path(__file__).with_name("mcp_conformance_not_applicable.json")
CONVERSATION_ID = "io.lineup/conversation_id"
#: The test-only app of the suite's fixture tools (served by this rig only, through APP_FOLDERS).
FIXTURE_APP = ROOT / "tests" / "fixtures" / "conformance_app"
MCP_NAME = "mcp-name"
#: One scenario's limit (the suite's own per-scenario timeout is 30 s where it has one).
SCENARIO_SECONDS = 120

# Hop-by-hop and framing headers the proxy leaves to each side's HTTP library.
_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "trailer", "upgrade"}
)


def install(version: str) -> Path:
    """``node@22`` and the suite at ``version`` under the cache (once); its folder."""
    folder = CACHE / version
    marker = folder / ".installed"
    wanted = f"{NODE} {PACKAGE}@{version}"
    if marker.exists() and marker.read_text() == wanted:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "package.json").write_text('{"private": true}\n')
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is missing: apt-get install npm (any Node; the suite runs on node@22 from npm)")
    print(f"installing {wanted} into {folder}", flush=True)
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", NODE, f"{PACKAGE}@{version}"],
        cwd=folder,
        check=True,
    )
    marker.write_text(wanted)
    return folder


def _bin(folder: Path, name: str) -> str:
    return str(folder / "node_modules" / ".bin" / name)


def suite_command(folder: Path, *args: str) -> list[str]:
    """The suite's CLI run by the Node 22 installed beside it."""
    cli = folder / "node_modules" / PACKAGE / "dist" / "index.js"
    return [_bin(folder, "node"), str(cli), *args]


def server_scenarios(folder: Path) -> list[str]:
    """Every server scenario this version of the suite lists."""
    listed = subprocess.run(
        suite_command(folder, "list", "--server"), check=True, capture_output=True, text=True
    ).stdout
    return [
        line.strip().removeprefix("- ").split(" ")[0]
        for line in listed.splitlines()
        if line.strip().startswith("- ")
    ]


def fixture_names(folder: Path = FIXTURE_APP) -> dict[str, str]:
    """The fixture app's tools: the suite's name (``slow_compute``) -> the listed one
    (``conformance_slow-compute``). A tool ``<scope>.<name>`` of the app serves the suite's tool
    ``<name>`` with each ``-`` an ``_`` (a manifest's names take no ``_``)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    names = {}
    for tool in manifest["tools"]:
        scope, name = tool["name"].split(".", 1)
        assert scope == manifest["app_scope"], tool["name"]
        names[name.replace("-", "_")] = listed_name(tool["name"])
    return names


class CredentialsProxy:
    """A loopback HTTP proxy in front of the service: the Agent's bearer token on every request, the
    conversation in ``params._meta`` of every ``tools/call``, and the fixture app's tools under the
    suite's names (``names``: the suite's -> the listed one); the rest forwarded as it came."""

    def __init__(
        self, upstream: str, token: str, conversation_id: str, names: dict[str, str] | None = None
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.token = token
        self.conversation_id = conversation_id
        self.names = dict(names or {})
        self.suite_names = {listed: suite for suite, listed in self.names.items()}
        self.port = free_port()
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _bound(self, message: Any) -> Any:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.setdefault("params", {})
            if isinstance(params, dict):
                meta = params.setdefault("_meta", {})
                if isinstance(meta, dict):
                    meta.setdefault(CONVERSATION_ID, self.conversation_id)
                name = params.get("name")
                if isinstance(name, str) and name in self.names:
                    params["name"] = self.names[name]
        return message

    def header(self, name: str, value: str) -> str:
        """A request header as forwarded: ``Mcp-Name`` (a tool call's tool name) translated as the
        body's name is; every other header as it came."""
        if name.lower() == MCP_NAME:
            return self.names.get(value, value)
        return value

    def listing(self, body: bytes) -> bytes:
        """A ``tools/list`` answer (one JSON body) with the fixture app's tools under the suite's
        names; anything else as it came."""
        try:
            message = json.loads(body)
        except ValueError:
            return body
        tools = message.get("result", {}).get("tools") if isinstance(message, dict) else None
        if not isinstance(tools, list):
            return body
        for tool in tools:
            if isinstance(tool, dict) and tool.get("name") in self.suite_names:
                tool["name"] = self.suite_names[tool["name"]]
        return json.dumps(message).encode()

    def rewritten(self, body: bytes) -> bytes:
        try:
            message = json.loads(body)
        except ValueError:
            return body  # not JSON: the service answers it as it would anyone
        if isinstance(message, list):
            return json.dumps([self._bound(item) for item in message]).encode()
        return json.dumps(self._bound(message)).encode()

    async def forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        lists_tools = False
        if request.method == "POST" and body:
            lists_tools = _method(body) == "tools/list"
            body = self.rewritten(body)
        headers = {k: self.header(k, v) for k, v in request.headers.items() if k.lower() not in _HOP}
        headers["Authorization"] = f"Bearer {self.token}"
        async with self._session.request(
            request.method,
            self.upstream + request.rel_url.path_qs,
            headers=headers,
            data=body if body else None,
            allow_redirects=False,
        ) as answer:
            if lists_tools and answer.content_type == "application/json":
                listing = self.listing(await answer.read())
                replaced = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
                return web.Response(status=answer.status, body=listing, headers=replaced)
            response = web.StreamResponse(status=answer.status, reason=answer.reason)
            for name, value in answer.headers.items():
                if name.lower() not in _HOP:
                    response.headers.add(name, value)
            await response.prepare(request)
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientPayloadError):
                async for chunk in answer.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
            return response

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CredentialsProxy]:
        self._session = aiohttp.ClientSession(
            auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)
        )
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        try:
            yield self
        finally:
            await runner.cleanup()
            await self._session.close()


def _method(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("method") if isinstance(message, dict) else None


@dataclass
class Outcome:
    version: str
    scenario: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [check for check in self.checks if check.get("status") == "FAILURE"]

    @property
    def passed(self) -> bool:
        return not self.error and bool(self.checks) and not self.failures

    def why(self) -> str:
        if self.error:
            return self.error
        return "; ".join(
            f"{check.get('id')}: {check.get('errorMessage', '')}"[:200] for check in self.failures[:3]
        )


async def run_scenario(folder: Path, version: str, scenario: str, url: str, out: Path) -> Outcome:
    """One scenario in a process of its own; its checks read from the results it saved."""
    outcome = Outcome(version, scenario)
    where = out / version / scenario
    where.mkdir(parents=True, exist_ok=True)
    command = suite_command(
        folder, "server", "--url", url, "--scenario", scenario, "--suite", "all", "-o", str(where)
    )
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), SCENARIO_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        outcome.error = f"no end within {SCENARIO_SECONDS} s"
        return outcome
    (where / "output.txt").write_bytes(output)
    for found in sorted(where.rglob("checks.json")):
        outcome.checks += json.loads(found.read_text())
    if not outcome.checks:
        tail = output.decode(errors="replace")[-300:]
        outcome.error = f"no checks saved (exit {process.returncode}): {tail}"
    return outcome


def listed() -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """The checked-in lists: per suite version, scenario -> reason (not applicable; pending a fix)."""
    lists = json.loads(LISTS.read_text())
    return lists["not_applicable"], lists["pending"]


def judge(outcomes: list[Outcome]) -> list[str]:
    """The failures no list names, and the listed scenarios that now pass."""
    not_applicable, pending = listed()
    problems = []
    for outcome in outcomes:
        excused = {
            **not_applicable.get(outcome.version, {}),
            **pending.get(outcome.version, {}),
        }
        if not outcome.passed and outcome.scenario not in excused:
            problems.append(f"{outcome.version} {outcome.scenario} failed: {outcome.why()}")
        if outcome.passed and outcome.scenario in excused:
            problems.append(f"{outcome.version} {outcome.scenario} passes: take it off the list")
    return problems


@contextlib.contextmanager
def results_dir(keep: bool) -> Iterator[Path]:
    if keep:
        path = Path(tempfile.mkdtemp(prefix="rig-mcp-conformance-"))
        print(f"results kept in {path}")
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="rig-mcp-conformance-") as tmp:
            yield Path(tmp)


async def run_all(
    suites: dict[str, tuple[Path, list[str]]], proxies: dict[str, CredentialsProxy], out: Path
) -> list[Outcome]:
    outcomes = []
    for version, (folder, scenarios) in suites.items():
        proxy = proxies[version]
        async with proxy.running():
            began = time.monotonic()
            for scenario in scenarios:
                outcome = await run_scenario(folder, version, scenario, f"{proxy.url}/mcp", out)
                mark = "pass" if outcome.passed else "FAIL"
                print(f"  {version:16} {mark}  {scenario}", flush=True)
                outcomes.append(outcome)
            print(f"{version}: {len(scenarios)} scenarios in {time.monotonic() - began:.0f} s", flush=True)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--suite", action="append", choices=SUITES, help="a version (default: all)")
    parser.add_argument("--scenario", action="append", help="only this scenario (default: every one)")
    parser.add_argument("--keep", action="store_true", help="keep the suite's results")
    args = parser.parse_args(argv)
    suites = {}
    for version in args.suite or SUITES:
        folder = install(version)
        scenarios = server_scenarios(folder)
        if args.scenario:
            scenarios = [name for name in scenarios if name in args.scenario]
        suites[version] = (folder, scenarios)
    token = "rig-agent-" + secrets.token_hex(16)
    # A proxy and a conversation per suite version: the suite's calls never meet another run's.
    # Their ports are known before the service starts, so that it allows their origins: the
    # suite's DNS-rebinding scenario wants its own origin served and any other refused.
    names = fixture_names()
    proxies = {
        version: CredentialsProxy("", token, f"conformance-{secrets.token_hex(6)}", names)
        for version in suites
    }
    origins = " ".join(f"{proxy.url},http://localhost:{proxy.port}" for proxy in proxies.values())
    print(f"database server: {named_server()}")
    print(f"fixture tools ({FIXTURE_APP.relative_to(ROOT)}): {', '.join(sorted(names))}")
    # migrate (Settings from the environment) and serve, both with the fixture app.
    os.environ["APP_FOLDERS"] = str(FIXTURE_APP)
    with (
        results_dir(args.keep) as out,
        throwaway_database("mcp_conformance") as url,
        running_service(
            url,
            out,
            env={"AGENT_TOKEN": token, "MCP_ALLOWED_ORIGINS": origins, "APP_FOLDERS": str(FIXTURE_APP)},
        ) as service,
    ):
        for proxy in proxies.values():
            proxy.upstream = service.base_url
        outcomes = asyncio.run(run_all(suites, proxies, out))
    problems = judge(outcomes)
    not_applicable, pending = listed()
    print()
    for version in suites:
        mine = [outcome for outcome in outcomes if outcome.version == version]
        passed = sum(outcome.passed for outcome in mine)
        failed = [outcome for outcome in mine if not outcome.passed]
        na = sum(outcome.scenario in not_applicable.get(version, {}) for outcome in failed)
        waiting = sum(outcome.scenario in pending.get(version, {}) for outcome in failed)
        print(
            f"{version}: {len(mine)} scenarios, {passed} passed, {len(failed)} failed "
            f"({na} not applicable, {waiting} pending a fix, {len(failed) - na - waiting} unexpected)"
        )
    if problems:
        print(f"FAILED: {len(problems)}", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print("every scenario passed or is listed with its reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
