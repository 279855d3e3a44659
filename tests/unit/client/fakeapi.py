"""A tiny Kubernetes-shaped API server for the client's unit tests, misbehaving on request.

It serves one resource, core/v1 configmaps, from an in-memory store with a revision counter and an
event history, speaking just enough of the real protocol: LIST with limit/continue (pages of the
sorted names), WATCH from a resourceVersion (replaying history after it, then live events),
bookmarks, `sendInitialEvents` streaming lists, 410 for versions older than `compacted`, Status
errors. Misbehaviour is scripted on the instance:

- `watch_plan`: a list consumed one entry per watch request: "drop-after:N" (send N events, then
  cut the connection mid-chunk), "gone" (an ERROR event with a 410 Status), "close" (end the
  stream at once), "serve" (normal). When the list is empty, watches are served normally.
- `list_failures`: HTTP codes answered to the next LISTs (one per request), e.g. [410].
- `watch_list`: "support" (initial events + initial-events-end bookmark), "reject" (422 as an old
  server does for resourceVersionMatch on watch), "ignore" (treat it as a plain watch: no bookmark).
- `responses`: a queue of (status, headers, body) answered to any request before normal handling.

Every request is recorded in `requests` as (method, path, query dict), its Accept header in `accepts`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from aiohttp import web
from aiohttp.test_utils import TestServer

_encode = msgspec.json.encode


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message}


class FakeApi:
    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted = 0
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.content_types: list[str | None] = []
        self.accepts: list[str] = []
        self.watch_plan: list[str] = []
        self.list_failures: list[int] = []
        self.watch_list = "support"
        self.responses: list[tuple[int, dict[str, str], bytes]] = []
        self._changed = asyncio.Condition()
        self.server: TestServer | None = None

    # -- state -------------------------------------------------------------------------------------
    def _emit(self, type_: str, obj: dict[str, Any]) -> None:
        self.history.append((self.rv, type_, obj))

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def put(self, name: str, data: dict[str, str] | None = None, *, ns: str = "default") -> dict[str, Any]:
        self.rv += 1
        key = f"{ns}/{name}"
        existed = key in self.objects
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": ns, "resourceVersion": str(self.rv), "uid": f"uid-{name}"},
               "data": data or {}}
        self.objects[key] = obj
        self._emit("MODIFIED" if existed else "ADDED", obj)
        await self._notify()
        return obj

    async def remove(self, name: str, *, ns: str = "default") -> None:
        self.rv += 1
        obj = dict(self.objects.pop(f"{ns}/{name}"))
        obj["metadata"] = {**obj["metadata"], "resourceVersion": str(self.rv)}
        self._emit("DELETED", obj)
        await self._notify()

    async def bookmark(self) -> None:
        self.rv += 1
        self._emit("BOOKMARK", {"kind": "ConfigMap", "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(self.rv)}})
        await self._notify()

    def compact(self) -> None:
        self.compacted = self.rv

    def queries(self, *, watch: bool | None = None) -> list[dict[str, str]]:
        return [q for m, p, q in self.requests
                if "configmaps" in p and (watch is None or (q.get("watch") == "true") == watch)]

    # -- HTTP --------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        q = dict(request.query)
        self.requests.append((request.method, request.path, q))
        self.content_types.append(request.headers.get("Content-Type"))
        self.accepts.append(request.headers.get("Accept", ""))
        if self.responses:
            code, headers, body = self.responses.pop(0)
            return web.Response(status=code, headers=headers, body=body, content_type="application/json")
        if request.path in ("/api/v1/configmaps", "/api/v1/namespaces/default/configmaps"):
            if q.get("watch") == "true":
                return await self._watch(request, q)
            return self._list(q)
        if request.method == "PATCH" and request.path.startswith("/api/v1/namespaces/default/configmaps/"):
            return web.json_response({"kind": "ConfigMap", "patched": (await request.read()).decode()})
        if request.path == "/api":
            return web.json_response({"kind": "APIVersions", "versions": ["v1"]})
        if request.path == "/apis":
            return web.json_response({"kind": "APIGroupList", "groups": []})
        if request.path == "/api/v1":
            return web.json_response({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "configmaps", "singularName": "configmap", "namespaced": True, "kind": "ConfigMap",
                 "verbs": ["get", "list", "watch"], "shortNames": ["cm"]},
                {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "verbs": ["get"]},
                {"name": "nodes/status", "singularName": "", "namespaced": False, "kind": "Node", "verbs": ["get"]},
            ]})
        return web.json_response(status(404, "NotFound", f"{request.path} not found"), status=404)

    def _list(self, q: dict[str, str]) -> web.Response:
        if self.list_failures:
            code = self.list_failures.pop(0)
            reason = {410: "Expired", 500: "InternalError"}.get(code, "BadRequest")
            return web.json_response(status(code, reason, "scripted LIST failure"), status=code)
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0") and int(rv) < self.compacted:
            return web.json_response(status(410, "Expired", "too old resource version"), status=410)
        names = sorted(self.objects)
        start = int(q.get("continue") or 0)
        limit = int(q.get("limit") or 0)
        end = start + limit if limit else len(names)
        items = [self.objects[k] for k in names[start:end]]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if end < len(names):
            meta["continue"] = str(end)
        return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": items})

    async def _watch(self, request: web.Request, q: dict[str, str]) -> web.StreamResponse:
        streaming = q.get("sendInitialEvents") == "true"
        if streaming and self.watch_list == "reject":
            return web.json_response(status(422, "Invalid", "resourceVersionMatch is forbidden for watch"), status=422)
        plan = self.watch_plan.pop(0) if self.watch_plan else "serve"
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0") and int(rv) < self.compacted:
            return web.json_response(status(410, "Expired", "too old resource version"), status=410)
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        if plan == "gone":
            await resp.write(_encode({"type": "ERROR", "object": status(410, "Expired", "too old")}) + b"\n")
            return resp
        if plan == "close":
            return resp
        limit = int(plan.split(":")[1]) if plan.startswith("drop-after:") else None
        sent = 0
        if streaming and self.watch_list == "support":
            for obj in [self.objects[k] for k in sorted(self.objects)]:
                await resp.write(_encode({"type": "ADDED", "object": obj}) + b"\n")
            end = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
                "resourceVersion": str(self.rv), "annotations": {"k8s.io/initial-events-end": "true"}}}
            await resp.write(_encode({"type": "BOOKMARK", "object": end}) + b"\n")
            since = self.rv
        elif streaming or rv in ("", "0"):  # "ignore": a plain watch from now, no bookmark
            since = self.rv
        else:
            since = int(rv)
        while True:
            for ev_rv, type_, obj in [h for h in self.history if h[0] > since]:
                if type_ == "BOOKMARK" and q.get("allowWatchBookmarks") != "true":
                    since = ev_rv
                    continue
                line = _encode({"type": type_, "object": obj}) + b"\n"
                if limit is not None and sent >= limit:
                    await resp.write(line[: len(line) // 2])  # half an event, then the connection dies
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                await resp.write(line[:7])  # events split across chunks on purpose
                await resp.write(line[7:])
                sent += 1
                since = ev_rv
            async with self._changed:
                await self._changed.wait()


@asynccontextmanager
async def serve(api: FakeApi) -> AsyncIterator[str]:
    """Run `api` on a free loopback port; yields its base URL."""
    server = TestServer(api.app(), host="127.0.0.1")
    await server.start_server()
    api.server = server
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


class InstantClock:
    """A clock whose sleeps return at once but move its time forward (and are recorded)."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.t = start
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)


async def eventually(cond: Any, *, limit: float = 10.0, what: str = "condition") -> None:
    """Poll `cond()` until true; fail after `limit` seconds (a hang guard, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"{what} never became true")
        await asyncio.sleep(0.01)
