"""The network-faults rig (``make netfaults``): Postgres, two service replicas, two relays and the
Agent each in a network namespace of their own, linked by veth pairs, under load while the links
turn slow and lossy and are partitioned.

```
.venv/bin/python -m rigs.netfaults [--agents 2] [--slow-for 12] [--partition 20] [--keep]
```

The network exists only inside the rig's namespaces (``lnetf-*``; nothing in the machine's own):

* ``lnetf-pg``: Postgres (Debian's binaries, as ``harness/postgres.py``) on 10.213.0.1, the address
  of a bridge ``br-db`` into which every other namespace has a veth (10.213.0.0/25);
* ``lnetf-agent``: this process (it enters the namespace once the network is built), the receiving
  Agent on 10.213.0.129 (bridge ``br-front``, 10.213.0.128/25), the Agents and the probes; its veth
  into ``br-db`` (10.213.0.100) carries only the migration and the checks' reads, never slowed;
* ``lnetf-svc1``, ``lnetf-svc2``: ``python -m service serve`` on their ``br-front`` address, port
  8000; ``lnetf-relay1``, ``lnetf-relay2``: ``python -m relay``, delivering to the Agent.

This kernel has no ``netem`` qdisc, so a slow link is made the way netem would make it, with
iptables in ``lnetf-pg``: the packets between Postgres and each service and relay go to an NFQUEUE,
where ``rigs/net_delay.py`` holds each for 50-150 ms (so 100-300 ms a round trip, with jitter) and
drops 5 % of them in each direction, silently. A partition is an iptables ``DROP`` (never
``REJECT``) on each receiving side of a link: no packet passes, no RST is sent, every TCP
connection across it is left half-open.

Under the Agents' load (``rigs/load.py``: half the Agents and one probe per replica), in turn:

1. the links service-Postgres and relay-Postgres slow and lossy (from the start, for the rest of
   the run);
2. replica 1 partitioned from Postgres for ``--partition`` s: it must fail ``/readyz`` (a 503, or
   no answer within 3 s, the Kubernetes probe's timeout) and be ready again by itself once the link
   heals; the time to recover is printed;
3. both relays partitioned from the Agent for ``--partition`` s: nothing delivered meanwhile,
   deliveries resume by themselves (the time to the first one printed);
4. a partition that heals in the middle of a commit: starts sent to replica 2 and the link cut
   while they are in flight, healed 3 s later; each is answered once, recorded byte for byte;
5. an answer lost in a partition: a start sent to replica 1 while only Postgres' answers to it are
   dropped (the commit happens, its answer does not come back); the Agent sends it again with the
   same ``tool_call_id`` to replica 2 and gets the recorded answer, byte for byte, and once the link
   heals replica 1's own late answer is the same bytes. One operation, one result.

Then the usual checks (``rigs/checks.py``: every acknowledged answer recorded byte for byte — the
probes' writes sent again after a lost answer among them — one operation per start, every
operation final exactly once, every result delivered, no 500), every result delivered once in its
conversation's order, every deadline settled, no process restarted. Everything the rig made — the
namespaces (and with them the veths and bridges), the iptables rules, its processes, Postgres'
directory — is removed on the way out, even when interrupted; a run killed outright leaves
namespaces named ``lnetf-*``, which the next run removes (their processes first) before it starts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import itertools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from psycopg.rows import dict_row

from harness.calls import start_body
from harness.database import create_database, with_user
from harness.http_client import HttpClient
from harness.postgres import PG_BIN, Postgres, workdir
from harness.processes import ROOT, RelayProcess, ServiceProcess, environment, launch, log_tail
from harness.receiver import Receiver
from rigs.checks import Checks, check, print_figures, settle
from rigs.load import Agents, Caller, Figures, Probe
from rigs.stack import WEBHOOK_SECRET, migrate
from service.db import roles
from service.db.pool import SWEEP_WAIT
from service.manifests import registry_of
from service.settings import Settings

PREFIX = "lnetf-"
PG_NS, AGENT_NS = f"{PREFIX}pg", f"{PREFIX}agent"
PG_ADDRESS = "10.213.0.1"  # br-db, 10.213.0.0/25
ADMIN_ADDRESS = "10.213.0.100"  # the rig's own link to Postgres, never slowed
AGENT_ADDRESS = "10.213.0.129"  # br-front, 10.213.0.128/25
#: node -> (its address on br-db, its address on br-front)
NODES = {
    "svc1": ("10.213.0.11", "10.213.0.141"),
    "svc2": ("10.213.0.12", "10.213.0.142"),
    "relay1": ("10.213.0.21", "10.213.0.151"),
    "relay2": ("10.213.0.22", "10.213.0.152"),
}
QUEUE = 1  # the NFQUEUE of the slow links
SERVICE_PORT = 8000
PROBE_TIMEOUT = 3.0  # a /readyz without an answer this long fails (deploy/kubernetes: timeoutSeconds)
MARGIN = 2.0  # what a machine of 2 shared cores and 100-300 ms round trips add to a bound, seconds
# The longest a live transaction holds a conversation's lock on the slow link: the Host's foreground
# switch, about ten statements of a round trip each (up to 300 ms), a lost packet or two among them.
SLOW_TRANSACTION = 4.0


def _seconds(value: str) -> float:
    """A Postgres duration of the role limits ("5s", "60s", "1min", "0") in seconds."""
    units = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}
    for unit in sorted(units, key=len, reverse=True):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * units[unit]
    return float(value) / 1000  # a bare number is milliseconds


def bounds(settings: Settings) -> tuple[float, float]:
    """What the service promises under a partition, from its defaults (docs/operations.md, "When
    the network fails"): (the longest a call to a replica cut from Postgres takes to answer, the
    latest a deadline may settle after its ends_at).

    A call sent after the cut goes out on a pooled connection whose peer is gone: TCP gives it up
    after DB_TCP_USER_TIMEOUT_SECONDS unacknowledged (or, if the statement was acknowledged, one
    keepalive interval later), the caller waits at most SWEEP_WAIT for the test of the idle ones, and
    no retry follows once DB_UNAVAILABLE_AFTER_SECONDS have passed (a checkout waits at most the
    rest): a 503 within the larger of the two, plus the margin. A deadline is late while a
    conversation's lock is held past its ends_at: by a live transaction on the slow link (the Host's
    leave or foreground switch, SLOW_TRANSACTION) and then, if the cut caught it, by that open
    transaction, which Postgres ends after the runtime role's idle_in_transaction_session_timeout;
    another replica's sweeper then settles it within SWEEPER_POLL_SECONDS; plus the margin. (Before
    the role had that bound the cut replica held the lock until its connection came back: 30 s and
    more after a 20 s partition.)"""
    statement = settings.db_tcp_user_timeout_seconds + settings.db_keepalives_interval_seconds + SWEEP_WAIT
    call = max(settings.db_unavailable_after_seconds, statement) + MARGIN
    idle = _seconds(roles.DEFAULT_LIMITS[roles.RUNTIME].idle_in_transaction_session_timeout)
    return call, SLOW_TRANSACTION + idle + settings.sweeper_poll_seconds + MARGIN


WORKDIR_PREFIX = "lineup-netfaults-"
CLONE_NEWNET = 0x40000000


def ns_of(node: str) -> str:
    return f"{PREFIX}{node}"


def in_ns(ns: str, *command: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *command]


def run(*command: str, check: bool = True) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def iptables(ns: str, *rule: str, check: bool = True) -> None:
    run(*in_ns(ns, "iptables", "-w", *rule), check=check)


# --- the network ----------------------------------------------------------------------------------


def our_namespaces() -> list[str]:
    return [line.split()[0] for line in run("ip", "netns", "list").splitlines() if line.startswith(PREFIX)]


def remove_network() -> None:
    """Every namespace named ``lnetf-*``: the processes in it (all the rig's) killed, then the
    namespace deleted, which deletes its veths, bridge and iptables rules with it."""
    for ns in our_namespaces():
        for pid in run("ip", "netns", "pids", ns, check=False).split():
            if int(pid) == os.getpid():
                continue
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        run("ip", "netns", "del", ns, check=False)


def remove_leftovers() -> None:
    """What an earlier run killed outright left: its namespaces (and their processes), its
    Postgres' directories."""
    if our_namespaces():
        print(f"netfaults: removing an earlier run's namespaces {our_namespaces()}", flush=True)
    remove_network()
    for stale in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)


def build_network() -> None:
    for ns in (PG_NS, AGENT_NS, *map(ns_of, NODES)):
        run("ip", "netns", "add", ns)
        run("ip", "-n", ns, "link", "set", "lo", "up")
    for ns, bridge, address in ((PG_NS, "br-db", PG_ADDRESS), (AGENT_NS, "br-front", AGENT_ADDRESS)):
        run("ip", "-n", ns, "link", "add", bridge, "type", "bridge")
        run("ip", "-n", ns, "addr", "add", f"{address}/25", "dev", bridge)
        run("ip", "-n", ns, "link", "set", bridge, "up")

    def veth(ns: str, device: str, address: str, hub: str, port: str, bridge: str) -> None:
        run("ip", "link", "add", device, "netns", ns, "type", "veth", "peer", "name", port, "netns", hub)
        run("ip", "-n", ns, "addr", "add", f"{address}/25", "dev", device)
        run("ip", "-n", ns, "link", "set", device, "up")
        run("ip", "-n", hub, "link", "set", port, "master", bridge)
        run("ip", "-n", hub, "link", "set", port, "up")

    for node, (db_address, front_address) in NODES.items():
        veth(ns_of(node), "db0", db_address, PG_NS, f"d-{node}", "br-db")
        veth(ns_of(node), "fr0", front_address, AGENT_NS, f"f-{node}", "br-front")
    veth(AGENT_NS, "db0", ADMIN_ADDRESS, PG_NS, "d-admin", "br-db")


def enter(ns: str) -> None:
    """This thread into ``ns`` (the main one, before any other starts: every later one is born
    there); ``ns`` a name of /run/netns, or the path of a namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(ns if ns.startswith("/") else f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns into {ns}: {os.strerror(error)}")
    finally:
        os.close(fd)


def slow_links(on: bool) -> None:
    """Packets between Postgres and each service and relay through the NFQUEUE (or no longer)."""
    action = "-A" if on else "-D"
    for db_address, _ in NODES.values():
        for chain, side in (("INPUT", "-s"), ("OUTPUT", "-d")):
            iptables(
                PG_NS,
                *(action, chain, side, db_address, "-j", "NFQUEUE"),
                *("--queue-num", str(QUEUE), "--queue-bypass"),
                check=on,
            )


@dataclass(frozen=True)
class Cut:
    """DROP rules, each ``(namespace, source address)``: what arrives there from there is dropped."""

    rules: tuple[tuple[str, str], ...]

    def apply(self) -> None:
        for ns, source in self.rules:
            iptables(ns, "-I", "INPUT", "1", "-s", source, "-j", "DROP")

    def heal(self) -> None:
        for ns, source in self.rules:
            iptables(ns, "-D", "INPUT", "-s", source, "-j", "DROP", check=False)


def from_postgres(node: str, *, both_ways: bool = True) -> Cut:
    """``node`` cut from Postgres: both directions, or only Postgres' packets to it."""
    db_address = NODES[node][0]
    rules = [(ns_of(node), PG_ADDRESS)]
    if both_ways:
        rules.append((PG_NS, db_address))
    return Cut(tuple(rules))


def relays_from_agent() -> Cut:
    return Cut(
        tuple(
            rule
            for node in ("relay1", "relay2")
            for rule in ((AGENT_NS, NODES[node][1]), (ns_of(node), AGENT_ADDRESS))
        )
    )


# --- the processes --------------------------------------------------------------------------------


class NetPostgres(Postgres):
    """``harness.postgres.Postgres``, its postmaster started inside ``lnetf-pg`` on 10.213.0.1:5432."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.port = 5432

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{PG_ADDRESS}:{self.port}/{database}"

    def init_here(self) -> NetPostgres:
        self.init()
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '{PG_ADDRESS}'\n")  # the later line wins
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 10.213.0.0/24 trust\n")
        return self

    def _pg_ctl(self, *args: str) -> None:
        command = in_ns(
            PG_NS, "runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(self.data)
        )
        process = launch([*command, *args], self.log, cwd=self.root)
        if process.wait() != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} exited {process.returncode}:\n{log_tail(self.log)}")

    def start(self) -> None:
        self._pg_ctl("-l", str(self.server_log), "-w", "-t", "60", "start")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._pg_ctl("-m", "fast", "-w", "-t", "30", "stop")


class NetService(ServiceProcess):
    """``python -m service serve`` inside its node's namespace, on its br-front address."""

    def __init__(
        self, node: str, database_url: str, log_dir: Path, env: dict[str, str] | None = None
    ) -> None:
        super().__init__(database_url, log_dir, port=SERVICE_PORT, env=env)
        self.node = node
        self.address = NODES[node][1]
        self.log = log_dir / f"{node}.log"

    def command(self) -> list[str]:
        return ["-m", "service", "serve", "--host", self.address, "--port", str(self.port)]

    @property
    def base_url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def start(self) -> NetService:
        command = in_ns(ns_of(self.node), sys.executable, *self.command())
        self.process = launch(command, self.log, environment(self.env), cwd=self.cwd)
        return self


class NetRelay(RelayProcess):
    """``python -m relay`` inside its node's namespace; a fixed ``RELAY_ID``, backoff 0.2-2 s."""

    def __init__(self, node: str, database_url: str, webhook_url: str, log_dir: Path) -> None:
        env = {
            "RELAY_ID": f"netfaults-{node}",
            "RELAY_BACKOFF_BASE_SECONDS": "0.2",
            "RELAY_BACKOFF_MAX_SECONDS": "2",
        }
        super().__init__(database_url, webhook_url, WEBHOOK_SECRET, log_dir / f"{node}.log", env)
        self.node = node

    def start(self) -> NetRelay:
        command = in_ns(ns_of(self.node), sys.executable, *self.args)
        self.process = launch(command, self.log, environment(self.env), cwd=self.cwd)
        return self


@contextlib.contextmanager
def delayer(log_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``rigs/net_delay.py`` inside ``lnetf-pg``, with the rules that send it the slow links' packets."""
    process = launch(
        in_ns(PG_NS, sys.executable, "-m", "rigs.net_delay", "--queue", str(QUEUE)),
        log_dir / "net_delay.log",
        environment({}),
        cwd=ROOT,
    )
    try:
        time.sleep(0.5)
        slow_links(on=True)
        yield process
    finally:
        slow_links(on=False)
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- the run --------------------------------------------------------------------------------------


@dataclass
class Stack:
    admin_url: str
    receiver: Receiver
    services: list[NetService]
    relays: list[NetRelay]
    figures: Figures
    probes: list[Probe]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    checks: Checks = field(default_factory=Checks)
    notes: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        print(f"  {time.strftime('%H:%M:%S')} {text}", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.say(text)


async def readyz(http: httpx.AsyncClient, service: NetService) -> int | str:
    return (await timed_readyz(http, service))[0]


async def timed_readyz(http: httpx.AsyncClient, service: NetService) -> tuple[int | str, float]:
    """``/readyz``'s status ("no answer" past PROBE_TIMEOUT) and the seconds it took."""
    began = time.monotonic()
    try:
        status: int | str = (await http.get(f"{service.base_url}/readyz", timeout=PROBE_TIMEOUT)).status_code
    except httpx.TimeoutException:
        status = "no answer"
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return status, time.monotonic() - began


async def ready_again(http: httpx.AsyncClient, service: NetService, within: float) -> float | None:
    """Seconds until ``/readyz`` answers 200, polled every 0.25 s; None if not within ``within``."""
    began = time.monotonic()
    while time.monotonic() - began < within:
        if await readyz(http, service) == 200:
            return time.monotonic() - began
        await asyncio.sleep(0.25)
    return None


async def call_while_cut(service: NetService, body: bytes) -> tuple[int | str, bytes, float]:
    """One send of ``body`` to ``service``: its status (or why there was none), body and seconds."""
    client = HttpClient(service.base_url, service.agent_token)
    began = time.monotonic()
    try:
        status, _, data = await client.request("POST", "/v1/tool-calls", body, within=60)
        return status, data, time.monotonic() - began
    except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
        return type(exc).__name__, b"", time.monotonic() - began
    finally:
        await client.close()


async def replica_partition(stack: Stack, seconds: float, run_id: str) -> None:
    """Scenario 2: replica 1 cut from Postgres (half-open), then healed; a start sent to it a second
    after the cut must be answered 503 database_unavailable within the bound, and once sent again
    after the heal, be answered as any start."""
    service, probe = stack.services[0], stack.probes[0]
    call_bound, _ = bounds(Settings())
    cut = from_postgres("svc1")
    stack.say(f"replica 1 partitioned from Postgres for {seconds:.0f} s (DROP both ways)")
    tool_call_id = f"cut-{run_id}-start"
    payload = start_body(f"cut-{run_id}", 1, "netfaults", tool_call_id=tool_call_id)
    began = time.monotonic()
    cut.apply()
    polls: list[tuple[float, int | str, float]] = []
    async with httpx.AsyncClient() as http:
        try:
            await asyncio.sleep(1)
            sent = asyncio.create_task(call_while_cut(service, json.dumps(payload).encode()))
            while time.monotonic() - began < seconds:
                status, took = await timed_readyz(http, service)
                polls.append((time.monotonic() - began, status, took))
                await asyncio.sleep(0.5)
            cut_status, cut_body, cut_took = await sent
        finally:
            cut.heal()
        stack.say("replica 1's link to Postgres healed")
        recovered = await ready_again(http, service, within=120)
    # The Agent sends the unanswered start again, as it would, until it is answered.
    caller = Caller(service.base_url, service.agent_token, stack.figures)
    try:
        stack.figures.acknowledged[tool_call_id] = await caller("POST", "/v1/tool-calls", payload)
    finally:
        await caller.http.close()
    cut_error = _error_code(cut_body)
    stack.checks.add(
        f"a call to the partitioned replica answered 503 database_unavailable within {call_bound:.0f} s",
        cut_status == 503 and cut_error == "database_unavailable" and cut_took <= call_bound,
        f"{cut_status} {cut_error} after {cut_took:.1f} s; answered"
        f" {stack.figures.acknowledged[tool_call_id][0]} once sent again after the heal",
    )
    stack.note(
        f"replica partition: a start sent 1 s after the cut answered {cut_status} ({cut_error})"
        f" after {cut_took:.1f} s"
    )
    first_failure = next((t for t, status, _ in polls if status != 200), None)
    late = [status for t, status, _ in polls if t >= seconds / 2]
    answers = sorted({str(status) for _, status, _ in polls})
    slowest = max((took for _, _, took in polls), default=0.0)
    stack.checks.add(
        "the partitioned replica failed /readyz",
        first_failure is not None and bool(late) and all(status != 200 for status in late),
        f"first failure {first_failure:.1f} s after the cut; answers {answers}"
        if first_failure is not None
        else f"answers {answers}",
    )
    stack.checks.add(
        f"every /readyz of the partitioned replica answered (200 or 503) within {PROBE_TIMEOUT:.0f} s",
        all(status in (200, 503) for _, status, _ in polls),
        f"{len(polls)} probes, answers {answers}, the slowest {slowest:.1f} s",
    )
    stack.checks.add(
        "the partitioned replica was ready again by itself, not restarted",
        recovered is not None and service.running(),
        f"ready {recovered:.1f} s after the link healed" if recovered is not None else "not within 120 s",
    )
    # From the probe's last answered write before the cut to its first after it.
    last = max((t for t in probe.successes if t <= began), default=began)
    gap = min((t for t in probe.successes if t > began), default=time.monotonic()) - last
    failed_at = "never" if first_failure is None else f"{first_failure:.1f} s after the cut"
    ready_at = "not" if recovered is None else f"{recovered:.1f} s"
    stack.note(
        f"replica partition: /readyz failed {failed_at} ({', '.join(answers)}, the slowest answer"
        f" {slowest:.1f} s); ready {ready_at} after the heal; its probe wrote nothing for {gap:.1f} s"
    )


async def relay_partition(stack: Stack, seconds: float) -> None:
    """Scenario 3: both relays cut from the Agent, then healed."""
    cut = relays_from_agent()
    stack.say(f"relays partitioned from the Agent for {seconds:.0f} s (DROP both ways)")
    cut.apply()
    before = len(stack.receiver.accepted())
    try:
        await asyncio.sleep(seconds)
    finally:
        cut.heal()
    during = len(stack.receiver.accepted()) - before
    healed = time.monotonic()
    resumed: float | None = None
    while time.monotonic() - healed < 120:
        if len(stack.receiver.accepted()) > before + during:
            resumed = time.monotonic() - healed
            break
        await asyncio.sleep(0.1)
    stack.checks.add(
        "deliveries resumed by themselves after the relays' partition from the Agent",
        resumed is not None and all(relay.running() for relay in stack.relays),
        f"{during} delivered during it; first after {resumed:.1f} s"
        if resumed is not None
        else "none in 120 s",
    )
    stack.note(
        f"relay partition: {during} deliveries during it, the first after the heal "
        f"{resumed if resumed is None else round(resumed, 1)} s later"
    )


async def mid_commit(stack: Stack, run_id: str, calls: int = 8) -> None:
    """Scenario 4: starts in flight to replica 2 when its link to Postgres is cut; healed 3 s later."""
    service = stack.services[1]
    callers = [Caller(service.base_url, service.agent_token, stack.figures) for _ in range(calls)]
    bodies = [
        start_body(f"heal-{run_id}-{n}", 1, "netfaults", tool_call_id=f"heal-{run_id}-{n}-start")
        for n in range(calls)
    ]
    tasks = [
        asyncio.create_task(caller("POST", "/v1/tool-calls", body))
        for caller, body in zip(callers, bodies, strict=True)
    ]
    await asyncio.sleep(0.12)  # sent, their round trip to Postgres (100-300 ms) under way
    in_flight = sum(not task.done() for task in tasks)
    cut = from_postgres("svc2")
    stack.say(f"replica 2 cut from Postgres with {in_flight} of {calls} starts in flight; healed in 3 s")
    began = time.monotonic()
    cut.apply()
    try:
        await asyncio.sleep(3)
    finally:
        cut.heal()
    answers = await asyncio.gather(*tasks, return_exceptions=True)
    took = time.monotonic() - began
    for caller in callers:
        await caller.http.close()
    statuses = []
    for body, answer in zip(bodies, answers, strict=True):
        if isinstance(answer, BaseException):
            stack.figures.errors.append(f"{body['tool_call_id']}: {answer!r}")
            statuses.append(type(answer).__name__)
            continue
        stack.figures.acknowledged[body["tool_call_id"]] = answer
        statuses.append(str(answer[0]))
    stack.checks.add(
        "starts in flight when a partition cut their commit each answered 202 once it healed",
        in_flight > 0 and statuses == ["202"] * calls,
        f"{in_flight} in flight at the cut; answers {sorted(set(statuses))},"
        f" the last {took:.1f} s after the cut",
    )
    stack.note(f"heal mid-commit: {in_flight} starts in flight at the cut, all answered within {took:.1f} s")


async def lost_answer(stack: Stack, run_id: str) -> None:
    """Scenario 5: a start's answer lost between Postgres and replica 1; the Agent sends it again
    with the same tool_call_id to replica 2. Replica 1 answers the first send once the link heals
    (the recorded answer), or — when its connection was given up meanwhile
    (DB_TCP_USER_TIMEOUT_SECONDS) — 503 database_unavailable, and then the recorded answer to the
    Agent's next send, as the contract says."""
    first, second = stack.services
    tool_call_id = f"lost-{run_id}-start"
    payload = start_body(f"lost-{run_id}", 1, "netfaults", tool_call_id=tool_call_id)
    body = json.dumps(payload).encode()
    cut = from_postgres("svc1", both_ways=False)
    stack.say("Postgres' packets to replica 1 dropped; a start sent to replica 1")
    cut.apply()
    one = HttpClient(first.base_url, first.agent_token)
    two = HttpClient(second.base_url, second.agent_token)
    healed = False
    try:
        sent = asyncio.create_task(one.request("POST", "/v1/tool-calls", body, within=120))
        await asyncio.sleep(4)
        unanswered = not sent.done()
        with psycopg.connect(stack.admin_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT response::text FROM tool_calls WHERE tool_call_id = %s", (tool_call_id,)
            ).fetchone()
        committed = row is not None
        again = await two.request("POST", "/v1/tool-calls", body, within=30)
        stack.say(f"sent again to replica 2: {again.status}")
        cut.heal()
        healed = True
        late = await sent
    finally:
        if not healed:
            cut.heal()
        await one.close()
        await two.close()
    late_error = _error_code(late.body) if late.status == 503 else None
    replica_one = (late.status, late.body)
    if late_error == "database_unavailable":  # sent again to replica 1, as the Agent would
        caller = Caller(first.base_url, first.agent_token, stack.figures)
        try:
            replica_one = await caller("POST", "/v1/tool-calls", payload)
        finally:
            await caller.http.close()
    with psycopg.connect(stack.admin_url, autocommit=True, row_factory=dict_row) as conn:
        recorded = conn.execute(
            "SELECT response::text AS response FROM tool_calls WHERE tool_call_id = %s", (tool_call_id,)
        ).fetchone()
        operations = conn.execute(
            "SELECT count(*) AS n FROM operations WHERE tool_call_id = %s", (tool_call_id,)
        ).fetchone()
    stack.figures.acknowledged[tool_call_id] = (again.status, again.body)
    same = recorded is not None and again.body.decode() == recorded["response"] == replica_one[1].decode()
    late_said = str(late.status)
    if late_error:
        late_said += f" {late_error}, then {replica_one[0]} when sent again"
    stack.checks.add(
        "an answer lost in a partition: the same tool_call_id sent again got the recorded answer",
        unanswered
        and again.status == 202
        and (late.status == 202 or late_error == "database_unavailable")
        and replica_one[0] == 202
        and same
        and operations == {"n": 1},
        f"unanswered after 4 s {unanswered}; committed before it was sent again {committed};"
        f" answers {again.status} / {late_said} (replica 1), identical {same}; operations {operations}",
    )
    stack.note(
        f"lost answer: the first send unanswered after 4 s"
        f" ({'committed' if committed else 'not yet committed'});"
        f" sent again to replica 2: {again.status}; replica 1's late answer {late_said};"
        f" both byte for byte the recorded answer: {same}; operations {operations['n'] if operations else 0}"
    )
    stack.note(f"  the answer: {again.body.decode()}")


def _error_code(body: bytes) -> str | None:
    """The contract's error code of an answer's body, if it has one."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed.get("error") if isinstance(parsed, dict) else None


async def faults(stack: Stack, args: argparse.Namespace, run_id: str) -> None:
    try:
        await asyncio.sleep(args.slow_for)
        await replica_partition(stack, args.partition, run_id)
        await asyncio.sleep(3)
        await relay_partition(stack, args.partition)
        await asyncio.sleep(2)
        await mid_commit(stack, run_id)
        await asyncio.sleep(2)
        await lost_answer(stack, run_id)
        await asyncio.sleep(3)
    finally:
        stack.stop.set()


def timed_out(relays: Sequence[NetRelay]) -> set[str]:
    """The results (event ids) one of whose deliveries the relays gave up waiting for: the Agent's
    2xx, if it answered, never reached the relay (``relay_attempt_retry``, a Timeout)."""
    events = set()
    for relay in relays:
        for line in relay.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if entry.get("event") == "relay_attempt_retry" and entry.get("error", "").startswith(
                    "Timeout"
                ):
                    events.add(entry["event_id"])
    return events


def responses(admin_url: str, tool_call_ids: Sequence[str]) -> dict[str, str]:
    """The recorded answers of these tool calls."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tool_call_id, response::text FROM tool_calls WHERE tool_call_id = ANY(%s)",
            (list(tool_call_ids),),
        ).fetchall()
    return {str(i): str(response) for i, response in rows}


def delivery_checks(admin_url: str, receiver: Receiver, checks: Checks, relays: Sequence[NetRelay]) -> None:
    """Every result accepted by the Agent once — but for those whose 2xx a partition kept from the
    relay (accepted again under the same webhook-id: at least once, the contract's promise) — first
    acceptances in each conversation's order; every deadline settled (the worst lateness printed)."""
    with psycopg.connect(admin_url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "SELECT event_id::text AS event_id, conversation_id FROM outbox ORDER BY created_at, event_id"
        ).fetchall()
        latest = conn.execute(
            "SELECT tool_call_id, lateness_ms, to_char(ends_at, 'HH24:MI:SS.MS') AS ends_at,"
            " to_char(finalized_at, 'HH24:MI:SS.MS') AS finalized_at FROM operations"
            " WHERE state = 'completed' ORDER BY lateness_ms DESC NULLS LAST LIMIT 1"
        ).fetchone()
        late = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'completed') AS n,"
            " count(*) FILTER (WHERE state = 'focusing' OR finalized_at IS NULL) AS open,"
            " count(*) FILTER (WHERE state = 'completed' AND finalized_at < ends_at) AS early,"
            " coalesce(max(lateness_ms), 0) AS worst FROM operations"
        ).fetchone()
    assert late is not None
    per_event = receiver.accepted_per_event()
    doubled = [event for event, times in per_event.items() if times > 1]
    first_accepted: dict[str, float] = {}
    for delivery in receiver.accepted():
        first_accepted.setdefault(delivery.event_id, delivery.arrived_at)
    by_conversation: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_conversation[row["conversation_id"]].append(row["event_id"])
    out_of_order = 0
    for events in by_conversation.values():
        times = [first_accepted.get(event, float("inf")) for event in events]
        out_of_order += sum(1 for a, b in itertools.pairwise(times) if b < a)
    unanswered = timed_out(relays)
    cut_short = [event for event in doubled if event in unanswered]
    checks.add(
        "every result delivered once (again only when a partition kept the Agent's 2xx from the relay),"
        " in per-conversation order",
        len(cut_short) == len(doubled) and out_of_order == 0,
        f"{len(per_event)} results in {len(by_conversation)} conversations; accepted twice {len(doubled)}"
        f" ({len(cut_short)} of them after a delivery the relay timed out on, same webhook-id),"
        f" out of order {out_of_order}",
    )
    _, lateness = bounds(Settings())
    checks.add(
        f"every deadline settled within {lateness:.0f} s of its ends_at, none before it",
        late["open"] == 0 and late["early"] == 0 and late["n"] > 0 and late["worst"] <= lateness * 1000,
        f"{late['n']} periods completed, the worst {late['worst']} ms after its ends_at;"
        f" open {late['open']}, early {late['early']}"
        + (
            f" (the latest: {latest['tool_call_id']}, due {latest['ends_at']},"
            f" settled {latest['finalized_at']})"
            if latest is not None
            else ""
        ),
    )


async def netfaults(args: argparse.Namespace, server: NetPostgres, log_dir: Path) -> int:
    admin_url = server.url("lineup")
    create_database(server.url(), "lineup")
    # As a deployment runs: the roles made by the admin (with their limits: the runtime role's
    # idle_in_transaction_session_timeout is what frees a cut replica's locks), migrate as the owner,
    # the replicas as runtime, the relays as relay; the checks read as the admin.
    names = roles.Names()
    with psycopg.connect(admin_url) as conn:
        roles.ensure(conn, names, registry_of(Settings()))
    await asyncio.to_thread(migrate, with_user(admin_url, names.owner), log_dir)
    service_url, relay_url = with_user(admin_url, names.runtime), with_user(admin_url, names.relay)
    run_id = secrets.token_hex(3)
    figures = Figures()
    async with Receiver([WEBHOOK_SECRET], host=AGENT_ADDRESS) as receiver:
        first = NetService("svc1", service_url, log_dir)
        same = {name: first.env[name] for name in ("AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN")}
        services = [first, NetService("svc2", service_url, log_dir, env=same)]
        relays = [NetRelay(node, relay_url, receiver.url, log_dir) for node in ("relay1", "relay2")]
        for service in services:
            service.database_url = service_url
        # Each service and relay reaches Postgres through its own link: the same address.
        with delayer(log_dir):
            stack: Stack | None = None
            try:
                for service in services:
                    service.start()
                for process in relays:
                    process.start()
                await asyncio.gather(*(asyncio.to_thread(service.wait_ready, 90) for service in services))
                print(
                    f"netfaults: 2 replicas, 2 relays, {args.agents} Agents a replica; links to Postgres"
                    " 50-150 ms each way, 5 % loss each way",
                    flush=True,
                )
                probes = [Probe(service.base_url, service.agent_token) for service in services]
                stack = Stack(admin_url, receiver, services, relays, figures, probes)
                agents = [
                    Agents(
                        service.base_url, service.agent_token, service.host_token, figures, count=args.agents
                    )
                    for service in services
                ]
                began = time.monotonic()
                await asyncio.gather(
                    *(group.run(stack.stop) for group in agents),
                    *(probe.run(stack.stop) for probe in probes),
                    faults(stack, args, run_id),
                )
                stack.say(f"load stopped after {time.monotonic() - began:.0f} s; settling")
                left = await settle(admin_url, within=180)
                answers = {**probes[0].answers, **probes[1].answers}
                checks = await asyncio.to_thread(check, admin_url, figures, receiver, answers)
                checks.add(
                    "everything settled and delivered within 180 s",
                    left == {"focusing": 0, "undelivered": 0},
                    str(left),
                )
                await asyncio.to_thread(delivery_checks, admin_url, receiver, checks, relays)
                resent = sorted(probes[0].resent | probes[1].resent)
                recorded = await asyncio.to_thread(responses, admin_url, resent)
                checks.add(
                    "probe writes whose answer was lost, sent again under the same tool_call_id:"
                    " each answered with the recorded answer, byte for byte",
                    all(recorded.get(i) == answers[i][1].decode() for i in resent),
                    f"{len(resent)} sent again ({', '.join(resent[:3])}{'…' if len(resent) > 3 else ''})",
                )
                checks.results.extend(stack.checks.results)
            finally:
                if stack is not None:
                    stack.stop.set()
                codes = await asyncio.to_thread(lambda: [p.stop() for p in (*relays, *services)])
    restarted = [code for code in codes if code not in (0, -signal.SIGTERM)]
    checks.add("no process of the stack exited or restarted; each stopped cleanly", not restarted, str(codes))
    print("figures:")
    print_figures(figures, receiver)
    for probe, service in zip(probes, services, strict=True):
        print(
            f"  probe {service.node}: {len(probe.answers)} writes, {len(probe.resent)} sent again,"
            f" {dict(probe.statuses)}"
        )
    for line in stack.notes if stack is not None else []:
        print(f"  {line}")
    return checks.verdict(log_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=2, help="Agents on each replica (2)")
    parser.add_argument("--slow-for", type=float, default=12.0, help="seconds of slow links alone first (12)")
    parser.add_argument("--partition", type=float, default=20.0, help="seconds each partition lasts (20)")
    parser.add_argument("--keep", action="store_true", help="keep the logs")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("iptables") is None:
        print("netfaults: skipped: network namespaces need root, iproute2 and iptables")
        return 0
    began = time.monotonic()
    remove_leftovers()
    root = workdir(WORKDIR_PREFIX)
    code = 1
    home: int | None = None
    try:
        build_network()
        server = NetPostgres(root).init_here()
        server.start()
        log_dir = root / "logs"
        log_dir.mkdir()
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        enter(AGENT_NS)
        try:
            code = asyncio.run(netfaults(args, server, log_dir))
        finally:
            server.stop()
            if code or args.keep:
                kept = Path(f"/tmp/netfaults-logs-{int(time.time())}")
                shutil.copytree(log_dir, kept)
                shutil.copy(server.server_log, kept / "postgres.log")
                print(f"logs kept in {kept}")
    finally:
        if home is not None:
            enter(f"/proc/self/fd/{home}")
            os.close(home)
        remove_network()
        shutil.rmtree(root, ignore_errors=True)
        print(f"netfaults: {time.monotonic() - began:.0f} s", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
