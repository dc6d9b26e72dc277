"""A log line carries outside text (an endpoint's reply, a request's value) with every character a
terminal tailing the log would act on escaped, and is still the same JSON."""

from __future__ import annotations

import json
from typing import Any

from service.logging import _json


def test_a_log_line_escapes_what_a_terminal_would_act_on() -> None:
    event = {"event": "x", "error": "HTTP 400: \x1b]0;owned\x07\x9b2J\u202eevil\x7f 😀"}
    line = _json(event)
    assert json.loads(line) == event
    text = line.decode()
    assert not any(c in text for c in ("\x1b", "\x07", "\x9b", "\u202e", "\x7f"))
    assert "😀" in text  # the rest of the text as it came


def test_our_own_line_is_the_chain_of_structlog_processors_it_stands_for() -> None:
    import datetime
    import uuid

    import structlog

    from service.logging import _SHARED, _own_line, _StderrLogger

    def chained(event_dict: dict[str, object]) -> bytes:
        for processor in [*_SHARED, structlog.processors.format_exc_info]:
            event_dict = processor(logger, "exception", event_dict)  # type: ignore[operator]
        rendered = structlog.processors.JSONRenderer(serializer=_json)(logger, "exception", event_dict)
        assert isinstance(rendered, bytes)
        return rendered

    logger = _StderrLogger("service.test")
    try:
        raise ZeroDivisionError("x")
    except ZeroDivisionError as error:
        event = {"a": uuid.UUID(int=1), "at": datetime.datetime(2026, 1, 1), "exc_info": error, "event": "e"}
    structlog.contextvars.bind_contextvars(request="r-1")
    try:
        ours, theirs = _own_line(logger, "exception", dict(event)), chained(dict(event))
    finally:
        structlog.contextvars.clear_contextvars()
    stamp = json.loads(ours)["timestamp"]
    assert json.loads(ours)["request"] == "r-1" and "ZeroDivisionError" in json.loads(ours)["exception"]
    assert ours == theirs.replace(json.loads(theirs)["timestamp"].encode(), stamp.encode())


def test_a_line_of_the_per_call_path_is_the_line_structlog_writes() -> None:
    import io
    import logging
    import sys

    import structlog

    import service.logging as service_logging
    from service.logging import Lines, configure_logging

    def written(log: Any) -> dict[str, Any]:
        raw_stream = io.BytesIO()
        stream = io.TextIOWrapper(raw_stream, write_through=True)
        saved, sys.stderr = sys.stderr, stream
        try:
            log.info("tool_call", tool_call_id="c-1", outcome="accepted", replayed=False, n=None)
        finally:
            sys.stderr = saved
        raw = raw_stream.getvalue()
        return {"raw": raw, "lines": raw.count(b"\n")}

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    structlog.contextvars.bind_contextvars(request="r-1")
    try:
        configure_logging(logging.INFO)
        ours = written(Lines("service.tool_calls"))
        theirs = written(structlog.get_logger("service.tool_calls"))
        configure_logging(logging.WARNING)
        quiet = written(Lines("service.tool_calls"))
    finally:
        structlog.contextvars.clear_contextvars()
        structlog.reset_defaults()
        service_logging._LEVEL = None
        root.handlers[:], root.level = handlers, level
    assert ours["lines"] == theirs["lines"] == 1
    stamp = json.loads(ours["raw"])["timestamp"]
    assert ours["raw"] == theirs["raw"].replace(
        json.loads(theirs["raw"])["timestamp"].encode(), stamp.encode()
    )
    assert list(json.loads(ours["raw"])) == [
        "tool_call_id",
        "outcome",
        "replayed",
        "n",
        "event",
        "request",
        "level",
        "logger",
        "timestamp",
    ]
    assert quiet["lines"] == 0
