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
