"""A log line carries outside text (an endpoint's reply, a request's value) with every character a
terminal tailing the log would act on escaped, and is still the same JSON."""

from __future__ import annotations

import json

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
