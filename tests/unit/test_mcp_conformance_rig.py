"""The conformance rig's own logic: what its proxy adds to a request, and how it judges the runs
against the checked-in lists (rigs/mcp_conformance_not_applicable.json)."""

from __future__ import annotations

import json

from rigs.mcp_conformance import FIXTURE_APP, SUITES, CredentialsProxy, Outcome, fixture_names, judge, listed
from service.manifests import registry_of
from service.settings import Settings
from service.tool_names import listed_names

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


def test_the_fixture_app_serves_the_suites_names_under_its_own() -> None:
    names = fixture_names()
    assert {
        "greet": "conformance_greet",
        "test_simple_text": "conformance_test-simple-text",
        "test_error_handling": "conformance_test-error-handling",
        "slow_compute": "conformance_slow-compute",
        "json_schema_2020_12_tool": "conformance_json-schema-2020-12-tool",
        # Questions of the app's own forms (the Runtime API's app_ask).
        "test_elicitation": "conformance_test-elicitation",
        "test_elicitation_sep1034_defaults": "conformance_test-elicitation-sep1034-defaults",
        "test_elicitation_sep1330_enums": "conformance_test-elicitation-sep1330-enums",
        "confirm_delete": "conformance_confirm-delete",
        "multi_input": "conformance_multi-input",
        "test_tool_with_progress": "conformance_test-tool-with-progress",
        # A Tool's own content, and SEP-2243's custom headers (issue 47).
        "test_image_content": "conformance_test-image-content",
        "test_audio_content": "conformance_test-audio-content",
        "test_embedded_resource": "conformance_test-embedded-resource",
        "test_multiple_content_types": "conformance_test-multiple-content-types",
        "test_custom_headers": "conformance_test-custom-headers",
    }.items() <= names.items()
    # Every fixture tool: the suite's name, each "_" a "-", under the app's scope.
    assert all(listed == "conformance_" + suite.replace("_", "-") for suite, listed in names.items())
    # Every one is a tool the service lists when it runs the fixture app (and only then).
    registry = registry_of(Settings(app_folders=str(FIXTURE_APP)))
    assert set(names.values()) <= set(listed_names(registry.tools))
    assert not set(names.values()) & set(listed_names(registry_of(Settings()).tools))


def test_the_proxy_translates_the_fixture_apps_names_and_no_other() -> None:
    proxy = CredentialsProxy("http://127.0.0.1:1", "token", "conv-1", fixture_names())
    calls = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow_compute"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "pomodoro_start"}},
    ]
    bound = json.loads(proxy.rewritten(json.dumps(calls).encode()))
    assert [call["params"]["name"] for call in bound] == ["conformance_slow-compute", "pomodoro_start"]
    assert proxy.header("Mcp-Name", "slow_compute") == "conformance_slow-compute"
    assert proxy.header("Mcp-Name", "0190-task") == "0190-task"
    assert proxy.header("Mcp-Method", "greet") == "greet"
    listing = {"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "conformance_greet"}, {"name": "x"}]}}
    listed = json.loads(proxy.listing(json.dumps(listing).encode()))
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["greet", "x"]
    assert proxy.listing(b"not json") == b"not json"


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
