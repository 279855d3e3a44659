"""OpenAPI discovery: `/openapi/v2` (one Swagger 2.0 document) and `/openapi/v3` (an index of
group-versions, then one OpenAPI 3.0 document per group-version), with the schema of every served
kind — built-in kinds from `openapi_schema`, custom resources from their ResourceType's `schema`.

What clients read:
- kubectl `create`/`apply`/`replace` with the default --validate=strict look for the PATCH operation of
  a kind (by `x-kubernetes-group-version-kind`) with a `fieldValidation` parameter and then leave
  field validation to the server;
- `kubectl explain` reads `components.schemas` of the kind's group-version document;
- kubectl apply computes strategic merge patches from the `x-kubernetes-patch-*` extensions.

Documents are built lazily and cached per registry fingerprint (a registry change rebuilds them).
A v3 document is addressed by the hash of its bytes (`?hash=`): the current hash is served with
upstream's immutable caching headers, an old one is redirected to the current URL. Every document
carries an ETag and answers `If-None-Match` with 304.

`/openapi/v2` is negotiated as upstream's kube-openapi handler does: JSON, or gnostic's protobuf
`Document` (openapi_proto) for `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` (what
client-go's `OpenAPISchema()` sends) or its newer `...spec.v2.v1.0+protobuf` spelling, both answered
with the latter as Content-Type. Accept clauses are tried by descending q, concrete types before
wildcards, and within a clause JSON wins (`*/*` and `application/*` get JSON); nothing acceptable is a
bare 406. Both forms carry the JSON's ETag, `Last-Modified` (when the document was built) and
`Vary: Accept`, and answer `If-None-Match` / `If-Modified-Since` with 304.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

import msgspec
from aiohttp import web

from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver import openapi_proto, openapi_schema as schemas

QUERY_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")
META_KINDS = ("DeleteOptions", "Status", "WatchEvent")
YEAR_SECONDS = 365 * 24 * 3600
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
# upstream's order of preference within one Accept clause: (media type, Content-Type answered)
V2_FORMATS = (("application/json", "application/json"),
              ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", V2_PROTOBUF),
              (V2_PROTOBUF, V2_PROTOBUF))
Doc = dict[str, Any]


def gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _gvk(rt: ResourceType, kind: str = "") -> dict[str, str]:
    return {"group": rt.group, "kind": kind or rt.kind, "version": rt.version}


def _params(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}} for n in names]


def _content(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": ref}}} if ref else {"application/json": {"schema": {"type": "object"}}}


def _op(action: str, gvk: dict[str, str], ref: str, *, params: tuple[str, ...] = (), code: str = "200",
        body: dict[str, Any] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
    if params:
        op["parameters"] = _params(params)
    if body is not None:
        op["requestBody"] = {"content": body, "required": True}
    op["responses"] = {code: {"description": "OK" if code == "200" else "Created", "content": _content(ref)}}
    return op


def _item_ops(rt: ResourceType, ref: str) -> dict[str, Any]:
    gvk = _gvk(rt)
    patch_body = {t: {"schema": {"type": "object"}} for t in PATCH_TYPES}
    return {
        "get": _op("get", gvk, ref),
        "put": _op("put", gvk, ref, params=QUERY_PARAMS[:3], body=_content(ref)),
        "patch": _op("patch", gvk, ref, params=QUERY_PARAMS, body=patch_body),
        "delete": _op("delete", gvk, ""),
    }


def _collection_ops(rt: ResourceType, ref: str, list_ref: str) -> dict[str, Any]:
    gvk = _gvk(rt)
    return {
        "get": _op("list", gvk, list_ref),
        "post": _op("post", gvk, ref, params=QUERY_PARAMS[:3], code="201", body=_content(ref)),
    }


def _custom_schema(rt: ResourceType, kind: str) -> Doc:
    """A custom resource's published schema: its OpenAPI v3 schema plus its GVK."""
    out = copy.deepcopy(getattr(rt, "schema", None) or {"type": "object"})
    if kind.endswith("List") and kind != rt.kind:
        out = {"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
               "items": {"type": "array", "items": {"type": "object"}}, "metadata": {"type": "object"}}}
    out["x-kubernetes-group-version-kind"] = [_gvk(rt, kind)]
    return out


def custom_name(rt: ResourceType, kind: str) -> str:
    """Upstream's definition name of a custom kind: reversed group, version, kind."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, kind])


class Builder:
    """Assembles documents for one registry state, from the cached definitions."""

    def __init__(self, registry: Registry, *, v3: bool) -> None:
        self.registry = registry
        self.v3 = v3
        self.defs = schemas.definitions(v3)
        self.prefix = "#/components/schemas/" if v3 else "#/definitions/"

    def kind_ref(self, rt: ResourceType, kind: str, extra: dict[str, Doc]) -> str:
        """The definition name of rt's `kind` (the kind or its list), adding custom ones to `extra`."""
        msg = schemas.kind_message(rt.group, rt.version, kind)
        if msg is not None and getattr(rt, "schema", None) is None:
            return schemas.definition_name(msg)
        name = custom_name(rt, kind)
        extra[name] = _custom_schema(rt, kind)
        return name

    def paths(self, group: str, version: str, extra: dict[str, Doc]) -> dict[str, Any]:
        base = "/" + gv_path(group, version)
        paths: dict[str, Any] = {}
        for rt in self.registry.resources(group, version):
            coll = f"{base}/namespaces/{{namespace}}/{rt.resource}" if rt.namespaced else f"{base}/{rt.resource}"
            ref = self.prefix + self.kind_ref(rt, rt.kind, extra)
            list_ref = self.prefix + self.kind_ref(rt, rt.list_kind, extra)
            paths[coll] = _collection_ops(rt, ref, list_ref)
            paths[f"{coll}/{{name}}"] = _item_ops(rt, ref)
            if "status" in rt.subresources:
                paths[f"{coll}/{{name}}/status"] = _item_ops(rt, ref)
        return paths

    def schemas_for(self, roots: list[str], extra: dict[str, Doc]) -> dict[str, Doc]:
        gvs = self.registry.group_versions()
        pool = {**self.defs, **extra}
        names = schemas.closure(pool, roots + [schemas.META + k for k in META_KINDS])
        out: dict[str, Doc] = {}
        for name in sorted(names):
            d = pool[name]
            kind = name.rpartition(".")[2]
            if name.startswith(schemas.META) and kind in META_KINDS:
                d = {**d, "x-kubernetes-group-version-kind": schemas.meta_gvks(gvs, kind)}
            out[name] = d
        return out

    def v3_document(self, group: str, version: str) -> Doc:
        extra: dict[str, Doc] = {}
        paths = self.paths(group, version, extra)
        roots = sorted({s.rpartition("/")[2] for s in schemas.refs(paths)})
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "kubecore"}, "paths": paths,
                "components": {"schemas": self.schemas_for(roots, extra)}}

    def v2_document(self) -> Doc:
        extra: dict[str, Doc] = {}
        paths: dict[str, Any] = {}
        for group, version in self.registry.group_versions():
            paths.update(self.paths(group, version, extra))
        roots = sorted(set(self.defs) | set(extra))
        return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "kubecore"},
                "paths": _v2_paths(paths), "definitions": self.schemas_for(roots, extra)}


def _v2_paths(paths: dict[str, Any]) -> dict[str, Any]:
    """v3-shaped operations as Swagger 2.0 ones (parameters, body parameter, response schemas)."""
    out: dict[str, Any] = {}
    for path, ops in paths.items():
        out[path] = {}
        for method, op in ops.items():
            op2: dict[str, Any] = {k: v for k, v in op.items() if k not in ("requestBody", "responses", "parameters")}
            params = [{"name": p["name"], "in": "query", "type": "string", "uniqueItems": True}
                      for p in op.get("parameters", [])]
            if "requestBody" in op:
                params.append({"name": "body", "in": "body", "required": True,
                               "schema": next(iter(op["requestBody"]["content"].values()))["schema"]})
                op2["consumes"] = list(op["requestBody"]["content"])
            if params:
                op2["parameters"] = params
            op2["produces"] = ["application/json"]
            op2["responses"] = {c: {"description": r["description"], "schema": r["content"]["application/json"]["schema"]}
                                for c, r in op["responses"].items()}
            out[path][method] = op2
    return out


@dataclass
class Encoded:
    body: bytes
    etag: str  # upstream's: the uppercase hex SHA-512 of the (JSON) bytes
    built: float = 0.0  # when the document was built (Last-Modified), epoch seconds; 0: not sent


def _encoded(doc: Doc, built: float = 0.0) -> Encoded:
    body = msgspec.json.encode(doc)
    return Encoded(body, hashlib.sha512(body).hexdigest().upper(), built)


@dataclass
class Cache:
    """Encoded documents for one registry fingerprint; filled on first use."""

    fingerprint: Any = None
    v2: Encoded | None = None
    v2_proto: Encoded | None = None  # same ETag and time as v2
    v3: dict[str, Encoded] = field(default_factory=dict)


def fingerprint(registry: Registry) -> Any:
    """Cheap identity of the registry's served types (and of custom schemas)."""
    return (getattr(registry, "generation", None),
            tuple((rt.group, rt.version, rt.resource, rt.kind, id(getattr(rt, "schema", None))) for rt in registry.all()))


class OpenAPI:
    """The documents of one registry, cached, and the handlers that serve them."""

    def __init__(self, registry: Registry, *, clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.clock = clock
        self.cache = Cache()

    def _current(self) -> Cache:
        fp = fingerprint(self.registry)
        if fp != self.cache.fingerprint:
            self.cache = Cache(fingerprint=fp)
        return self.cache

    def v3(self, gv: str) -> Encoded | None:
        cache = self._current()
        if gv not in cache.v3:
            group, version = parse_gv(gv)
            if (group, version) not in self.registry.group_versions():
                return None
            cache.v3[gv] = _encoded(Builder(self.registry, v3=True).v3_document(group, version))
        return cache.v3[gv]

    def v2(self) -> Encoded:
        cache = self._current()
        if cache.v2 is None:
            cache.v2 = _encoded(Builder(self.registry, v3=False).v2_document(), self.clock())
        return cache.v2

    def v2_protobuf(self) -> Encoded:
        """The v2 document as gnostic's protobuf `Document`, with the JSON form's ETag and time;
        like upstream, made from the JSON bytes (so both forms always say the same)."""
        enc = self.v2()
        cache = self.cache
        if cache.v2_proto is None:
            body = openapi_proto.encode_document(msgspec.json.decode(enc.body))
            cache.v2_proto = Encoded(body, enc.etag, enc.built)
        return cache.v2_proto

    def index(self) -> Doc:
        out: dict[str, Any] = {}
        for group, version in self.registry.group_versions():
            p = gv_path(group, version)
            enc = self.v3(p)
            assert enc is not None
            out[p] = {"serverRelativeURL": f"/openapi/v3/{p}?hash={enc.etag}"}
        return {"paths": out}

    def serve(self, request: web.Request) -> web.StreamResponse | None:
        """Answers /openapi/v2, /openapi/v3 and /openapi/v3/<gv>; None for any other path."""
        path = request.path.rstrip("/")
        if path == "/openapi/v2":
            content_type = negotiate_v2(request.headers.get("Accept", ""))
            if content_type is None:
                return web.Response(status=406, headers={"Vary": "Accept"})
            v2 = self.v2() if content_type == "application/json" else self.v2_protobuf()
            return _respond(request, v2, content_type=content_type, vary=True)
        if path == "/openapi/v3":
            return _respond(request, _encoded(self.index()), etag=False)
        if not path.startswith("/openapi/v3/"):
            return None
        gv = path[len("/openapi/v3/"):]
        enc = self.v3(gv)
        if enc is None:
            return None
        wanted = request.query.get("hash")
        if wanted is not None and wanted != enc.etag:
            raise web.HTTPMovedPermanently(location=f"/openapi/v3/{gv}?hash={enc.etag}")
        return _respond(request, enc, immutable=wanted is not None)


def parse_gv(gv: str) -> tuple[str, str]:
    parts = gv.split("/")
    if len(parts) == 2 and parts[0] == "api":
        return "", parts[1]
    if len(parts) == 3 and parts[0] == "apis":
        return parts[1], parts[2]
    return "-", "-"


def _accept_clauses(accept: str) -> list[tuple[str, str]]:
    """(type, subtype) of each Accept clause, best first: by q, then concrete before wildcard types
    and subtypes, then in the order given (upstream's goautoneg order). A missing header is `*/*`."""
    ranked: list[tuple[float, bool, bool, int, str, str]] = []
    for i, clause in enumerate((accept.strip() or "*/*").split(",")):
        media, *params = (p.strip() for p in clause.split(";"))
        kind, _, sub = ("*/*" if media == "*" else media).lower().partition("/")
        if not kind or not sub:
            continue
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        ranked.append((-q, kind == "*", sub == "*", i, kind, sub))
    return [(kind, sub) for *_, kind, sub in sorted(ranked)]


def negotiate_v2(accept: str) -> str | None:
    """The Content-Type to answer /openapi/v2 with for this Accept header; None: 406."""
    for kind, sub in _accept_clauses(accept):
        for media, content_type in V2_FORMATS:
            have_kind, _, have_sub = media.partition("/")
            if kind in ("*", have_kind) and sub in ("*", have_sub):
                return content_type
    return None


def _not_modified(request: web.Request, enc: Encoded, quoted: str) -> bool:
    """http.ServeContent's rules: If-None-Match (any listed tag, weakly compared, or `*`) decides when
    present; otherwise If-Modified-Since against the build time (whole seconds)."""
    inm = request.headers.get("If-None-Match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or quoted in tags
    ims = request.headers.get("If-Modified-Since")
    if ims is None or not enc.built:
        return False
    try:
        return int(enc.built) <= parsedate_to_datetime(ims).timestamp()
    except (TypeError, ValueError):
        return False


def _respond(request: web.Request, enc: Encoded, *, etag: bool = True, immutable: bool = False,
             content_type: str = "application/json", vary: bool = False) -> web.Response:
    headers: dict[str, str] = {"Vary": "Accept"} if vary else {}
    if etag:
        quoted = f'"{enc.etag}"'
        headers["Etag"] = quoted
        if _not_modified(request, enc, quoted):
            return web.Response(status=304, headers=headers)
    if enc.built:
        headers["Last-Modified"] = formatdate(enc.built, usegmt=True)
    if immutable:
        headers["Cache-Control"] = "public, immutable"
        headers["Expires"] = formatdate(usegmt=True, timeval=time.time() + YEAR_SECONDS)
    return web.Response(body=enc.body, content_type=content_type, headers=headers)
