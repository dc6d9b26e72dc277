"""scripts/system-deps.sh, the step `make test` and .ci/run share: where it may not install (no
apt-get, or not root) it names what is missing and lets the suite go on; the tests that need the
missing piece skip and say why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system-deps.sh"


def run(args: list[str], path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(SCRIPT), *args],
        env={"PATH": str(path), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def a_path_without_apt(tmp_path: Path) -> Path:
    """A PATH with the few programs the script calls, apt-get not among them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("id", "dpkg"):
        found = shutil.which(name)
        if found:
            os.symlink(found, bin_dir / name)
    return bin_dir


def test_without_apt_get_it_names_what_is_missing_and_does_not_fail(tmp_path: Path) -> None:
    done = run(["lineup-no-such-package"], a_path_without_apt(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "missing lineup-no-such-package" in done.stderr
    assert "no apt-get on this machine" in done.stderr
    assert "skip" in done.stderr


def test_system_deps_skip_leaves_the_system_alone(tmp_path: Path) -> None:
    done = run(["lineup-no-such-package"], a_path_without_apt(tmp_path), SYSTEM_DEPS="skip")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_make_test_and_ci_run_the_same_step() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "\ntest: install system-deps " in makefile
    assert "@scripts/system-deps.sh" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nscripts/system-deps.sh\n" in ci
    for package in ("chromium", "nginx-light", "prometheus", "postgresql-15", "npm"):
        assert f"--no-install-recommends {package}" not in ci, package
