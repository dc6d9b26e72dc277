"""The fixed credentials the test suite's services are started with (``tests/conftest.py``), so a
client of the harness (``harness.mcp``) can default to the Agent's without importing the tests."""

from __future__ import annotations

AGENT_TOKEN = "agent-token-for-tests-0001"
HOST_TOKEN = "host-token-for-tests-00001"
OPERATOR_TOKEN = "operator-token-for-tests-1"
