"""The release record (``releases.toml``), the version and the changelog agree with each other and
with the repository's history: the newest recorded release's schema head and database interfaces are
those of its commit's tree, read with ``git show``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.releases import PREVIOUS_RELEASE, newest_release, recorded_releases
from service.version import __version__

ROOT = Path(__file__).resolve().parents[2]
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


def _key(version: str) -> tuple[int, ...]:
    found = SEMVER.match(version)
    assert found is not None, f"{version!r} is not a release version (MAJOR.MINOR.PATCH)"
    return tuple(int(part) for part in found.groups())


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)


def _show(commit: str, path: str) -> str:
    shown = _git("show", f"{commit}:{path}")
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def _commit_or_skip(commit: str) -> None:
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0:
        return
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip(f"a shallow clone lacks the release commit {commit[:12]}: git fetch --unshallow")
    pytest.fail(f"releases.toml names {commit}, which is no commit of this repository")


def _schema_head(commit: str) -> str:
    """The Alembic head of ``commit``'s tree: the one revision no other revises."""
    listed = _git("ls-tree", "--name-only", f"{commit}:migrations/versions")
    assert listed.returncode == 0, listed.stderr
    revisions: set[str] = set()
    revised: set[str] = set()
    for name in listed.stdout.split():
        if not name.endswith(".py"):
            continue
        text = _show(commit, f"migrations/versions/{name}")
        revision = re.search(r'^revision(?:: str)? = "([^"]+)"', text, re.MULTILINE)
        down = re.search(r'^down_revision(?:: [^=]+)? = "([^"]+)"', text, re.MULTILINE)
        assert revision is not None, name
        revisions.add(revision.group(1))
        if down is not None:
            revised.add(down.group(1))
    heads = revisions - revised
    assert len(heads) == 1, f"{commit[:12]} has {len(heads)} heads: {sorted(heads)}"
    return heads.pop()


def test_the_newest_release_records_its_commits_schema_head_and_interfaces() -> None:
    release = newest_release()
    _commit_or_skip(release.commit)
    assert release.schema_head == _schema_head(release.commit)
    interface = re.search(r"^INTERFACE = (\d+)$", _show(release.commit, "service/db/code.py"), re.MULTILINE)
    assert interface is not None and int(interface.group(1)) == release.interface
    served = re.search(
        r"FUNCTION database_interfaces\(\).*?ARRAY\[([\d, ]+)\]",
        _show(release.commit, "service/db/sql/99_compat.sql"),
        re.DOTALL,
    )
    assert served is not None
    assert tuple(int(i) for i in served.group(1).split(",")) == release.database_interfaces
    assert release.interface in release.database_interfaces


def test_releases_are_recorded_oldest_first_and_this_tree_is_newer() -> None:
    releases = recorded_releases()
    versions = [_key(r.version) for r in releases]
    assert versions == sorted(set(versions))
    assert [r.date for r in releases] == sorted(r.date for r in releases)
    assert _key(__version__) > versions[-1]
    assert releases[-1].commit == PREVIOUS_RELEASE  # make upgrade starts from the newest


def test_the_version_has_one_source_that_every_face_reads() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        assert tomllib.load(file)["project"]["version"] == __version__
    printed = subprocess.run(
        [sys.executable, "-m", "service", "--version"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert printed.stdout.strip() == f"lineup-runtime {__version__}"
    # The image's labels: the Dockerfile's default is the version (docker build takes no file).
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"ARG VERSION={__version__}\n" in dockerfile
    assert 'org.opencontainers.image.version="${VERSION}"' in dockerfile


def test_the_changelog_has_a_section_for_this_version_and_every_recorded_release() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert headings[0] == "Unreleased" or _key(headings[0]) == _key(__version__)
    for release in recorded_releases():
        assert f"## [{release.version}] - {release.date.isoformat()}" in changelog
