"""The MCP session book (service.mcp.sessions): caps per principal, the process's limit and the
Agent's reserved room, and their settings."""

from __future__ import annotations

import pytest

from service.mcp.sessions import Principal, SessionBook, SessionRefused
from service.settings import SettingsError, load_settings

TOKENS = {
    "database_url": "postgresql://u@localhost/db",
    "agent_token": "agent-7Fq2xLp9Wz",
    "host_token": "host-Kd83mPq0Zt5",
    "operator_token": "operator-Yx4Nc2Rv",
}


def book() -> SessionBook:
    return SessionBook(
        max_sessions=5, agent_reserved=2, per_person=2, per_agent_token=2, person_idle_seconds=60
    )


def refused(sessions: SessionBook, principal: Principal) -> SessionRefused:
    with pytest.raises(SessionRefused) as caught:
        sessions.admit(principal)
    return caught.value


def test_a_principal_past_its_cap_is_429_and_a_released_session_gives_its_room_back() -> None:
    sessions, alice = book(), Principal.person("https://id.example", "alice", "app")
    sessions.admit(alice)
    sessions.admit(alice)
    assert refused(sessions, alice).status == 429
    assert refused(sessions, alice).body()["error"]["data"] == {
        "error": "too_many_sessions",
        "kind": "person",
        "limit": 2,
    }
    # The same subject through another client, or of another issuer, is another principal.
    sessions.admit(Principal.person("https://id.example", "alice", "other-app"))
    sessions.release(alice)
    sessions.admit(alice)
    assert sessions.by_kind == {"person": 3}


def test_persons_never_take_the_agents_room_and_the_process_limit_holds_for_all() -> None:
    sessions = book()
    for subject in ("a", "b", "c"):
        sessions.admit(Principal.person("https://id.example", subject, "app"))
    assert refused(sessions, Principal.person("https://id.example", "d", "app")).status == 503
    agent, other_token = Principal.agent("agent-token-0001-xxxx"), Principal.agent("agent-token-0002-xxxx")
    sessions.admit(agent)
    sessions.admit(other_token)
    assert refused(sessions, agent).status == 503  # 5 open: the process's limit
    assert agent != other_token and agent == Principal.agent("agent-token-0001-xxxx")


def test_the_reserved_room_must_be_below_the_limit() -> None:
    with pytest.raises(SettingsError, match="MCP_AGENT_RESERVED_SESSIONS"):
        load_settings("serve", **TOKENS, mcp_max_sessions=10, mcp_agent_reserved_sessions=10)
    settings = load_settings()
    assert (settings.mcp_max_sessions, settings.mcp_agent_reserved_sessions) == (2000, 500)
    assert (settings.mcp_sessions_per_person, settings.mcp_person_session_idle_seconds) == (8, 300)
