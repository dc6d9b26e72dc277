"""The stack a rig runs on one database URL: the receiving Agent (in the rig's process), one
``python -m service serve``, two ``python -m relay``, and the load (``rigs.load``) aimed at it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.processes import ROOT, RelayProcess, ServiceProcess, environment
from harness.receiver import Receiver, fail_share
from rigs.checks import Checks, check, settle
from rigs.load import Agents, Figures, Probe

WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"failover-rig-secret-0123456789").decode()


def migrate(database_url: str, log_dir: Path) -> None:
    """``python -m service migrate`` with the URL every process gets (several hosts, for the failover rig)."""
    with (log_dir / "migrate.log").open("ab") as handle:
        code = subprocess.call(
            [sys.executable, "-m", "service", "migrate"],
            cwd=ROOT,
            env=environment({"DATABASE_URL": database_url}),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    if code != 0:
        raise RuntimeError(f"python -m service migrate exited {code}; log {log_dir / 'migrate.log'}")


#: The rigs' relays' backoff: 0.2 s doubling to 2 s (``relay.backoff``).
BACKOFF_BASE, BACKOFF_MAX = 0.2, 2.0


def relay(
    database_url: str,
    webhook_url: str,
    log_dir: Path,
    relay_id: str,
    env: Mapping[str, str] | None = None,
) -> RelayProcess:
    """A relay with a fixed ``RELAY_ID`` (a restarted one hands back at once the leases its killed
    predecessor held) and a short backoff (0.2 s to 2 s); ``env``, more of its environment."""
    return RelayProcess(
        database_url,
        webhook_url,
        WEBHOOK_SECRET,
        log_dir / f"{relay_id}.log",
        {
            "RELAY_ID": relay_id,
            "RELAY_BACKOFF_BASE_SECONDS": str(BACKOFF_BASE),
            "RELAY_BACKOFF_MAX_SECONDS": str(BACKOFF_MAX),
            **(env or {}),
        },
    )


@dataclass
class Rig:
    """What a run drives and checks: the Agents' load and the probe on one service, two relays, the
    receiver standing in for the Agent's webhook. ``codes`` are the exit codes once it has stopped."""

    url: str
    log_dir: Path
    receiver: Receiver
    service: ServiceProcess
    relays: list[RelayProcess]
    probe: Probe
    agents: Agents
    figures: Figures = field(default_factory=Figures)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    codes: list[int | None] = field(default_factory=list)

    async def settled_and_checked(self, within: float) -> Checks:
        """Wait for every operation to settle and every result to be delivered, then run ``check``."""
        left = await settle(self.url, within=within)
        checks = await asyncio.to_thread(check, self.url, self.figures, self.receiver, self.probe.answers)
        checks.add(
            f"everything settled and delivered within {within:.0f} s",
            left == {"focusing": 0, "undelivered": 0},
            str(left),
        )
        return checks


@contextlib.asynccontextmanager
async def running_rig(
    url: str,
    log_dir: Path,
    *,
    agents: int,
    relay_prefix: str,
    failing: float = 0.0,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[Rig]:
    """The receiver (answering a share ``failing`` of the deliveries with 503), the service (ready)
    and two relays, all on ``url`` (and ``env`` in their environment); on the way out, whatever
    happened, ``stop`` is set and every process is stopped with SIGTERM (their codes in ``codes``)."""
    service = ServiceProcess(url, log_dir, env=env)
    rig: Rig | None = None
    async with Receiver([WEBHOOK_SECRET], responder=fail_share(failing)) as receiver:
        relays = [relay(url, receiver.url, log_dir, f"{relay_prefix}-{n}", env) for n in (1, 2)]
        try:
            await asyncio.to_thread(service.start_ready)  # its port is final only now
            for process in relays:
                process.start()
            figures = Figures()
            rig = Rig(
                url,
                log_dir,
                receiver,
                service,
                relays,
                Probe(service.base_url, service.agent_token),
                Agents(service.base_url, service.agent_token, service.host_token, figures, count=agents),
                figures,
            )
            yield rig
        finally:
            if rig is not None:
                rig.stop.set()
            # In a thread: the receiver on this loop answers while the relays finish.
            codes = await asyncio.to_thread(lambda: [p.stop() for p in (*relays, service)])
            if rig is not None:
                rig.codes = codes


async def stop_after(stop: asyncio.Event, seconds: float) -> None:
    """Set ``stop`` after ``seconds``: the end of a rig's load."""
    await asyncio.sleep(seconds)
    stop.set()
