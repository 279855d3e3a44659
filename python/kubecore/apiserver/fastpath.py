"""The read fast path: a plain GET of one built-in object answered at the connection, before
aiohttp builds a Request, runs the middleware and routes.

What qualifies (anything else goes through the whole handler chain, unchanged):
- one complete ``GET <path> HTTP/1.1`` request in the bytes just received, on a connection
  whose handler is idle (no request in progress or queued: responses stay in order);
- no query string, no body, no ``Connection: close`` / ``Upgrade``, an Accept that asks for
  plain JSON (no Table / PartialObjectMetadata / YAML / protobuf);
- the path names one object of a built-in type (``/api/v1/namespaces/N/pods/P``,
  ``/apis/apps/v1/namespaces/N/deployments/D``, ``/api/v1/nodes/X``), and the object exists
  (a 404 is answered by the chain, with its Status); types served as a converted view of their
  stored form (events.k8s.io/v1 events, stored as core/v1 events) take the chain;
- the chain's authentication and authorization are the allow-all defaults. When real
  authentication arrives, the fast path must be given the chain's (cached) decision for the
  request's user, verb and resource, or be turned off — ``FastReads.enabled``.

The answer is what the resource handler would send: the stored bytes with the resourceVersion
spliced in, ``Content-Type: application/json``. The request is counted in /metrics like any GET.
A connection that ever sends something else in a way that could leave bytes inside aiohttp's
parser (a request cut across reads, a body) stops using the fast path.
"""

from __future__ import annotations

import time
from email.utils import formatdate
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web, web_protocol, web_server

from kubecore.api.registry import BUILTIN_TYPES, Registry
from kubecore.apiserver.metrics import Metrics
from kubecore.apiserver.storage import with_rv
from kubecore.store import Store

_BUILTIN = frozenset((rt.group, rt.version, rt.resource) for rt in BUILTIN_TYPES)
_REFUSED_HEADERS = (b"\r\ncontent-length:", b"\r\ntransfer-encoding:", b"\r\nconnection: close", b"\r\nupgrade:",
                    b"\r\nexpect:")
_REFUSED_ACCEPT = (b"as=", b"yaml", b"protobuf", b"text/")
_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-cache, private\r\nDate: "
Route = tuple[bytes, bool, tuple[str, str, str, str, str, str]]  # key prefix, namespaced, metric labels


class FastReads:
    """Answers qualifying GETs from the store (see the module docstring)."""

    def __init__(self, registry: Registry, store: Store, metrics: Metrics) -> None:
        self.registry, self.store, self.metrics = registry, store, metrics
        self.enabled = True
        self.served = 0
        self._routes: dict[tuple[bytes, bytes, bytes], Route | None] = {}
        self._date_second = -1
        self._date = b""

    def _route(self, group: bytes, version: bytes, resource: bytes) -> Route | None:
        key = (group, version, resource)
        if key in self._routes:
            return self._routes[key]
        g, v, r = group.decode(), version.decode(), resource.decode()
        rt = self.registry.get(g, v, r) if (g, v, r) in _BUILTIN else None
        route = None
        if rt is not None and "get" in rt.verbs and not rt.converts:  # a converted view: the handler converts
            route = (rt.storage_prefix.encode(), rt.namespaced, ("GET", g, v, r, "", "resource"))
        if len(self._routes) < 4096:
            self._routes[key] = route
        return route

    def _target(self, path: bytes) -> tuple[bytes, Route] | None:
        """The storage key and route of a path naming one object, or None."""
        s = path.split(b"/")
        n = len(s)
        if n < 5:  # no object path is shorter than /api/v1/nodes/X
            return None
        if s[1] == b"api" and s[2] == b"v1":
            group, rest = b"", s[3:]
            version = b"v1"
        elif s[1] == b"apis" and n >= 6:
            group, version, rest = s[2], s[3], s[4:]
        else:
            return None
        if len(rest) == 4 and rest[0] == b"namespaces":
            route = self._route(group, version, rest[2])
            if route is None or not route[1] or not rest[1] or not rest[3]:
                return None
            return route[0] + rest[1] + b"/" + rest[3], route
        if len(rest) == 2:
            route = self._route(group, version, rest[0])
            if route is None or route[1] or not rest[1]:
                return None
            return route[0] + rest[1], route
        return None

    def _date_header(self) -> bytes:
        now = int(time.time())
        if now != self._date_second:
            self._date_second, self._date = now, formatdate(now, usegmt=True).encode()
        return self._date

    def serve(self, data: bytes) -> bytes | None:
        """The whole HTTP response for `data`, or None to let the chain answer it."""
        if not self.enabled:
            return None
        start = time.perf_counter()
        line_end = data.find(b"\r\n")
        if data.find(b"\r\n\r\n") != len(data) - 4:
            return None  # not exactly one request
        parts = data[:line_end].split(b" ")
        if len(parts) != 3 or parts[2] != b"HTTP/1.1" or b"?" in parts[1] or b"%" in parts[1]:
            return None
        headers = data[line_end:].lower()
        for h in _REFUSED_HEADERS:
            if h in headers:
                return None
        at = headers.find(b"\r\naccept:")
        if at >= 0:
            accept = headers[at + 9:headers.find(b"\r\n", at + 2)]
            for a in _REFUSED_ACCEPT:
                if a in accept:
                    return None
        target = self._target(parts[1])
        if target is None:
            return None
        key, route = target
        kv = self.store.get(key)
        if kv is None:
            return None
        body = with_rv(kv.value, kv.mod_revision)
        self.served += 1
        self.metrics.observe(route[2], 200, time.perf_counter() - start)
        return b"".join((_HEAD, self._date_header(), b"\r\nContent-Length: %d\r\n\r\n" % len(body), body))


class FastRequestHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler with the fast path in front of its parser."""

    __slots__ = ("_fast", "_fast_open")

    def __init__(self, manager: web_server.Server, *, fast: FastReads, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._fast = fast
        self._fast_open = True  # False once bytes may sit in aiohttp's parser between reads

    def data_received(self, data: bytes) -> None:
        if self._fast_open:
            if data[:4] == b"GET " and data[-4:] == b"\r\n\r\n":
                if not self._request_in_progress and not self._messages and self.transport is not None:
                    out = self._fast.serve(data)
                    if out is not None:
                        self.transport.write(out)
                        self._next_keepalive_close_time = self._loop.time() + self._keepalive_timeout
                        return
            else:
                self._fast_open = False
        super().data_received(data)


class FastServer(web_server.Server):
    """aiohttp's Server making FastRequestHandlers (set on the server AppRunner made)."""

    fast: FastReads

    def __call__(self) -> FastRequestHandler:
        return FastRequestHandler(self, loop=self._loop, fast=self.fast, **self._kwargs)


class FastAppRunner(web.AppRunner):
    """An AppRunner whose connections try the fast path first; with `direct`, requests go
    straight to that handler instead of the application's router and middleware assembly."""

    def __init__(self, app: web.Application, *, fast: FastReads,
                 direct: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.fast = fast
        self.direct = direct

    async def _make_server(self) -> web_server.Server:
        server = await super()._make_server()
        server.__class__ = FastServer  # same state, one more method: keeps aiohttp's own setup
        assert isinstance(server, FastServer)
        server.fast = self.fast
        if self.direct is not None:
            server.request_handler = self.direct
        return server
