"""What every framework's loop does, and how it reports it (standard library only: each framework's
script runs in that framework's own virtual environment, which has nothing of this project).

The test starts a script with the stack's address in the environment; the script prints one JSON
line per step on stdout: ``{"step": …, …}``. The steps: ``list`` (the tool names the framework
hands its model), ``start`` (a short focus period), ``ending`` (how it ended, as the agent learned
it: ``via`` a task or ``operation_status``), ``interrupt`` (of a long period), ``interrupted``
(that period's ending), ``late_interrupt``, ``ask`` (``interact_ask``, answered by the person
through the Host API) and ``ask_ending`` (the answer as the agent sees it, when it can).
"""

from __future__ import annotations

import json
import os
from typing import Any

URL = os.environ["LINEUP_MCP_URL"]
TOKEN = os.environ["LINEUP_AGENT_TOKEN"]
CONVERSATION = os.environ["LINEUP_CONVERSATION_ID"]
AUTHORIZATION = {"Authorization": f"Bearer {TOKEN}"}
#: For a framework that cannot set ``params._meta``: the conversation on every request.
HEADERS = {**AUTHORIZATION, "Lineup-Conversation-Id": CONVERSATION}
#: For a framework that can: the call's ``_meta``.
META = {"io.lineup/conversation_id": CONVERSATION}

SHORT = {"duration_seconds": 2, "activity": "framework loop"}
LONG = {"duration_seconds": 600, "activity": "framework loop, interrupted"}
ASK = {"prompt": "Tea or coffee?", "choices": ["tea", "coffee"]}
#: operation_status's longest wait (docs/api.md): under the OpenAI Agents SDK's 5 s tool timeout.
WAIT = {"wait_seconds": 4}


def report(step: str, **fields: Any) -> None:
    print(json.dumps({"step": step, **fields}, default=str), flush=True)


def structured(text: str) -> dict[str, Any]:
    """A tool result's JSON from its text content (a sentence for a person, then the JSON)."""
    start = text.index("{")
    return dict(json.loads(text[start:]))
