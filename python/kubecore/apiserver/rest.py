"""The resource handlers: get, list, create, update, patch, delete, deletecollection, watch, and
the status subresource, for every type in the registry.

Each handler is one request's whole story: decode and check the input, run admission, write with
an optimistic-concurrency transaction, answer with the object (or a Table / metadata view).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

import msgspec
from aiohttp import web

from kubecore.api.jsoncopy import json_copy
from kubecore._native import NativeListBody
from kubecore.api import defaults, errors, fieldvalidation, meta, protobuf
from kubecore.api import kinds
from kubecore.api.registry import Registry, ResourceType
from kubecore.api.selectors import object_fields, parse_field_selector, parse_label_selector
from kubecore.apiserver import ownership
from kubecore.apiserver import patch as patching
from kubecore.apiserver.binding import bind
from kubecore.apiserver.allocators import Allocators, PortChange, reconcile_update
from kubecore.apiserver import crstore, customresource, deletion, eviction, listoptions, namespaces, scale, table, watch
from kubecore.apiserver import podstream
from kubecore.apiserver.admission import Admission
from kubecore.apiserver.httpserver import LeanRequest
from kubecore.apiserver.requestinfo import RequestInfo
from kubecore.apiserver.storage import MATCH_ALL, ObjectStore, parse_rv

Obj = dict[str, Any]
T = TypeVar("T")
MAX_BODY = 3 * 1024 * 1024
# Subresources with handlers; discovery advertises only these.
SERVED_SUBRESOURCES = frozenset({"status", "binding", "scale", "eviction", "finalize", *podstream.LONG_RUNNING})
# How often a write without a precondition re-reads and tries again when another write won the
# race (upstream's GuaranteedUpdate loops until it succeeds; this bounds it generously).
CONFLICT_RETRIES = 100
MAX_NAME_ATTEMPTS = 8  # creates with a generateName whose generated name is taken
_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.encode
UNKNOWN_MEDIA = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json, application/yaml"
)


async def shielded(request: web.Request | None, coro: Coroutine[Any, Any, T]) -> T:
    """Runs `coro` to completion even if the request is cancelled (its client went away): a
    write that reached the store must also finish its bookkeeping. aiohttp cancels handlers of
    lost connections; the lean listener never cancels a request it serves, so for its requests
    `coro` runs inline (a shield costs a task and a future per write). None: always shield."""
    if isinstance(request, LeanRequest):
        return await coro
    return await asyncio.shield(asyncio.ensure_future(coro))


_CREATED = _encode({**errors.success_status(), "code": 201})  # what a binding (or an eviction) answers


def path_not_found() -> errors.StatusError:
    """What upstream answers for a path no handler serves."""
    return errors.StatusError(404, "NotFound", "the server could not find the requested resource")


def respond(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encode(obj), status=status, content_type="application/json")


def respond_raw(body: bytes, status: int = 200) -> web.Response:
    """A response whose JSON is already encoded (the bytes that were stored)."""
    return web.Response(body=body, status=status, content_type="application/json")


STREAM_CHUNK = 1 << 22  # bodies above this go out in chunks of this size
_JSON_HEADERS = {"Content-Type": "application/json"}


async def send_body(request: web.Request, body: bytes) -> web.StreamResponse:
    """A JSON response; a large one (a big LIST) is written in slices of the same bytes, so the
    headers leave at once and no copy of the whole body is made on the way to the socket."""
    if len(body) <= STREAM_CHUNK:
        return web.Response(body=body, content_type="application/json")
    if isinstance(request, LeanRequest):
        view = memoryview(body)
        return await request.send(200, _JSON_HEADERS, (bytes(view[at:at + STREAM_CHUNK])
                                                        for at in range(0, len(body), STREAM_CHUNK)), len(body))
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.content_length = len(body)
    await resp.prepare(request)
    view = memoryview(body)
    for at in range(0, len(body), STREAM_CHUNK):
        await resp.write(view[at:at + STREAM_CHUNK])
    await resp.write_eof()
    return resp


async def send_chunks(request: web.Request, body: NativeListBody) -> web.StreamResponse:
    """A LIST body from the watch cache: a small one in one piece; a large one written chunk by
    chunk as the cache assembles it (the headers leave at once, the whole body is never held)."""
    if len(body) <= STREAM_CHUNK:
        return web.Response(body=body.next_chunk(len(body)) or b"", content_type="application/json")
    if isinstance(request, LeanRequest):
        return await request.send(200, _JSON_HEADERS, iter(lambda: body.next_chunk(STREAM_CHUNK), None), len(body))
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.content_length = len(body)
    await resp.prepare(request)
    while (chunk := body.next_chunk(STREAM_CHUNK)) is not None:
        await resp.write(chunk)
    await resp.write_eof()
    return resp


BODY_TYPES = ("application/json", protobuf.MEDIA_TYPE)


async def read_json(request: web.Request, *, allowed: tuple[str, ...] = BODY_TYPES) -> Any:
    """The request body as JSON data; protobuf bodies (client-go's typed clients) are decoded to
    the same dict a JSON client would have sent."""
    ct = request.content_type
    if ct not in allowed and not (ct in ("", "application/octet-stream") and "application/json" in allowed):
        raise errors.unsupported_media_type(ct)
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise errors.request_too_large("the request body is larger than 3 MiB")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise errors.request_too_large("the request body is larger than 3 MiB") from None
    if len(raw) > MAX_BODY:
        raise errors.request_too_large("the request body is larger than 3 MiB")
    if ct == protobuf.MEDIA_TYPE:
        return protobuf.decode_body(raw)
    request["raw_body"] = raw  # fieldvalidation looks for duplicate fields in it
    try:
        return _decode_any(raw)
    except msgspec.DecodeError as e:
        raise errors.bad_request(f"the body of the request could not be decoded as JSON: {e}") from None


def _body_obj(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return body


def _list_meta(revision: int, token: str, remaining: int | None) -> Obj:
    meta: Obj = {"resourceVersion": str(revision)}
    if token:
        meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    return meta


class Resources:
    """Handlers for resource requests, bound to one registry and one object store."""

    def __init__(self, registry: Registry, objects: ObjectStore, admission: Admission, allocators: Allocators) -> None:
        self.registry = registry
        self.objects = objects
        self.admission = admission
        self.allocators = allocators
        self.streams = podstream.PodStreams(registry, objects)
        self._verbs: dict[str, Callable[..., Any]] = {
            "get": self.get, "list": self.list, "watch": self.watch, "create": self.create, "update": self.update,
            "patch": self.patch, "delete": self.delete, "deletecollection": self.delete_collection}

    @staticmethod
    def _is_service(rt: ResourceType) -> bool:
        return rt.group == "" and rt.kind == "Service"

    # ---- dispatch ----------------------------------------------------------------------------

    async def handle(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        rt = self.registry.get(info.group, info.version, info.resource)
        if rt is None or (info.namespace and not rt.namespaced) or len(info.parts) > 3:
            raise path_not_found()
        if info.subresource and (info.subresource not in rt.subresources or info.subresource not in SERVED_SUBRESOURCES):
            raise path_not_found()
        if rt.namespaced and not info.namespace and info.verb not in ("list", "watch"):
            raise path_not_found()
        handler = self._handler(info)
        if info.verb == "create" and info.name and not info.subresource and info.resource != "bindings":
            handler = None  # POST goes to the collection, never to a named object
        if handler is None or info.verb not in rt.verbs and not info.subresource:
            raise errors.method_not_allowed(rt, info.verb)
        request["rt"] = rt  # a served resource: metrics may label by it
        if info.verb in ("list", "watch"):
            listoptions.validate(request.query, watch=info.verb == "watch")
        response: web.StreamResponse = await handler(request, info, rt)
        for text in request.get("warnings", ()):
            response.headers.add("Warning", fieldvalidation.warning_header(text))
        return response

    @staticmethod
    def _check_fields(request: web.Request, rt: ResourceType, body: Obj, verb: str) -> Obj:
        """fieldValidation of a create/update body: unknown fields dropped, warned about or refused."""
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), verb)
        request["warnings"] = fieldvalidation.check_body(rt, body, mode=mode, raw=request.get("raw_body"))
        return body

    def _handler(self, info: RequestInfo) -> Callable[..., Any] | None:
        if not info.subresource and info.resource != "bindings":
            return self._verbs.get(info.verb)
        if info.subresource == "status":
            return {"get": self.get, "update": self.update_status, "patch": self.patch}.get(info.verb)
        if info.subresource == "binding" or (info.resource == "bindings" and info.group == ""):
            return self.bind if info.verb == "create" else None
        if info.subresource == "scale":
            return {"get": self.get_scale, "update": self.update_scale, "patch": self.patch_scale}.get(info.verb)
        if info.subresource == "eviction":
            return self.evict if info.verb == "create" else None
        if info.subresource == "finalize":
            return self.update_finalize if info.verb == "update" else None
        if info.subresource == podstream.LOG:
            return self.pod_log if info.verb == "get" else None
        if info.subresource in podstream.CONNECT:
            return self.pod_connect if info.verb in ("get", "create") else None
        if info.subresource:
            return None
        return self._verbs.get(info.verb)

    # ---- reads -------------------------------------------------------------------------------

    async def get(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        accept = request.headers.get("Accept", "")
        if not table.wants_table(accept) and not table.wants_partial_metadata(accept):
            raw = self.objects.get_raw(rt, info.namespace, info.name)
            return web.Response(body=raw, content_type="application/json")
        obj = self.objects.get(rt, info.namespace, info.name)
        if table.wants_table(accept):
            lm = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            return respond(table.table([obj], list_meta=lm, group=rt.group, kind=rt.kind, include=request.query.get("includeObject", "Metadata"), rt=rt))
        if table.wants_partial_metadata(accept):
            return respond(table.partial(obj))
        return respond(obj)

    def _matcher(self, request: web.Request, rt: ResourceType, name: str = "") -> Callable[[Obj], bool]:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""), rt)
        if labels.empty and fields.empty:
            return MATCH_ALL
        return lambda obj: labels.matches((obj.get("metadata") or {}).get("labels") or {}) and fields.matches(
            object_fields(rt, obj)
        )

    async def list(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.StreamResponse:
        q = request.query
        limit = q.get("limit", "0")
        if not limit.isdigit():
            raise errors.bad_request(f"invalid limit {limit!r}")
        rv = parse_rv(q.get("resourceVersion"))
        accept = request.headers.get("Accept", "")
        match = self._matcher(request, rt)
        if not table.wants_table(accept) and not table.wants_partial_metadata(accept):
            chunks = self.objects.cache.list_body(rt, info.namespace, q, limit=int(limit))  # None: not servable from it
            if chunks is not None:
                return await send_chunks(request, chunks)
        if match is MATCH_ALL and not table.wants_table(accept) and not table.wants_partial_metadata(accept):
            return await send_body(request, self._list_raw(request, info, rt, limit=int(limit), rv=rv))
        page = self.objects.list(
            rt,
            info.namespace,
            match=None if match is MATCH_ALL else match,
            limit=int(limit),
            continue_token=q.get("continue", ""),
            revision=rv if q.get("resourceVersionMatch") == "Exact" else 0,
        )
        list_meta = _list_meta(page.revision, page.continue_token, page.remaining)
        if table.wants_table(accept):
            return respond(table.table(page.items, list_meta=list_meta, group=rt.group, kind=rt.kind, include=q.get("includeObject", "Metadata"), rt=rt))
        if table.wants_partial_metadata(accept):
            items = [table.partial(o) for o in page.items]
            return respond({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "items": items})
        return respond({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": list_meta, "items": page.items})

    def _list_raw(self, request: web.Request, info: RequestInfo, rt: ResourceType, *, limit: int, rv: int) -> bytes:
        """The body of a list answered from the store's bytes (when the watch cache could not
        answer it): items are joined, never decoded."""
        q = request.query
        page = self.objects.list_raw(rt, info.namespace, limit=limit, continue_token=q.get("continue", ""),
                                     revision=rv if q.get("resourceVersionMatch") == "Exact" else 0)
        head = b'{"kind":"' + rt.list_kind.encode() + b'","apiVersion":"' + rt.api_version.encode() + b'","metadata":'
        meta = _encode(_list_meta(page.revision, page.continue_token, page.remaining))
        return b"".join((head, meta, b',"items":[', b",".join(page.items), b"]}"))

    async def watch(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.StreamResponse:
        match = crstore.reading(rt, self._matcher(request, rt))  # custom resources: rewritten per version
        if info.name:  # /.../pods/x?watch=1 (deprecated form): a field selector on the name
            inner = match
            match = lambda o: (o.get("metadata") or {}).get("name") == info.name and inner(o)  # noqa: E731
        return await watch.serve(request, self.objects, rt, info.namespace, match, name=info.name)

    # ---- writes ------------------------------------------------------------------------------

    @staticmethod
    def _dry_run(request: web.Request, options: Obj | None = None) -> bool:
        """dryRun from the query or, for deletes, from the DeleteOptions body; only "All" exists."""
        values = list(request.query.getall("dryRun", []))
        body = (options or {}).get("dryRun") or []
        values += body if isinstance(body, list) else [body]
        for v in values:
            if v != "All":
                raise errors.bad_request(f"unsupported dryRun value {v!r}: only All is supported")
        return bool(values)

    async def create(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = defaults.apply_defaults(rt.group, rt.kind, self._check_fields(request, rt, _body_obj(await read_json(request)), "create"))
        body = customresource.decode(request, rt, body, "create")
        return await self._create(request, info, rt, body)

    async def _create(self, request: web.Request, info: RequestInfo, rt: ResourceType, body: Obj) -> web.Response:
        """Creates a decoded, defaulted body (a POST, or an apply to an object that does not exist)."""
        generated = not (body.get("metadata") or {}).get("name")
        obj = meta.prepare_create(rt, body, namespace=info.namespace or None, now=meta.now_rfc3339(), uid=meta.new_uid())
        if errs := kinds.validate_create(rt, obj):
            raise errors.invalid(rt, obj["metadata"].get("name") or "", errs)
        ownership.track_create(request, rt, obj)
        if namespaces.is_namespace(rt):
            namespaces.prepare_create(obj)
        customresource.validate_create(rt, obj)
        dry = self._dry_run(request)
        await self.admission.admit_create(rt, obj, dry_run=dry)
        if not self._is_service(rt):
            if dry:
                return respond(obj, 201)
            return respond_raw(await self._store_create(rt, info.namespace, obj, generated=generated), 201)
        self.allocators.allocate(obj)
        if dry:
            self.allocators.release(obj)
            return respond(obj, 201)
        return respond_raw(await shielded(request, self._create_service(rt, info.namespace, obj, generated=generated)), 201)

    async def _store_create(self, rt: ResourceType, namespace: str, obj: Obj, *, generated: bool) -> bytes:
        """Stores a new object and returns it encoded; a generated name that is taken is generated
        again (upstream's RetryGenerateName: up to 8 attempts, then 409 naming the generated-name
        conflict)."""
        m = obj["metadata"]
        generated = generated and bool(m.get("generateName"))
        for attempt in range(1, MAX_NAME_ATTEMPTS + 1):
            try:
                return await self.objects.create_encoded(rt, namespace, m["name"], obj)
            except errors.StatusError as e:
                if e.reason != "AlreadyExists" or not generated:
                    raise
                if attempt == MAX_NAME_ATTEMPTS:
                    raise errors.generate_name_conflict(rt, m["name"]) from None
                m["name"] = meta.generate_name(m["generateName"])
        raise AssertionError("unreachable")

    async def _create_service(self, rt: ResourceType, namespace: str, obj: Obj, *, generated: bool) -> bytes:
        """Stores a service whose addresses are allocated; gives them back if it is not stored."""
        try:
            return await self._store_create(rt, namespace, obj, generated=generated)
        except Exception:
            self.allocators.release(obj)
            raise

    async def bind(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = _body_obj(await read_json(request))
        name = (body.get("metadata") or {}).get("name") or ""
        if info.subresource and name and name != info.name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        pods = self.registry.get("", "v1", "pods")
        assert pods is not None
        if self._dry_run(request):
            self.objects.get(pods, info.namespace, info.name or name)
            return respond_raw(_CREATED, 201)
        await shielded(request, bind(self.objects, pods, info.namespace, info.name or name, body))
        return respond_raw(_CREATED, 201)

    def _check_name(self, info: RequestInfo, obj: Obj) -> None:
        m = obj.setdefault("metadata", {})
        if not isinstance(m, dict):
            raise errors.bad_request("metadata must be an object")
        name = m.get("name") or info.name
        if name != info.name:
            raise errors.bad_request(f"the name of the object ({name}) does not match the name on the URL ({info.name})")
        m["name"] = name
        ns = m.get("namespace")
        if info.namespace and ns and ns != info.namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")

    async def _write(self, request: web.Request, info: RequestInfo, rt: ResourceType, old: Obj, new: Obj) -> web.Response:
        """Writes `new` over `old` if `old` is still current; finishes a deletion whose last
        finalizer went away."""
        old_rv = int(old["metadata"]["resourceVersion"])
        want = parse_rv(new.get("metadata", {}).get("resourceVersion"))
        if want and want != old_rv:
            raise errors.conflict(rt, info.name, "the object has been modified; please apply your changes to the latest version and try again")
        if not info.subresource:
            defaults.apply_defaults(rt.group, rt.kind, new)
        merged = meta.prepare_update(rt, old, new, subresource=info.subresource, name=info.name)
        if not info.subresource and (errs := kinds.validate_update(rt, merged, old)):
            raise errors.invalid(rt, info.name, errs)
        ownership.track_update(request, rt, info.subresource, old, merged)
        if namespaces.is_namespace(rt):
            namespaces.prepare_update(old, merged, subresource=info.subresource)
        customresource.validate_update(rt, merged, old, subresource=info.subresource)
        dry = self._dry_run(request)
        await self.admission.admit_update(rt, merged, old, subresource=info.subresource, dry_run=dry)
        change = reconcile_update(self.allocators, old, merged) if self._is_service(rt) and not info.subresource else None
        if dry:
            if change is not None:
                change.rollback()
            return respond(merged)
        return respond_raw(await shielded(request, self._store_update(rt, info, old, merged, old_rv, change)))

    async def _store_update(
        self, rt: ResourceType, info: RequestInfo, old: Obj, merged: Obj, old_rv: int, change: PortChange | None
    ) -> bytes:
        """Stores an update (or finishes a deletion whose last finalizer went away) and settles the
        service allocations with the outcome; runs to completion even if the client goes away.
        Returns the object to answer with, encoded."""
        try:
            if deletion.should_delete_during_update(rt, old, merged):
                await self.objects.remove(rt, info.namespace, info.name, expect_revision=old_rv)
                if self._is_service(rt):
                    self.allocators.release(old)
                    if change is not None:
                        change.rollback()
                return _encode(merged)
            if _unchanged(old, merged):  # as upstream: not written, no new resourceVersion, no event
                stored = _encode(old)
            else:
                stored = await self.objects.replace_encoded(rt, info.namespace, info.name, merged, expect_revision=old_rv)
        except Exception:
            if change is not None:
                change.rollback()
            raise
        if change is not None:
            change.commit()
        return stored

    async def update(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = self._check_fields(request, rt, _body_obj(await read_json(request)), "update")
        body = customresource.decode(request, rt, body, "update")
        self._check_name(info, body)
        unconditional = not parse_rv(body["metadata"].get("resourceVersion"))
        for attempt in range(CONFLICT_RETRIES):  # an update without a resourceVersion retries on a concurrent write
            old = self.objects.get(rt, info.namespace, info.name)
            new = json_copy(body) if unconditional and attempt + 1 < CONFLICT_RETRIES else body
            if "status" in rt.subresources:
                new.pop("status", None)  # meta.prepare_update puts the live status back
            try:
                return await self._write(request, info, rt, old, new)
            except errors.StatusError as e:
                if e.code != 409 or not unconditional:
                    raise
        raise errors.conflict(rt, info.name, "too many concurrent writes; try again")

    async def update_status(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = self._check_fields(request, rt, _body_obj(await read_json(request)), "update")
        body = customresource.decode(request, rt, body, "update")
        self._check_name(info, body)
        old, new = self.objects.get_pair(rt, info.namespace, info.name)
        new["status"] = body.get("status")
        new["metadata"]["resourceVersion"] = body["metadata"].get("resourceVersion", "")
        _keep_status_metadata(rt, new, body)
        return await self._write(request, info, rt, old, new)

    async def patch(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        ct = request.content_type
        if ct == patching.APPLY_PATCH:
            return await self._apply(request, info, rt)
        body = await read_json(request, allowed=patching.PATCH_TYPES)
        keep_rv = patching.mentions_resource_version(ct, body)
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), "patch")
        for _ in range(CONFLICT_RETRIES):  # a patch without a resourceVersion retries on a concurrent write
            old, base = self.objects.get_pair(rt, info.namespace, info.name)
            if not keep_rv:
                base["metadata"].pop("resourceVersion", None)
            new = patching.apply_patch(ct, base, body)
            request["warnings"] = fieldvalidation.check_patched(
                rt, new, mode=mode, patch=body, raw=None if ct == patching.JSON_PATCH else request.get("raw_body"),
                strategic=ct == patching.STRATEGIC_MERGE_PATCH)
            customresource.decode(request, rt, new, "patch", patch=body)
            self._check_name(info, new)
            if info.subresource == "status":
                status, rv, patched = new.get("status"), (new.get("metadata") or {}).get("resourceVersion"), new
                new = json_copy(old)
                new["status"] = status
                _keep_status_metadata(rt, new, patched)
                new["metadata"].pop("resourceVersion", None)
                if rv:
                    new["metadata"]["resourceVersion"] = rv
            elif "status" in rt.subresources:
                new.pop("status", None)  # meta.prepare_update puts the live status back
            try:
                return await self._write(request, info, rt, old, new)
            except errors.StatusError as e:
                if e.code != 409 or new.get("metadata", {}).get("resourceVersion"):
                    raise
        raise errors.conflict(rt, info.name, "too many concurrent writes; try again")

    async def _apply(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        """Server-side apply (kubecore.apiserver.ownership): merges the configuration into the
        live object, or creates the object when there is none (201)."""
        config = await ownership.read_apply(request, max_body=MAX_BODY)
        precondition = patching.mentions_resource_version(patching.APPLY_PATCH, config)
        for _ in range(CONFLICT_RETRIES):  # without a resourceVersion a concurrent write only means: again
            try:
                old, base = self.objects.get_pair(rt, info.namespace, info.name)
            except errors.StatusError as e:
                if e.code != 404 or info.subresource:
                    raise
                obj = ownership.apply(request, rt, "", None, config)
                self._check_name(info, obj)
                obj = customresource.decode(request, rt, defaults.apply_defaults(rt.group, rt.kind, obj), "patch", patch=config)
                try:
                    return await self._create(request, info, rt, obj)
                except errors.StatusError as e:
                    if e.reason != "AlreadyExists" or precondition:
                        raise
                    continue
            if not precondition:
                base["metadata"].pop("resourceVersion", None)
            new = ownership.apply(request, rt, info.subresource, base, config)
            self._check_name(info, new)
            customresource.decode(request, rt, new, "patch", patch=config)
            try:
                return await self._write(request, info, rt, old, new)
            except errors.StatusError as e:
                if e.code != 409 or precondition:
                    raise
        raise errors.conflict(rt, info.name, "too many concurrent writes; try again")

    async def delete(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = await self._delete_options(request)
        dry = self._dry_run(request, body)
        opts = deletion.parse_options(body, request.query)
        # A lost race means: read again (upstream's conditionalDelete). Gone by then: 404, as for
        # any delete of a missing object; preconditions are checked again against what is there.
        for _ in range(CONFLICT_RETRIES):
            old = self.objects.get(rt, info.namespace, info.name)
            await self.admission.admit_delete(rt, old)
            try:
                obj, removed = await self._delete_object(rt, old, opts, dry=dry)
            except _WriteConflict:
                continue
            return respond(deletion.removed_response(rt, obj) if removed else obj, deletion.response_code(opts, removed))
        raise errors.conflict(rt, info.name, "too many concurrent writes; try again")

    async def _delete_object(self, rt: ResourceType, old: Obj, opts: deletion.DeleteOptions, *,
                             dry: bool) -> tuple[Obj, bool]:
        """Deletes (or marks) `old` as upstream's registry does: (the resulting object, removed?).
        A lost race raises _WriteConflict."""
        now = dt.datetime.now(dt.timezone.utc)
        if namespaces.is_namespace(rt):
            outcome = namespaces.plan_delete(rt, old, opts, now=now)
        elif customresource.is_crd(rt):
            outcome = customresource.plan_crd_delete(rt, old, opts, now=now)
        else:
            outcome = deletion.plan(rt, old, opts, now=now)
        if outcome.action == "pending" or dry:
            return outcome.obj, outcome.action == "remove"
        try:
            return await shielded(None, self._store_delete(rt, old, outcome))
        except errors.StatusError as e:
            if e.code == 409:
                raise _WriteConflict(e) from None
            raise

    async def _store_delete(self, rt: ResourceType, old: Obj, outcome: deletion.Outcome) -> tuple[Obj, bool]:
        """Writes a deletion's outcome (and releases a removed service's addresses); runs to
        completion even if the client goes away."""
        m = old["metadata"]
        namespace, rv = m.get("namespace", ""), int(m["resourceVersion"])
        if outcome.action == "mark":
            marked = outcome.obj
            marked["metadata"].pop("resourceVersion", None)
            return await self.objects.replace(rt, namespace, m["name"], marked, expect_revision=rv), False
        await self.objects.remove(rt, namespace, m["name"], expect_revision=rv)
        if self._is_service(rt):
            self.allocators.release(old)
        return old, True

    async def _delete_options(self, request: web.Request) -> Obj:
        if not request.can_read_body:
            return {}
        body = await read_json(request)
        return body if isinstance(body, dict) else {}

    async def delete_collection(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = await self._delete_options(request)
        dry = self._dry_run(request, body)
        opts = deletion.parse_options(body, request.query)
        page = self.objects.list(rt, info.namespace, match=self._matcher(request, rt))
        for obj in page.items:  # upstream answers with the list as it was before the deletes
            await self.admission.admit_delete(rt, obj)
            try:
                await self._delete_object(rt, obj, opts, dry=dry)
            except _WriteConflict:
                continue  # changed meanwhile: a later deletecollection sees it again
            except errors.StatusError as e:
                if e.code != 404:
                    raise
        return respond({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(page.revision)}, "items": page.items})

    # ---- pods/log, pods/exec, pods/attach, pods/portforward (podstream.py) ------------------------
    async def pod_log(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.StreamResponse:
        return await self.streams.log(request, rt, info.namespace, info.name)

    async def pod_connect(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.StreamResponse:
        return await self.streams.connect(request, rt, subresource=info.subresource, namespace=info.namespace,
                                          name=info.name)

    # ---- scale, eviction, finalize -------------------------------------------------------------

    def _scalable(self, rt: ResourceType) -> None:
        if scale.paths(rt) is None:
            raise path_not_found()

    async def get_scale(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        self._scalable(rt)
        return respond(scale.to_scale(rt, self.objects.get(rt, info.namespace, info.name)))

    async def _write_scale(self, request: web.Request, info: RequestInfo, rt: ResourceType, old: Obj, new_scale: Any) -> web.Response:
        parent = scale.apply_scale(rt, old, new_scale)
        main = info._replace(subresource="")  # a scale write is an update of the parent's spec
        resp = await self._write(request, main, rt, old, parent)
        assert isinstance(resp.body, bytes)
        return respond(scale.to_scale(rt, _decode_any(resp.body)))

    async def update_scale(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        self._scalable(rt)
        body = await read_json(request)
        return await self._write_scale(request, info, rt, self.objects.get(rt, info.namespace, info.name), body)

    async def patch_scale(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        self._scalable(rt)
        ct = request.content_type
        if ct == patching.APPLY_PATCH:
            raise errors.unsupported_media_type(ct)
        body = await read_json(request, allowed=patching.PATCH_TYPES)
        keep_rv = patching.mentions_resource_version(ct, body)
        for _ in range(CONFLICT_RETRIES):
            old = self.objects.get(rt, info.namespace, info.name)
            current = scale.to_scale(rt, old)
            if not keep_rv:
                current["metadata"].pop("resourceVersion", None)
            try:
                return await self._write_scale(request, info, rt, old, patching.apply_patch(ct, current, body))
            except errors.StatusError as e:
                if e.code != 409 or keep_rv:
                    raise
        raise errors.conflict(rt, info.name, "too many concurrent writes; try again")

    async def evict(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = await read_json(request)
        dry = self._dry_run(request)

        async def delete_pod(pod: Obj, opts: deletion.DeleteOptions) -> None:
            await self.admission.admit_delete(rt, pod)
            try:
                await self._delete_object(rt, pod, opts, dry=dry)
            except _WriteConflict as e:
                raise e.error from None

        await eviction.evict(self.objects, self.registry, rt, namespace=info.namespace, name=info.name, body=body,
                             dry_run=dry, delete_pod=delete_pod)
        return respond_raw(_CREATED, 201)

    async def update_finalize(self, request: web.Request, info: RequestInfo, rt: ResourceType) -> web.Response:
        body = _body_obj(await read_json(request))
        self._check_name(info, body)
        old = self.objects.get(rt, info.namespace, info.name)
        new = json_copy(old)
        new["spec"] = json_copy(body.get("spec") or {})
        new["metadata"]["resourceVersion"] = body["metadata"].get("resourceVersion", "")
        return await self._write(request, info, rt, old, new)


def _unchanged(old: Obj, new: Obj) -> bool:
    """Whether an update would store the object it replaces (resourceVersion aside)."""
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    if {k: v for k, v in om.items() if k != "resourceVersion"} != {k: v for k, v in nm.items() if k != "resourceVersion"}:
        return False
    return {k: v for k, v in old.items() if k != "metadata"} == {k: v for k, v in new.items() if k != "metadata"}


class _WriteConflict(Exception):
    """A conditional write lost a race (the 409 to answer if retrying is not allowed)."""

    def __init__(self, error: errors.StatusError) -> None:
        super().__init__(error.message)
        self.error = error


def _keep_status_metadata(rt: ResourceType, new: Obj, body: Obj) -> None:
    """Carry the metadata a status write of `rt` may change (a Deployment's annotations, ...)
    from the request's object into `new`."""
    src = body.get("metadata") or {}
    for key in meta.status_kept_metadata(rt):
        if src.get(key) is not None:
            new["metadata"][key] = json_copy(src[key])
        else:
            new["metadata"].pop(key, None)
