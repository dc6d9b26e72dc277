"""An app's instance state is checked against its manifest's state schema: display data only, the
formats asserted, each app's schema its own."""

from __future__ import annotations

from typing import Any

import pytest

from service.app_manifest import InstanceStateFeature
from service.manifests import Registry
from tests.support.manifests import paths

OPERATION_ID = "0b6f3a52-9a43-4f4e-9d0a-3f7d3c1f2e10"


def pomodoro_state(registry: Registry) -> InstanceStateFeature:
    app = registry.app("pomodoro")
    assert app is not None
    assert app.instance_state is not None
    return app.instance_state


def whiteboard_state(registry: Registry) -> InstanceStateFeature:
    app = registry.app("whiteboard")
    assert app is not None
    assert app.instance_state is not None
    return app.instance_state


GOOD_SNAPSHOT = {
    "activity": "write report",
    "operation_id": OPERATION_ID,
    "started_at": "2025-01-01T10:00:00Z",
    "ends_at": "2025-01-01T10:25:00.123456+00:00",
    "display_state": "focusing",
}


@pytest.mark.parametrize("data", [{}, GOOD_SNAPSHOT, {"activity": None, "display_state": "cancelled"}])
def test_pomodoro_state_accepts_display_snapshots(registry: Registry, data: dict[str, Any]) -> None:
    assert pomodoro_state(registry).validate_state(data) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"remaining_seconds": 300}, ["data.remaining_seconds"]),
        ({"operation_id": "not-a-uuid"}, ["data.operation_id"]),
        ({"operation_id": OPERATION_ID.replace("-", "")}, ["data.operation_id"]),
        ({"started_at": "2025-13-01T10:00:00Z"}, ["data.started_at"]),
        ({"ends_at": "tomorrow"}, ["data.ends_at"]),
        ({"ends_at": "2025-01-01 10:25"}, ["data.ends_at"]),
        ({"display_state": "paused"}, ["data.display_state"]),
        ({"activity": "a" * 201}, ["data.activity"]),
    ],
)
def test_pomodoro_state_rejects_anything_but_display_data(
    registry: Registry, change: dict[str, Any], expected: list[str]
) -> None:
    assert paths(pomodoro_state(registry).validate_state(GOOD_SNAPSHOT | change)) == expected


def test_pomodoro_state_format_messages(registry: Registry) -> None:
    details = pomodoro_state(registry).validate_state(
        {"operation_id": "nope", "started_at": "yesterday"}, prefix="body.data"
    )
    assert [d.as_dict() for d in details] == [
        {"path": "body.data.operation_id", "message": "'nope' is not a 'uuid'"},
        {"path": "body.data.started_at", "message": "'yesterday' is not a 'date-time'"},
    ]


def test_non_object_state_gives_one_detail_at_the_prefix(registry: Registry) -> None:
    assert paths(pomodoro_state(registry).validate_state([GOOD_SNAPSHOT])) == ["data"]


def test_whiteboard_state_accepts_strokes(registry: Registry) -> None:
    data = {"strokes": [{"color": "#00ff7f", "width": 3, "points": [[0, 0], [1.5, -2]]}]}
    assert whiteboard_state(registry).validate_state(data) == []


@pytest.mark.parametrize(
    ("stroke", "expected"),
    [
        ({"color": "#00FF7F", "width": 3, "points": [[0, 0]]}, ["data.strokes[1].color"]),
        ({"color": "#00ff7f", "width": 21, "points": [[0, 0]]}, ["data.strokes[1].width"]),
        ({"color": "#00ff7f", "width": 3, "points": []}, ["data.strokes[1].points"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, 0], [1]]}, ["data.strokes[1].points[1]"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, 0, 0]]}, ["data.strokes[1].points[0]"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, "1"]]}, ["data.strokes[1].points[0][1]"]),
        ({"color": "#00ff7f", "width": 3, "points": [[0, 0]], "fill": True}, ["data.strokes[1].fill"]),
        ({"width": 3, "points": [[0, 0]]}, ["data.strokes[1].color"]),
    ],
)
def test_whiteboard_state_rejects_malformed_strokes(
    registry: Registry, stroke: dict[str, Any], expected: list[str]
) -> None:
    good = {"color": "#000000", "width": 1, "points": [[0, 0]]}
    assert paths(whiteboard_state(registry).validate_state({"strokes": [good, stroke]})) == expected


def test_whiteboard_state_is_capped_at_500_strokes(registry: Registry) -> None:
    stroke = {"color": "#000000", "width": 1, "points": [[0, 0]]}
    assert paths(whiteboard_state(registry).validate_state({"strokes": [stroke] * 501})) == ["data.strokes"]


def test_state_schemas_are_isolated_between_apps(registry: Registry) -> None:
    pomodoro, whiteboard = pomodoro_state(registry), whiteboard_state(registry)
    stroke = {"color": "#000000", "width": 1, "points": [[0, 0]]}
    assert paths(pomodoro.validate_state({"strokes": [stroke]})) == ["data.strokes"]
    assert paths(whiteboard.validate_state(GOOD_SNAPSHOT)) == [
        "data.activity",
        "data.display_state",
        "data.ends_at",
        "data.operation_id",
        "data.started_at",
    ]
