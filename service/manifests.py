"""MiniApp manifests: loading, checking, and validating Tool arguments and instance state.

`load_registry` reads the manifest of every app folder it is given (a directory of app folders,
such as ``service/apps/``, or the folders themselves: ``<app>/manifest.json``, see
``service.apps``), checks it against `manifest.schema.json` and the rules a
schema cannot express (tool names carry their app's scope, scopes and tool names are unique, and
so are the provider-safe names MCP lists them under (``service.tool_names``),
embedded schemas are valid, an input schema's ``x-mcp-header`` annotations (SEP-2243) are ones
MCP clients take, a workspace app's page is in its folder: ``service.apps.
surface_problems``), takes each app's registrations from its folder and checks them against its SQL
(``service.apps.problems``), and returns an immutable `Registry`. Every problem surfaces as
`ManifestError`.

The registry is the one list of apps: ``serve``, ``migrate`` and ``ops`` build it once at start from
the folders the settings name (``registry_of``: ``MANIFESTS_DIR``'s app folders, then
``APP_FOLDERS``) and hand that object to everything that needs the apps — the database code and its
grants (``Registry.folders``), the HTTP API and its OpenAPI document, the MCP face, the console and
the Web Host. Nothing else lists apps.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from mcp.shared.inbound import find_invalid_x_mcp_header

from service import apps as app_folders
from service.app_manifest import (
    FORMAT_CHECKER,
    INSTANCE_STATE_FEATURE,
    RESOURCE_MAX_BYTES,
    AppManifest,
    AppResource,
    InstanceStateFeature,
    Lifecycle,
    McpApp,
    ToolSpec,
)
from service.domain.outcomes import SHARED_OUTCOMES
from service.json_errors import json_path
from service.tool_names import ToolNameError, listed_name, listed_names
from service.tools import Registration

if TYPE_CHECKING:
    from service.settings import Settings

SCHEMA_FILE_NAME = "manifest.schema.json"
REQUIRED_APP = "interact"
_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_META_VALIDATOR = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=FORMAT_CHECKER)

# Keywords whose value is one subschema / a list of them / a name → subschema map.
_SUBSCHEMA = (
    "additionalProperties",
    "contains",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")


class ManifestError(Exception):
    """A manifest (or the manifest directory) that the Runtime refuses to run with."""

    def __init__(self, file: str, path: str, reason: str) -> None:
        super().__init__(f"{file}: {path}: {reason}")
        self.file = file
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Registry:
    """The apps and Tools of the manifests, each Tool with its registration (``service.tools``)."""

    apps: Mapping[str, AppManifest]
    tools: Mapping[str, ToolSpec]
    runners: Mapping[str, Registration] = field(default_factory=dict)
    kinds: Mapping[str, type] = field(default_factory=dict)  # every outcome word -> its kind
    # The app folders it was loaded from, in load order: their SQL is the apps' database code.
    folders: tuple[Path, ...] = ()

    def tool(self, name: str) -> ToolSpec | None:
        return self.tools.get(name)

    def runner(self, name: str) -> Registration:
        return self.runners[name]

    def kind_of(self, outcome: str) -> type:
        return self.kinds[outcome]

    def unregistered(self) -> list[str]:
        """Tools the manifests declare that nothing here can run (``serve`` refuses to start)."""
        return sorted(set(self.tools) - set(self.runners))

    def app(self, scope: str) -> AppManifest | None:
        return self.apps.get(scope)

    def public_tools(self) -> list[dict[str, Any]]:
        return [self.tools[name].public() for name in sorted(self.tools)]


def load_registry(
    source: Path | Sequence[Path], registrations: Iterable[Registration] | None = None
) -> Registry:
    """Load and check the apps of ``source``: a directory of app folders (``*/manifest.json``,
    such as ``MANIFESTS_DIR``), or the app folders themselves, in order. Each Tool gets the
    registration of its folder — or, when ``registrations`` are given, one of those."""
    if isinstance(source, Path):
        if not source.is_dir():
            raise ManifestError(str(source), "$", "apps directory does not exist")
        manifest_schema = _load_manifest_schema(source)
        folders = app_folders.folders(source)
        where = str(source)
    else:
        manifest_schema = _load_manifest_schema(app_folders.APPS_DIR)
        folders = list(source)
        where = ", ".join(str(folder) for folder in folders) or "(no app folders)"
        for folder in folders:
            if not (folder / app_folders.MANIFEST).is_file():
                raise ManifestError(str(folder), "$", f"not an app folder: no {app_folders.MANIFEST}")
    if not folders:
        raise ManifestError(where, "$", f"no apps (*/{app_folders.MANIFEST}) found")

    apps: dict[str, AppManifest] = {}
    tools: dict[str, ToolSpec] = {}
    listed: dict[str, str] = {}  # the provider-safe names MCP lists (service.tool_names)
    served: dict[str, str] = {}  # each app resource's URI -> its app's scope
    found: list[Registration] = []
    for folder in folders:
        app = _load_manifest(folder / app_folders.MANIFEST, manifest_schema)
        if app.app_scope in apps:
            other = apps[app.app_scope].file
            _fail(app.file, "$.app_scope", f"duplicate app_scope {app.app_scope!r} (also in {other})")
        for index, tool in enumerate(app.tools):
            if tool.name in tools:
                other = apps[tools[tool.name].app_scope].file
                _fail(
                    app.file, f"$.tools[{index}].name", f"duplicate tool name {tool.name!r} (also in {other})"
                )
            try:
                listed_names([*listed.values(), tool.name])
            except ToolNameError as error:
                _fail(app.file, f"$.tools[{index}].name", f"{error} (MCP lists tools under such names)")
            listed[listed_name(tool.name)] = tool.name
            tools[tool.name] = tool
        for index, resource in enumerate(app.resources):
            if resource.uri in served:
                _fail(
                    app.file,
                    f"$.resources[{index}].uri",
                    f"duplicate resource uri {resource.uri!r} (also in {apps[served[resource.uri]].file})",
                )
            served[resource.uri] = app.app_scope
        apps[app.app_scope] = app
        if registrations is None:
            found.extend(_registrations_of(folder, app))

    if REQUIRED_APP not in apps:
        raise ManifestError(where, "$", f"the {REQUIRED_APP!r} app manifest is required but missing")
    known = {r.name: r for r in (found if registrations is None else registrations)}
    runners = {name: known[name] for name in tools if name in known}
    return Registry(
        apps=MappingProxyType(apps),
        tools=MappingProxyType(tools),
        runners=MappingProxyType(runners),
        kinds=MappingProxyType(_outcome_kinds(runners.values())),
        folders=tuple(folders),
    )


def registry_of(settings: Settings) -> Registry:
    """The registry of the app folders the settings name (``Settings.apps``): built once at start
    by each command and handed to everything that needs the apps."""
    return load_registry(settings.apps)


def _registrations_of(folder: Path, app: AppManifest) -> tuple[Registration, ...]:
    """The folder's registrations, each of a Tool its manifest declares and agreeing with its SQL."""
    found = app_folders.registrations(folder)
    declared = {tool.name for tool in app.tools}
    for registration in found:
        if registration.name not in declared:
            _fail(app.file, "$.tools", f"{registration.name} is registered but not declared here")
    if problems := app_folders.problems(folder, found, SHARED_OUTCOMES):
        _fail(str(folder), "$", "; ".join(problems))
    return found


def _outcome_kinds(registrations: Iterable[Registration]) -> dict[str, type]:
    kinds = dict(SHARED_OUTCOMES)
    for registration in registrations:
        for outcome, kind in registration.outcomes.items():
            if kinds.setdefault(outcome, kind) is not kind:
                raise ValueError(f"{registration.name}: the outcome {outcome!r} is another kind elsewhere")
    return kinds


# --- loading ---------------------------------------------------------------------------------


def _load_manifest_schema(directory: Path) -> Draft202012Validator:
    path = directory / SCHEMA_FILE_NAME
    if not path.is_file():
        path = app_folders.APPS_DIR / SCHEMA_FILE_NAME
    schema = _read_json(path)
    _check_schema(str(path), "$", schema)
    return Draft202012Validator(schema)


def _load_manifest(path: Path, manifest_schema: Draft202012Validator) -> AppManifest:
    file = str(path)
    doc = _read_json(path)
    try:
        error = best_match(manifest_schema.iter_errors(doc))
    except RecursionError:
        _fail(file, "$", "manifest is nested too deeply")
    if error is not None:
        _fail(file, json_path("$", error.absolute_path), error.message)

    scope: str = doc["app_scope"]
    tools: list[ToolSpec] = []
    seen: set[str] = set()
    for index, raw in enumerate(doc["tools"]):
        where = f"$.tools[{index}]"
        name: str = raw["name"]
        if not name.startswith(scope + "."):
            _fail(file, f"{where}.name", f"tool name {name!r} must start with {scope + '.'!r}")
        if name in seen:
            _fail(file, f"{where}.name", f"duplicate tool name {name!r}")
        seen.add(name)
        schema = _embedded_schema(file, f"{where}.input_schema", raw["input_schema"], False)
        forms = {
            key: _form(file, json_path(where, ["forms", key]), form)
            for key, form in raw.get("forms", {}).items()
        }
        _check_mcp_headers(file, f"{where}.input_schema", schema)
        tools.append(
            ToolSpec(
                name=name,
                app_scope=scope,
                kind=raw["kind"],
                description=raw["description"],
                input_schema=schema,
                input_rounds=_input_rounds(file, where, raw.get("input_rounds", ()), schema),
                forms=forms,
                await_in_call_seconds=raw.get("operation", {}).get("await_in_call_seconds"),
            )
        )

    instance_state: InstanceStateFeature | None = None
    feature = doc.get("features", {}).get(INSTANCE_STATE_FEATURE)
    if feature is not None:
        where = json_path("$", ["features", INSTANCE_STATE_FEATURE, "state_schema"])
        instance_state = InstanceStateFeature(
            state_schema_version=feature["state_schema_version"],
            state_schema=_embedded_schema(file, where, feature["state_schema"], True),
            max_bytes=feature["max_bytes"],
            retention=feature["retention"],
        )

    surface = doc["surface"]
    folder = path.parent
    if problems := app_folders.surface_problems(folder, scope, surface["kind"], surface.get("entry")):
        _fail(file, "$.surface", "; ".join(problems))
    lifecycle = doc.get("lifecycle", {})
    mcp_app = _mcp_app(file, scope, surface, tools)
    return AppManifest(
        app_scope=scope,
        name=doc["name"],
        description=doc["description"],
        surface_kind=surface["kind"],
        entry=surface.get("entry"),
        tools=tuple(tools),
        instance_state=instance_state,
        file=file,
        lifecycle=Lifecycle(**lifecycle),
        surface=folder / app_folders.SURFACE if surface["kind"] == "workspace" else None,
        mcp_app=mcp_app,
        resources=_resources(file, folder, doc.get("resources", [])),
    )


#: The folder of an app's files that it serves as MCP resources (its manifest's ``resources``).
RESOURCES = "resources"


def _resources(file: str, folder: Path, declared: list[dict[str, Any]]) -> tuple[AppResource, ...]:
    """The files the app serves as MCP resources: each in its folder's ``resources/``, at most
    ``RESOURCE_MAX_BYTES``, valid UTF-8 when its type is a text type, its URI unique in the app."""
    found: list[AppResource] = []
    for index, raw in enumerate(declared):
        where = f"$.resources[{index}]"
        path = folder / RESOURCES / raw["file"]
        if not path.is_file():
            _fail(file, f"{where}.file", f"{RESOURCES}/{raw['file']} is not a file of the app's folder")
        if path.stat().st_size > RESOURCE_MAX_BYTES:
            _fail(
                file, f"{where}.file", f"{RESOURCES}/{raw['file']} is larger than {RESOURCE_MAX_BYTES} bytes"
            )
        if raw["uri"] in {resource.uri for resource in found}:
            _fail(file, f"{where}.uri", f"duplicate resource uri {raw['uri']!r}")
        resource = AppResource(
            uri=raw["uri"],
            name=raw["name"],
            title=raw.get("title"),
            description=raw["description"],
            mime_type=raw["mime_type"],
            path=path,
        )
        if resource.is_text:
            try:
                path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                _fail(
                    file,
                    f"{where}.file",
                    f"{RESOURCES}/{raw['file']} is {raw['mime_type']}, so UTF-8 text, and is not",
                )
        found.append(resource)
    return tuple(found)


def _mcp_app(file: str, scope: str, surface: dict[str, Any], tools: list[ToolSpec]) -> McpApp | None:
    """The app's page as an MCP App, when it declares one: a workspace app's, its resource under
    ``ui://<app>/``, rendered beside one of its own Tools."""
    declared = surface.get("mcp_app")
    if declared is None:
        return None
    where = "$.surface.mcp_app"
    if surface["kind"] != "workspace":
        _fail(file, where, "only a workspace app's page can be an MCP App")
    if not declared["uri"].startswith(f"ui://{scope}/"):
        _fail(file, f"{where}.uri", f"an app's MCP App is under ui://{scope}/, not {declared['uri']!r}")
    if declared["tool"] not in {tool.name for tool in tools}:
        _fail(file, f"{where}.tool", f"{declared['tool']!r} is not a Tool of this app")
    return McpApp(
        uri=declared["uri"],
        name=declared["name"],
        title=declared["title"],
        description=declared["description"],
        tool=declared["tool"],
        operation=declared.get("operation", "operation"),
        tool_descriptions=MappingProxyType(dict(declared.get("tool_descriptions", {}))),
    )


def _read_json(path: Path) -> Any:
    file = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        _fail(file, "$", f"cannot read file: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        _fail(file, "$", f"not UTF-8: {exc.reason} at byte {exc.start}")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        _fail(file, "$", f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
    except ValueError as exc:
        _fail(file, "$", f"invalid JSON: {exc}")
    except RecursionError:
        _fail(file, "$", "invalid JSON: nested too deeply")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _input_rounds(
    file: str, where: str, rounds: list[dict[str, dict[str, Any]]], input_schema: dict[str, Any]
) -> tuple[dict[str, dict[str, Any]], ...]:
    """A Tool's ``input_rounds`` (shape checked by the manifest schema): each form's
    ``requestedSchema`` checked as any embedded schema, with no ``{"$argument": …}`` in it; each
    ``{"$argument": name}`` elsewhere in a request's params names a string argument the input
    schema requires (so every call has it, of the type a request's text takes)."""
    properties = input_schema.get("properties", {})
    required = {
        name
        for name in input_schema.get("required", ())
        if isinstance(properties.get(name), dict) and properties[name].get("type") == "string"
    }
    for index, asked in enumerate(rounds):
        for key, request in asked.items():
            here = f"{where}.input_rounds[{index}].{key}.params"
            params = request["params"]
            if request["method"] == "elicitation/create":
                _embedded_schema(file, f"{here}.requestedSchema", params["requestedSchema"], True)
                if _argument_references(params["requestedSchema"], "$"):
                    _fail(file, f"{here}.requestedSchema", "a form's schema cannot stand for an argument")
            for path, name in _argument_references(params, here):
                if name not in required:
                    _fail(
                        file,
                        path,
                        f"{{'$argument': {name!r}}} names no string argument the input schema requires",
                    )
    return tuple(copy.deepcopy(asked) for asked in rounds)


def _argument_references(value: Any, where: str) -> list[tuple[str, object]]:
    """Each ``{"$argument": name}`` in ``value``, with where it is."""
    if isinstance(value, dict):
        if set(value) == {"$argument"}:
            return [(where, value["$argument"])]
        return [
            found for key, item in value.items() for found in _argument_references(item, f"{where}.{key}")
        ]
    if isinstance(value, list):
        return [
            found for i, item in enumerate(value) for found in _argument_references(item, f"{where}[{i}]")
        ]
    return []


def _embedded_schema(file: str, where: str, schema: dict[str, Any], asserts_format: bool) -> dict[str, Any]:
    """Check an input_schema / state_schema: valid 2020-12, self-contained, formats checkable."""
    dialect = schema.get("$schema", _DIALECT)
    if dialect != _DIALECT:
        _fail(
            file, json_path(where, ["$schema"]), f"only JSON Schema draft 2020-12 ({_DIALECT}) is supported"
        )
    _check_schema(file, where, schema)
    for path, subschema in _subschemas(schema, ()):
        here = json_path(where, path)
        for keyword in ("$id", "$dynamicRef", "$recursiveRef"):
            if keyword in subschema:
                _fail(file, here, f"{keyword} is not supported in an embedded schema")
        if "$schema" in subschema and path:
            _fail(file, here, "$schema is allowed only at the root of an embedded schema")
        ref = subschema.get("$ref")
        if ref is not None and not _resolves_locally(schema, ref):
            _fail(file, json_path(here, ["$ref"]), f"$ref {ref!r} must point inside this schema (#/...)")
        fmt = subschema.get("format")
        if asserts_format and isinstance(fmt, str) and fmt not in FORMAT_CHECKER.checkers:
            _fail(file, f"{here}.format", f"format {fmt!r} cannot be asserted by this runtime")
    return copy.deepcopy(schema)


def _form(file: str, where: str, form: dict[str, Any]) -> dict[str, Any]:
    """Check a Tool's form (MCP elicitation's restricted schema, which ``manifest.schema.json``
    states) for what that cannot: its required names are its properties, a legacy ``enumNames``
    names every ``enum`` value, and every default is a valid value of its own property."""
    _check_schema(file, where, form)
    properties: dict[str, Any] = form["properties"]
    for name in form.get("required", []):
        if name not in properties:
            _fail(file, json_path(where, ["required"]), f"required {name!r} is not a property of the form")
    for name, prop in properties.items():
        here = json_path(where, ["properties", name])
        if "enumNames" in prop and len(prop["enumNames"]) != len(prop["enum"]):
            _fail(file, json_path(here, ["enumNames"]), "enumNames must name each enum value, in order")
        if "default" in prop and not Draft202012Validator(prop).is_valid(prop["default"]):
            _fail(file, json_path(here, ["default"]), f"default {prop['default']!r} is not a valid value")
    return copy.deepcopy(form)


def _check_mcp_headers(file: str, where: str, schema: dict[str, Any]) -> None:
    """A Tool's arguments mirrored as ``Mcp-Param-*`` headers (SEP-2243: a property annotated
    ``x-mcp-header``) must be annotated as MCP clients take them — on a string, integer or boolean
    property reached through ``properties`` alone, each an HTTP token, none twice — for a client
    drops a tool whose annotation is invalid, and the server could check nothing against it. The
    rule is the SDK's, the one its server checks the headers by."""
    problem = find_invalid_x_mcp_header(schema)
    if problem is not None:
        _fail(file, where, problem)


def _check_schema(file: str, where: str, schema: object) -> None:
    try:
        error = best_match(_META_VALIDATOR.iter_errors(schema))
    except RecursionError:
        _fail(file, where, "schema is nested too deeply")
    if error is not None:
        _fail(file, json_path(where, error.absolute_path), f"not a valid JSON Schema: {error.message}")


def _subschemas(
    schema: object, path: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], dict[str, Any]]]:
    if not isinstance(schema, dict):
        return
    yield path, schema
    for keyword in _SUBSCHEMA:
        if keyword in schema:
            yield from _subschemas(schema[keyword], (*path, keyword))
    for keyword in _SUBSCHEMA_LISTS:
        value = schema.get(keyword)
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from _subschemas(item, (*path, keyword, index))
    for keyword in _SUBSCHEMA_MAPS:
        value = schema.get(keyword)
        if isinstance(value, dict):
            for name, item in value.items():
                yield from _subschemas(item, (*path, keyword, name))


def _resolves_locally(root: dict[str, Any], ref: object) -> bool:
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        return False
    node: Any = root
    for token in ref[2:].split("/") if ref != "#" else ():
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return isinstance(node, (dict, bool))


def _fail(file: str, path: str, reason: str) -> NoReturn:
    raise ManifestError(file, path, reason)
