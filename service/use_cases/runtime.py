"""What every use case needs: the pool, the settings, the manifests, the after-commit wake-ups."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import msgspec

from service import wakeups
from service.db.pool import Pool
from service.db.ready_check import ReadyCheck
from service.manifests import Registry
from service.settings import Settings
from service.use_cases.callers import AGENT
from service.use_cases.unit_of_work import UnitOfWork, unit_of_work


@dataclass
class Runtime:
    pool: Pool
    settings: Settings
    registry: Registry
    wakeups: wakeups.Wakeups = field(default_factory=wakeups.Wakeups)
    # Each Tool's settings as its decision function reads them (JSON), made once. The database
    # records each answer's outcome word; the faces name its HTTP status (service.http).
    # The Agent's calls pass them with their caller (service.use_cases.callers), made once too.
    _contexts: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _settings_of: dict[str, Mapping[str, Any]] = field(default_factory=dict, init=False, repr=False)
    # /readyz's database probe, made by its first use (service.use_cases.readiness).
    ready_check: ReadyCheck | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        apps, tools = self.registry.apps, self.registry.tools
        # A Tool that declares forms (its manifest's "forms") finds them in its context too.
        self._settings_of = {
            name: {
                **runner.context(self.settings, apps[tools[name].app_scope]),
                **({"forms": tools[name].forms} if tools[name].forms else {}),
            }
            for name, runner in self.registry.runners.items()
        }
        self._contexts = {
            name: msgspec.json.encode({**values, "caller": AGENT.recorded()}).decode()
            for name, values in self._settings_of.items()
        }

    def context_of(self, tool: str, **extra: Any) -> str:
        """The Tool's context as the Agent's calls pass it; with ``extra`` (another caller, an
        allowance), made for the call."""
        if not extra:
            return self._contexts[tool]
        return msgspec.json.encode({**self._settings_of[tool], **extra}).decode()

    def unit_of_work(
        self, *, transaction: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[UnitOfWork]:
        """One connection and one transaction (``service.use_cases.unit_of_work``); ``timeout``, how
        long to wait for the connection (None: the pool's, DB_UNAVAILABLE_AFTER_SECONDS)."""
        return unit_of_work(self.pool, self.wakeups, transaction=transaction, timeout=timeout)
