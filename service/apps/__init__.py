"""The MiniApps: each is one folder here, ``service/apps/<app>/``, and nothing outside it names it.

A folder holds the app's ``manifest.json`` (what the Agent and the Host see: its surface, its Tools'
names, descriptions and input schemas, its features and lifecycle), its decision functions in SQL
(``*.sql``: applied with the database code, after ``service/db/sql/``), when it offers Tools
``registration.py``, whose ``REGISTRATIONS`` say how each Tool runs (``service.tools``), with the
types of its answers beside it, and when it is a ``workspace`` app its page: ``surface/``
(``index.html`` and the files it loads), which the Web Host serves at ``/apps/<app>/``.

The folders here are the default app set (``APPS_DIR``: the settings' ``MANIFESTS_DIR``); an app
may be a folder of the same shape anywhere else (``APP_FOLDERS``). Which apps a process runs is the
registry's to say (``service.manifests.registry_of``), built once at start from the settings and
handed to everything else: this module knows the shape of one folder, never a list of apps.

``problems`` and ``surface_problems`` are the checks every load makes (so ``serve`` refuses to
start, and CI fails, before any call): each registration's ``decide`` is a function of its app's
SQL; every outcome word that function can answer with is one the registration knows, and every word
the registration knows is one it can answer with; every answer that is not a refusal has a documented
type under its word (``answers=``), and ``answers=`` names no other word; a ``workspace`` app's entry
is ``/apps/<app>/`` and its ``surface/index.html`` is there, and a ``builtin`` app has no surface.
The checks speak outcome words and their kinds, never an HTTP status (the faces name it).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import typing
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from service.tools import Registration

APPS_DIR = Path(__file__).resolve().parent
MANIFEST = "manifest.json"
REGISTRATION = "registration.py"
SURFACE = "surface"
PAGE = "index.html"

# An assignment of the decision's outcome: a literal word, so that it can be checked here.
_OUTCOME = re.compile(r"\boutcome\s*:=\s*([^;]+);")
_WORD = re.compile(r"^'([a-z_]+)'$")


def folders(root: Path) -> list[Path]:
    """The app folders under ``root`` (a directory of app folders), in name order."""
    return sorted(p.parent for p in root.glob(f"*/{MANIFEST}"))


def entry(scope: str) -> str:
    """Where the Web Host serves a ``workspace`` app's page (its manifest's ``surface.entry``)."""
    return f"/apps/{scope}/"


def surface_problems(folder: Path, scope: str, kind: str, declared: str | None) -> list[str]:
    """Where the app's surface (``kind``, entry ``declared``) and its folder disagree."""
    found: list[str] = []
    has_surface = (folder / SURFACE).exists()
    if kind == "workspace":
        if declared != entry(scope):
            found.append(f"a workspace app's entry is {entry(scope)!r}, not {declared!r}")
        if not (folder / SURFACE / PAGE).is_file():
            found.append(f"a workspace app's page {SURFACE}/{PAGE} is missing from {folder.name}/")
    elif has_surface or declared is not None:
        found.append(f"a {kind} app has no page of its own: no {SURFACE}/ folder, no entry")
    return found


def sql_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.sql"))


def registrations(folder: Path) -> tuple[Registration, ...]:
    """The app's ``REGISTRATIONS`` (none without a ``registration.py``)."""
    path = folder / REGISTRATION
    if not path.is_file():
        return ()
    found = getattr(_module(path), "REGISTRATIONS", None)
    if not isinstance(found, tuple) or not all(isinstance(r, Registration) for r in found):
        raise TypeError(f"{path}: REGISTRATIONS must be a tuple of service.tools.Registration")
    return found


def _module(path: Path) -> ModuleType:
    if path.parent.parent == APPS_DIR:  # a shipped app: an ordinary package of the service
        return importlib.import_module(f"{__name__}.{path.parent.name}.registration")
    spec = importlib.util.spec_from_file_location(f"lineup_app_{path.parent.name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def problems(folder: Path, known: Iterable[Registration], shared: Iterable[str]) -> list[str]:
    """Where the app's registrations and its SQL disagree (``shared``: the outcome words every Tool
    may answer with, such as ``idempotency_key_reused``). Words and kinds only: no HTTP status."""
    from service.db.code import definitions
    from service.domain.outcomes import Accepted, Answered

    functions = {d.name: d.sql for d in definitions(folder, ()) if d.kind == "function"}
    shared = set(shared)
    found: list[str] = []
    for registration in known:
        name = registration.name
        body = functions.get(registration.decide)
        if body is None:
            found.append(
                f"{name}: its decision {registration.decide}() is not defined in {folder.name}/*.sql"
            )
            continue
        answered: set[str] = set()
        checkable = True
        for expression in _OUTCOME.findall(body):
            word = _WORD.match(expression.strip())
            if word is None:
                found.append(
                    f"{name}: {registration.decide}() sets its outcome to {expression.strip()!r};"
                    " an outcome is a literal word, so that it can be checked"
                )
                checkable = False
                continue
            answered.add(word[1])
            if word[1] not in registration.outcomes and word[1] not in shared:
                found.append(
                    f"{name}: {registration.decide}() can answer {word[1]!r}, which its registration"
                    " does not know"
                )
        for outcome, kind in registration.outcomes.items():
            if checkable and outcome not in answered:
                found.append(
                    f"{name}: its registration knows {outcome!r}, which {registration.decide}() never answers"
                )
            if kind not in (Accepted, Answered):
                continue  # a refusal: the contract's error body
            answer = registration.answers.get(outcome)
            if answer is None or not _documented(answer):
                found.append(f"{name}: its {outcome!r} answer has no type with a schema (answers=)")
        for keyed in registration.answers:
            of = registration.outcomes.get(keyed)
            if of is None:
                found.append(
                    f"{name}: its answers= names {keyed!r}, which is none of its outcome words"
                    f" ({', '.join(registration.outcomes)}); answers= maps an outcome word to its"
                    " answer's type"
                )
            elif of not in (Accepted, Answered):
                found.append(
                    f"{name}: its answers= names {keyed!r}, a refusal ({of.__name__}): a refusal"
                    " answers the contract's error body, not a type of its own"
                )
    return found


def _documented(answer: object) -> bool:
    """A TypedDict, or a union of them: what the OpenAPI document can show."""
    members = typing.get_args(answer) or (answer,)
    return all(typing.is_typeddict(member) for member in members)
