"""The conformance rig's own logic: what its proxy adds to a request, and how it judges the runs
against the checked-in lists (rigs/mcp_conformance_not_applicable.json)."""

from __future__ import annotations

import json

from rigs.mcp_conformance import SUITES, CredentialsProxy, Outcome, judge, listed

PASS = [{"id": "a", "status": "SUCCESS"}]
FAIL = [{"id": "a", "status": "FAILURE", "errorMessage": "no"}]


def test_the_proxy_binds_every_tools_call_and_nothing_else() -> None:
    proxy = CredentialsProxy("http://127.0.0.1:1", "token", "conv-1")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}
    named = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"_meta": {"io.lineup/conversation_id": "c"}},
    }
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    bound = json.loads(proxy.rewritten(json.dumps([call, named, listing]).encode()))
    assert bound[0]["params"]["_meta"] == {"io.lineup/conversation_id": "conv-1"}
    assert bound[1]["params"]["_meta"] == {"io.lineup/conversation_id": "c"}
    assert bound[2] == listing
    assert proxy.rewritten(b"not json") == b"not json"


def test_every_listed_scenario_has_a_reason() -> None:
    not_applicable, pending = listed()
    for lists in (not_applicable, pending):
        assert set(lists) <= set(SUITES)
        for reasons in lists.values():
            assert all(isinstance(reason, str) and len(reason) > 20 for reason in reasons.values())


def test_an_unlisted_failure_and_a_listed_pass_both_fail_the_rig() -> None:
    not_applicable, _ = listed()
    version = SUITES[0]
    excused = next(iter(not_applicable[version]))
    assert judge([Outcome(version, excused, FAIL), Outcome(version, "tools-list", PASS)]) == []
    problems = judge([Outcome(version, "tools-list", FAIL), Outcome(version, excused, PASS)])
    assert [problem.split(" ")[1] for problem in problems] == ["tools-list", excused]
    assert judge([Outcome(version, "ping", [], error="no end")]) != []
