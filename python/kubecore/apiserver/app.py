"""The aiohttp application: the handler chain (`Chain`, configured here in one place), the router
for non-resource paths, and `build_app`.

Every StatusError becomes upstream's Status JSON with its HTTP code; any other exception a 500
Status (and a log line), never a bare traceback.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from aiohttp import web
from aiohttp.web_urldispatcher import _default_expect_handler

from kubecore.api import errors
from kubecore.api.registry import Registry, builtin_registry
from kubecore.apiserver import discovery, discovery_v2, metricsapi, openapi, podstream
from kubecore.apiserver.admission import Admission
from kubecore.apiserver.crd import CRDController
from kubecore.apiserver.crstore import VersionedObjectStore
from kubecore.apiserver.fastpath import FastReads
from kubecore.apiserver.httpserver import LeanRequest
from kubecore.apiserver.inflight import InflightLimiter
from kubecore.apiserver.leases import DEFAULT_EVENT_TTL
from kubecore.apiserver.metrics import Metrics
from kubecore.apiserver.allocators import Allocators
from kubecore.apiserver.requestinfo import RequestInfo, parse
from kubecore.apiserver.rest import Resources, path_not_found, respond
from kubecore.apiserver.storage import ObjectStore
from kubecore.store import Store

log = logging.getLogger("kubecore.apiserver")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OBJECTS = web.AppKey("objects", ObjectStore)
REGISTRY = web.AppKey("registry", Registry)
ALLOCATORS = web.AppKey("allocators", Allocators)
FAST_READS = web.AppKey("fast_reads", FastReads)
CRDS = web.AppKey("crds", CRDController)
METRICS_API = web.AppKey("metrics_api", metricsapi.MetricsAPI)
DirectHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
DIRECT: web.AppKey[DirectHandler] = web.AppKey("direct")


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]


ADMIN = User("kubecore-admin", ("system:masters", "system:authenticated"))  # every request, until authentication


@dataclass(frozen=True)
class ChainConfig:
    """Limits of the inflight stage (upstream's --max-requests-inflight defaults), and its queue:
    as many requests again may wait up to `queue_wait_seconds` for a slot before a 429."""

    max_readonly: int = 400
    max_mutating: int = 200
    retry_after_seconds: int = 1
    queue_wait_seconds: float = 5.0


_INFOS: dict[tuple[str, str, str], RequestInfo] = {}
_MAX_INFOS = 4096


def _info(request: web.Request) -> RequestInfo:
    info: RequestInfo = request["info"]
    return info


def error_response(request: web.Request, e: Exception) -> web.Response:
    """A StatusError as upstream's Status JSON; anything else as a 500 Status and a log line."""
    if not isinstance(e, errors.StatusError):
        log.error("internal error serving %s %s", request.method, request.path, exc_info=e)
        e = errors.internal("an internal error occurred; see the server log")
    headers = {}
    if e.code == 429:
        headers["Retry-After"] = str((e.details or {}).get("retryAfterSeconds", 1))
    return web.Response(body=e.body(), status=e.code, content_type="application/json", headers=headers)


class Chain:
    """The handler chain, one stage per method, run in this order for every request:

        1. request_info   what the request is about (verb, resource, namespace, name)
        2. authenticate   who is asking (allow-all for now: loopback only, a cluster admin)
        3. authorize      may they (allow-all for now; every request passes this point)
        4. inflight       bounded concurrency for reads and for writes: excess gets 429 +
                          Retry-After; long-running requests (watch; pods' log, exec, attach,
                          portforward) are not counted, as upstream
        5. the route      admission, validation and storage run inside the resource handlers

    Metrics time stages 4-5 and record the final status code. The stages run in one aiohttp
    middleware: one coroutine frame per request instead of one per stage.
    """

    def __init__(self, cfg: ChainConfig, metrics: Metrics) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.inflight = {
            kind: InflightLimiter(limit, queue=limit, wait=cfg.queue_wait_seconds, retry_after=cfg.retry_after_seconds)
            for kind, limit in (("read", cfg.max_readonly), ("write", cfg.max_mutating))}

    @staticmethod
    def request_info(request: web.Request) -> RequestInfo:
        # the same target parses the same way: a client's creates in one namespace (events, a
        # ReplicaSet's pods) share one parse (RequestInfo is immutable). Only collections are
        # kept: a path naming an object (a binding) seldom comes back.
        key = (request.method, request.path, request.query_string)
        info = _INFOS.get(key)
        if info is None:
            info = parse(request.method, request.path, dict(request.query))
            if not info.name:
                if len(_INFOS) >= _MAX_INFOS:
                    _INFOS.clear()
                _INFOS[key] = info
        request["info"] = info
        return info

    @staticmethod
    def authenticate(request: web.Request) -> User:
        request["user"] = ADMIN
        return ADMIN

    @staticmethod
    def authorize(user: User, info: RequestInfo) -> None:
        return None

    async def __call__(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            info = self.request_info(request)
            self.authorize(self.authenticate(request), info)
        except Exception as e:  # noqa: BLE001 - every failure becomes a Status
            return error_response(request, e)
        if info.verb == "watch":
            with self.metrics.watching(info):
                try:
                    return await handler(request)
                except Exception as e:  # noqa: BLE001
                    return error_response(request, e)
        if info.subresource in podstream.LONG_RUNNING:
            try:
                return await handler(request)
            except Exception as e:  # noqa: BLE001
                return error_response(request, e)
        start = time.perf_counter()
        kind = ""
        try:
            wanted = "read" if request.method in ("GET", "HEAD", "OPTIONS") else "write"
            limiter = self.inflight[wanted]
            if not limiter.try_acquire():  # a coroutine only when the limit is reached
                await limiter.acquire()
            kind = wanted
            resp = await handler(request)
        except web.HTTPException:
            raise
        except Exception as e:  # noqa: BLE001
            resp = error_response(request, e)
        finally:
            if kind:
                self.inflight[kind].release()
        if "rt" in request:  # only requests that reached a served resource: bounded label values
            self.metrics.observe_request(info, resp.status, time.perf_counter() - start)
        return resp


class Router:
    """Non-resource paths (discovery, health, version) and the resource handlers."""

    def __init__(self, registry: Registry, resources: Resources, metrics: Metrics, store: Store, *,
                 metrics_api: metricsapi.MetricsAPI | None = None) -> None:
        self.registry = registry
        self.metrics_api = metrics_api
        self.openapi = openapi.OpenAPI(registry)
        self.resources = resources
        self.metrics = metrics
        self.store = store

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        info = _info(request)
        if info.is_resource_request:
            if info.group == metricsapi.GROUP and self.metrics_api is not None:
                return await self.metrics_api.handle(request, info)
            return await self.resources.handle(request, info)
        if request.method not in ("GET", "HEAD"):
            raise errors.StatusError(405, "MethodNotAllowed", f"{request.method} is not supported on {request.path}")
        return self.non_resource(request, info)

    def non_resource(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/metrics":
            return web.Response(text=self.metrics.render(self.store), content_type="text/plain", charset="utf-8",
                                headers={"X-Content-Type-Options": "nosniff"})
        if path == "/version":
            return respond(discovery.version_info())
        if path in ("/api", "/apis") and discovery_v2.wants_aggregated(request.headers.get("Accept", "")):
            return discovery_v2.respond(request, self.registry, core=path == "/api")
        if path == "/api":
            return respond(discovery.api_versions(request.host))
        if path == "/apis":
            return respond(discovery.api_group_list(self.registry))
        doc: dict[str, Any] | None = None
        if path.startswith("/openapi/"):
            served = self.openapi.serve(request)
            if served is None:
                raise path_not_found()
            return served
        if info.api_prefix == "api" and info.version:
            doc = discovery.api_resource_list(self.registry, "", info.version)
        elif info.api_prefix == "apis" and info.group and info.version:
            doc = discovery.api_resource_list(self.registry, info.group, info.version)
        elif info.api_prefix == "apis" and info.group:
            doc = discovery.api_group(self.registry, info.group)
        if doc is None:
            raise path_not_found()
        return respond(doc)


def service_allocators(registry: Registry, objects: ObjectStore) -> Allocators:
    """Allocators holding what the stored services already use."""
    alloc = Allocators()
    services = registry.get("", "v1", "services")
    if services is not None:
        for svc in objects.list(services, "").items:
            alloc.record(svc)
    return alloc


def build_app(store: Store, *, registry: Registry | None = None, chain: ChainConfig | None = None,
              event_ttl: int = DEFAULT_EVENT_TTL) -> web.Application:
    registry = registry or builtin_registry()
    metricsapi.register(registry)
    # custom resources: storage version, served version; Events expire `event_ttl` s after their last write
    objects: ObjectStore = VersionedObjectStore(store, event_ttl=event_ttl)
    allocators = service_allocators(registry, objects)
    resources = Resources(registry, objects, Admission(registry, objects), allocators)
    metrics = Metrics()
    the_chain = Chain(chain or ChainConfig(), metrics)
    metrics_api = metricsapi.MetricsAPI(registry, objects)
    router = Router(registry, resources, metrics, store, metrics_api=metrics_api)
    app = web.Application(client_max_size=4 * 1024 * 1024, middlewares=[web.middleware(the_chain)])
    app.router.add_route("*", "/{tail:.*}", router)
    app[DIRECT] = _direct_handler(the_chain, router)
    app[OBJECTS] = objects
    app[REGISTRY] = registry
    app[ALLOCATORS] = allocators
    app[FAST_READS] = FastReads(registry, store, metrics)
    app[CRDS] = CRDController(registry, objects)
    app[METRICS_API] = metrics_api
    app.on_startup.append(_start_crds)
    app.on_cleanup.append(_stop_crds)
    return app


def _direct_handler(chain: Chain, router: Router) -> Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]:
    """What the application does for every request, without aiohttp's per-request routing and
    middleware assembly (one catch-all route and one middleware: the chain). The server's
    connections call this (`fastpath.FastAppRunner`); tests that drive `build_app` through
    aiohttp's test server take the ordinary path, which does the same."""

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        assert type(request) is LeanRequest or isinstance(request, web.Request)  # (isinstance on an ABC is slow)
        if request.headers.get("Expect"):  # what aiohttp's route would do first: 100-continue
            await _default_expect_handler(request)
        return await chain(request, router)

    return handle


async def _start_crds(app: web.Application) -> None:
    """Serves every stored CRD before the first request, then follows CRD changes."""
    await app[CRDS].start()


async def _stop_crds(app: web.Application) -> None:
    await app[CRDS].stop()
    await app[METRICS_API].close()



__all__ = ["ALLOCATORS", "CRDS", "DIRECT", "FAST_READS", "METRICS_API", "OBJECTS", "REGISTRY", "ChainConfig",
           "build_app"]
