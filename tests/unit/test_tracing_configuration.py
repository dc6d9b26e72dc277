"""When the OTEL_* variables turn traces on, and what they refuse (service/telemetry.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.telemetry import TracingConfigError, configure_tracing, tracing_requested


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_traces_are_on_only_when_the_variables_ask(env: dict[str, str], expected: bool) -> None:
    assert tracing_requested(env) is expected


def test_nothing_is_installed_when_nothing_is_asked() -> None:
    assert configure_tracing("lineup-test", env={}) is False


def test_an_exporter_this_build_lacks_is_refused_by_name() -> None:
    with pytest.raises(TracingConfigError, match="zipkin"):
        configure_tracing("lineup-test", env={"OTEL_TRACES_EXPORTER": "zipkin"})


def test_grpc_is_refused_rather_than_ignored() -> None:
    with pytest.raises(TracingConfigError, match="http/protobuf"):
        configure_tracing(
            "lineup-test",
            env={"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        )


def test_every_otel_variable_the_service_reads_is_documented() -> None:
    """docs/tracing.md's table names every OTEL_* variable our code reads or sets."""
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "tracing.md").read_text()
    table = doc.split("### The variables honoured", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(OTEL_[A-Z_]+)`", table))
    read = {
        name
        for path in (root / "service").rglob("*.py")
        for name in re.findall(r"\"(OTEL_[A-Z_]+)\"", path.read_text())
    }
    assert read, "the service reads OTEL_* variables"
    assert read <= documented, sorted(read - documented)
