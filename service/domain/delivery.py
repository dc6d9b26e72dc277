"""Delivery control's vocabulary: the endpoint the relays deliver to and its circuit's states."""

from __future__ import annotations

from enum import StrEnum

#: The one endpoint today: the Agent at ``AGENT_WEBHOOK_URL``. Rows of ``delivery_endpoints`` are
#: keyed by such a name, so that more endpoints could come.
AGENT_ENDPOINT = "agent"


class Circuit(StrEnum):
    """``closed``: rows are delivered. ``open``: the endpoint fails as a whole, nothing is sent but
    a probe now and then. ``half_open``: one relay's probe is in flight."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
