"""Interact's Tool: ``interact.ask`` asks the person and waits for their answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from service.apps.interact.answers import InteractAskAccepted
from service.domain.errors import TooMany
from service.domain.outcomes import Accepted
from service.tools import Hints, Registration

if TYPE_CHECKING:
    from service.app_manifest import AppManifest
    from service.settings import Settings


def _pending_cap(settings: Settings, app: AppManifest) -> Mapping[str, Any]:
    return {"max_pending": settings.interact_pending_per_conversation}


def _asked(body: Mapping[str, Any]) -> str:
    return "The question is waiting for the person; their answer arrives as the result."


ASK = Registration(
    name="interact.ask",
    decide="interact_ask",
    outcomes={"accepted": Accepted, "too_many_requests": TooMany},
    hints=Hints(title="Ask the person"),
    sentence=_asked,
    opens="interaction",
    context=_pending_cap,
    answers={"accepted": InteractAskAccepted},
)

REGISTRATIONS = (ASK,)
