"""``python -m service ops`` as a process: its settings from the environment or the dev stack's
``.dev/env``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from service import dev_env
from tests.conftest import ROOT
from tests.integration.test_ops_api import add_outbox_row
from tests.support.ops_cli import outbox_row


def _service(args: list[str], cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        env={**base, "PYTHONPATH": str(ROOT), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_python_m_service_ops_requeues_all_dead_rows(database_url: str, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=25)
    done = _service(["ops", "outbox", "requeue", "--all-dead", "--json"], DATABASE_URL=database_url)
    assert done.returncode == 0, done.stderr
    # stdout is the answer alone; the write's log line, as the ops API logs it, is JSON on stderr.
    assert [row["event_id"] for row in json.loads(done.stdout)["requeued"]] == [event_id]
    assert [json.loads(line)["event"] for line in done.stderr.splitlines()] == ["outbox_recovered"]
    assert (outbox_row(db, event_id)["status"], outbox_row(db, event_id)["attempts"]) == ("pending", 0)


def test_python_m_service_ops_without_database_url_exits_2_naming_it(tmp_path: Path) -> None:
    done = _service(["ops", "stats"], cwd=tmp_path)  # no dev stack's .dev/env there either
    assert done.returncode == 2
    assert "DATABASE_URL" in done.stderr


def test_python_m_service_ops_without_database_url_uses_the_dev_stacks_settings(
    database_url: str, db: Any, tmp_path: Path
) -> None:
    event_id = add_outbox_row(db, "conv-dev", 1, "dead", attempts=25)
    (tmp_path / ".dev").mkdir()
    dev_env.write(tmp_path / ".dev", {"DATABASE_URL": database_url})
    done = _service(["ops", "outbox", "list", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [row["event_id"] for row in json.loads(done.stdout)["outbox"]] == [event_id]
    assert "using the dev stack's settings from .dev/env" in done.stderr
