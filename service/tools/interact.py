"""Interact's Tool: ``interact.ask`` asks the person and waits for their answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.domain.outcomes import Accepted
from service.tools import Hints, Registration
from service.tools.answers import InteractAskAccepted


def _asked(body: Mapping[str, Any]) -> str:
    return "The question is waiting for the person; their answer arrives as the result."


ASK = Registration(
    name="interact.ask",
    decide="interact_ask",
    outcomes={"accepted": Accepted},
    hints=Hints(title="Ask the person"),
    sentence=_asked,
    opens="interaction",
    answers={202: InteractAskAccepted},
)

REGISTRATIONS = (ASK,)
