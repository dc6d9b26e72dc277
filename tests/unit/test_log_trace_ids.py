"""Log lines inside a recording span carry its ids (``trace_id``, ``span_id``, hex as
OpenTelemetry's log correlation writes them); outside one — no span, a span not sampled, or a
process that does not trace — nothing is added. Both of our renderings and other libraries'
records alike (service/logging.py)."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from service.logging import Lines, configure_logging
from service.telemetry import TRACING, tracer
from tests.support.tracing import traced


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], io.BytesIO]]:
    """Call it in the test (pytest puts its own stderr back between a fixture and the test): the
    process's stderr from then on, and logging configured on it."""

    def swap() -> io.BytesIO:
        raw = io.BytesIO()
        monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(raw, encoding="utf-8", write_through=True))
        configure_logging()
        return raw

    yield swap
    monkeypatch.undo()
    configure_logging()


def written(raw: io.BytesIO) -> list[dict[str, object]]:
    sys.stderr.flush()
    return [json.loads(line) for line in raw.getvalue().decode().splitlines()]


def log_three_ways() -> None:
    structlog.get_logger("test.own").info("own_line")
    Lines("test.lines").info("fast_line")
    logging.getLogger("test.foreign").warning("foreign_line")


def test_lines_inside_a_recording_span_carry_its_ids(lines: Callable[[], io.BytesIO]) -> None:
    raw = lines()
    with traced(), tracer().start_as_current_span("work") as span:
        log_three_ways()
        context = span.get_span_context()
    got = written(raw)
    assert [line["event"] for line in got] == ["own_line", "fast_line", "foreign_line"]
    for line in got:
        assert line["trace_id"] == trace.format_trace_id(context.trace_id)
        assert line["span_id"] == trace.format_span_id(context.span_id)


def test_nothing_is_added_outside_a_recording_span(lines: Callable[[], io.BytesIO]) -> None:
    raw = lines()
    unsampled = NonRecordingSpan(
        SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, False, TraceFlags(0))
    )
    with traced():
        log_three_ways()  # no span
        with trace.use_span(unsampled):
            log_three_ways()  # a span, not sampled: nothing records it
    with tracer().start_as_current_span("untraced"):  # the process does not trace
        assert not TRACING.on
        log_three_ways()
    got = written(raw)
    assert len(got) == 9
    assert not [line for line in got if "trace_id" in line or "span_id" in line]
