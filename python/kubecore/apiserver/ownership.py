"""Field ownership of API requests: which manager a write belongs to, and its managedFields.

The REST handlers call in at two points — ``track_create`` after a create is prepared and
``track_update`` after an update/patch/status write is prepared, both before admission (as
upstream, fields that admission plugins set belong to nobody) — and run server-side apply
through ``apply``. The bookkeeping itself is kubecore.api.fieldmanager.

The manager is the ``fieldManager`` query parameter, else the User-Agent up to its first ``/``
(``kubectl/v1.37.1 ...`` -> ``kubectl``; the Python client's ``OpenAPI-Generator/...`` ->
``OpenAPI-Generator``), else ``unknown``. A bad ``fieldManager`` (over 128 bytes, unprintable
characters), a missing one on apply, or ``force`` on a non-apply patch is 422 Invalid on the
request's options kind (CreateOptions, UpdateOptions, PatchOptions), as upstream.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kubecore.api import errors, meta
from kubecore.api.errors import FieldError
from kubecore.api.fieldmanager import FieldManager
from kubecore.api.registry import BUILTIN_TYPES, ResourceType
from kubecore.api.typefacts import SchemaFacts
from kubecore.apiserver import patch as patching

__all__ = ["is_apply", "manager_for", "field_manager", "track_create", "track_update", "read_apply", "apply"]

Obj = dict[str, Any]
MAX_MANAGER_BYTES = 128
_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
_BUILTIN = frozenset((rt.group, rt.version, rt.resource) for rt in BUILTIN_TYPES)
_MANAGERS: dict[tuple[str, str, str, str, bool, int], FieldManager] = {}


def is_apply(request: web.Request) -> bool:
    return request.method == "PATCH" and request.content_type == patching.APPLY_PATCH


def _manager_errors(name: str) -> list[FieldError]:
    """ValidateFieldManager."""
    errs: list[FieldError] = []
    if len(name.encode()) > MAX_MANAGER_BYTES:
        errs.append(FieldError("FieldValueTooLong", "fieldManager",
                               f"Too long: may not be more than {MAX_MANAGER_BYTES} bytes"))
    for i, ch in enumerate(name):
        if not ch.isprintable() and ch != " ":
            errs.append(FieldError.invalid("fieldManager", name,
                                           f"invalid character U+{ord(ch):04X} (at position {i})"))
    return errs


def _validated_manager(request: web.Request) -> str:
    """The request's fieldManager after upstream's Create/Update/PatchOptions checks."""
    kind = _OPTIONS_KIND.get(request.method, "UpdateOptions")
    name = request.query.get("fieldManager", "")
    errs: list[FieldError] = []
    if kind == "PatchOptions":
        if is_apply(request):
            if not name:
                errs.append(FieldError.required("fieldManager", "is required for apply patch"))
        elif "force" in request.query:
            errs.append(FieldError.forbidden("force", "may not be specified for non-apply patch"))
    errs.extend(_manager_errors(name))
    if errs:
        raise errors.invalid(("meta.k8s.io", kind), "", errs)
    return name


def prefix_from_user_agent(agent: str) -> str:
    """The User-Agent up to its first '/', printable characters only, at most 128 bytes."""
    out, size = [], 0
    for ch in agent.split("/", 1)[0]:
        if not ch.isprintable() and ch != " ":
            continue
        size += len(ch.encode())
        if size > MAX_MANAGER_BYTES:
            break
        out.append(ch)
    return "".join(out)


_AGENT_PREFIXES: dict[str, str] = {}  # User-Agent -> its manager name: clients send the same one on every request


def manager_for(request: web.Request) -> str:
    """managerOrUserAgent (validating the options first)."""
    name = _validated_manager(request)
    if name:
        return name
    agent = request.headers.get("User-Agent", "")
    prefix = _AGENT_PREFIXES.get(agent)
    if prefix is None:
        if len(_AGENT_PREFIXES) >= 1024:
            _AGENT_PREFIXES.clear()
        prefix = _AGENT_PREFIXES[agent] = prefix_from_user_agent(agent)
    return prefix


def _force(request: web.Request) -> bool:
    value = request.query.get("force", "")
    if value in ("", "0", "f", "F", "false", "FALSE", "False"):
        return False
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def field_manager(rt: ResourceType, subresource: str = "") -> FieldManager:
    """The (cached) field manager of an endpoint. Custom resources read list and map types from
    their schema (none: untyped, lists atomic)."""
    typed = (rt.group, rt.version, rt.resource) in _BUILTIN
    key = (rt.group, rt.version, rt.kind, subresource, typed, id(rt.schema))
    fm = _MANAGERS.get(key)
    if fm is None or fm.facts_source is not rt.schema:
        if len(_MANAGERS) > 512:
            _MANAGERS.clear()
        facts = SchemaFacts(rt.group, rt.kind, rt.schema) if rt.schema is not None and not typed else None
        fm = _MANAGERS[key] = FieldManager(group=rt.group, version=rt.version, kind=rt.kind, subresource=subresource,
                                           has_status="status" in rt.subresources,
                                           typed=typed or rt.schema is not None, facts=facts)
        fm.facts_source = rt.schema
    return fm


def track_create(request: web.Request, rt: ResourceType, obj: Obj) -> None:
    """Records the creating manager's fields in obj.metadata.managedFields (not for apply,
    which recorded them already). For built-in kinds the entries may be set as encoded JSON
    (`msgspec.Raw`, see FieldManager.create): nothing on the create path reads them before the
    object is encoded; custom resources keep decoded entries (their schema checks walk the object)."""
    if not is_apply(request):
        field_manager(rt).create(obj, manager_for(request), now=meta.now_rfc3339(), raw=not rt.crd)


def track_update(request: web.Request, rt: ResourceType, subresource: str, old: Obj, new: Obj) -> None:
    """Records an update's fields in new.metadata.managedFields (not for apply)."""
    if not is_apply(request):
        field_manager(rt, subresource).update(old, new, manager_for(request), now=meta.now_rfc3339())


async def read_apply(request: web.Request, *, max_body: int) -> Obj:
    """The applied configuration (YAML or JSON body); validates the patch options first."""
    _validated_manager(request)
    if request.content_length is not None and request.content_length > max_body:
        raise errors.request_too_large(f"the request body is larger than {max_body // (1024 * 1024)} MiB")
    raw = await request.read()
    if len(raw) > max_body:
        raise errors.request_too_large(f"the request body is larger than {max_body // (1024 * 1024)} MiB")
    return patching.decode_apply(raw)


def apply(request: web.Request, rt: ResourceType, subresource: str, live: Obj | None, config: Obj) -> Obj:
    """The object after the request's manager applied `config` to `live` (None: create)."""
    fm = field_manager(rt, subresource)
    return fm.apply(live, config, manager_for(request), force=_force(request), now=meta.now_rfc3339())
