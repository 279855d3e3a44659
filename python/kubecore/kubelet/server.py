"""The kubelet's HTTP server (upstream pkg/kubelet/server): what the API server calls for
`kubectl logs`, `exec`, `attach` and `port-forward`.

    server = KubeletServer(host, address="0.0.0.0", port=10250)
    await server.start()        # after host.start(): pods are looked up in the host's watch
    ...
    await server.stop()

One server per process, for every kubelet of its `KubeletHost`: a hollow-node process with a
thousand nodes listens once and finds the node of a request by the pod (its spec.nodeName). Each
node reports the server's port in status.daemonEndpoints.kubeletEndpoint.Port
(`KubeletConfig.kubelet_port`).

Plain HTTP for now (upstream serves HTTPS with client-certificate authentication; kubecore's
API server has no certificates yet), so bind it to loopback or a trusted node address.

| path | answer |
| --- | --- |
| `GET /healthz` | `ok` |
| `GET /pods` | the PodList of the pods bound to this process's nodes |
| `GET /stats/summary[?only_cpu_and_memory=true]` | the node's stats Summary (`stats.py`, `resource_metrics.py`) |
| `GET /metrics/resource` | the node's resource metrics, Prometheus text (`resource_metrics.py`) |
| `GET /containerLogs/{ns}/{pod}/{container}` | the log (`crilog.py`), chunked; `follow`: until the container ends |
| `GET, POST /exec/{ns}/{pod}[/{uid}]/{container}?command=..&output=1` | the runtime's Exec URL, passed through |
| `GET, POST /attach/{ns}/{pod}[/{uid}]/{container}?input=1&output=1&...` | the same with Attach |
| `GET, POST /portForward/{ns}/{pod}[/{uid}]` | the same with PortForward (ports are chosen in the stream) |

A runtime whose streaming server lacks current kubectl's websocket protocols (containerd's:
`streaming_needs_translation`) has them answered here instead of passed through: websocket
`v5.channel.k8s.io` exec/attach over SPDY, tunneled `SPDY/3.1+portforward.k8s.io` port-forward
(`streamtranslate.py`).

The two stats paths are per node: a server of one node answers for it; a server of several
(hollow nodes) needs `?node=<name>` (400 without it, 404 for a node it does not serve). The API
server's metrics scraper always sends it; a real kubelet ignores the parameter.

Errors are upstream's: plain-text bodies (the API server passes them on to kubectl), 404 `pod
"p" does not exist` / `container "c" not found in pod "p"`, 400 for a container whose state has
no log (`container "c" in pod "p" is waiting to start: ContainerCreating`, ...), 400/422 for a
bad query, and for streaming the runtime's error mapped by its gRPC code (NotFound 404,
Unavailable 503, DeadlineExceeded 504, anything else — Unimplemented from the simulated
runtime — 500).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec
from aiohttp import web

from kubecore.api.podlogoptions import LogOptions, LogOptionsError
from kubecore.client.spdy_session import SpdyStreamError
from kubecore.client.upgrade import Target, UpgradeError, proxy_upgrade
from kubecore.kubelet import cri, crilog, node_resources, podutil, resource_metrics, streamtranslate
from kubecore.kubelet.config import KUBELET_PORT
from kubecore.kubelet.status_gen import raw_container_id

if TYPE_CHECKING:
    from kubecore.kubelet.host import KubeletHost
    from kubecore.kubelet.kubelet import Kubelet

log = logging.getLogger(__name__)
Obj = dict[str, Any]
_encode = msgspec.json.encode
_STATUS_OF_CODE = {"NotFound": 404, "ResourceExhausted": 429, "Unavailable": 503, "DeadlineExceeded": 504}


class LogError(Exception):
    """A log request that cannot be answered; `status` is the HTTP code, the message its body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n", content_type="text/plain")


def container_spec(pod: Obj, name: str) -> Obj | None:
    """GetContainerSpec: the container, init container or ephemeral container called `name`."""
    spec = podutil.spec(pod)
    for section in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(section) or []:
            if c.get("name") == name:
                return dict(c)
    return None


def _container_status(status: Obj, name: str) -> Obj | None:
    for section in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(section) or []:
            if cs.get("name") == name:
                return dict(cs)
    return None


def log_container_id(status: Obj, container: str, pod: str, *, previous: bool) -> str:
    """validateContainerLogStatus: the id of the container whose log a request reads, or a
    LogError(400) with upstream's message."""
    cs = _container_status(status, container)
    if cs is None:
        raise LogError(400, f'container "{container}" in pod "{pod}" is not available')
    state, last = cs.get("state") or {}, (cs.get("lastState") or {}).get("terminated")
    last_id = str((last or {}).get("containerID") or "")
    if previous:
        if not last_id:
            raise LogError(400, f'previous terminated container "{container}" in pod "{pod}" not found')
        return last_id
    if state.get("running") is not None:
        return str(cs.get("containerID") or "")
    if state.get("terminated") is not None:
        cid = str(state["terminated"].get("containerID") or "") or last_id
        if not cid:
            raise LogError(400, f'container "{container}" in pod "{pod}" is terminated')
        return cid
    if last is not None:
        if not last_id:
            raise LogError(400, f'container "{container}" in pod "{pod}" is terminated')
        return last_id
    waiting = state.get("waiting")
    if waiting is not None:
        reason = str(waiting.get("reason") or "")
        why = {"ErrImagePull": "image can't be pulled",
               "ImagePullBackOff": "trying and failing to pull image"}.get(reason, reason)
        raise LogError(400, f'container "{container}" in pod "{pod}" is waiting to start: {why}')
    raise LogError(400, f'container "{container}" in pod "{pod}" is waiting to start - no logs yet')


def stream_flags(query: Any) -> tuple[bool, bool, bool, bool]:
    """(stdin, stdout, stderr, tty) from the kubelet's streaming query (`input`, `output`,
    `error`, `tty` = "1"); a tty has no separate stderr, as upstream."""
    stdin, stdout, stderr, tty = (query.get(k) in ("1", "true") for k in ("input", "output", "error", "tty"))
    if tty and stderr:
        stderr = False
    if not (stdin or stdout or stderr):
        raise LogError(400, "you must specify at least 1 of stdin, stdout, stderr")
    return stdin, stdout, stderr, tty


class KubeletServer:
    """The HTTP server of a `KubeletHost` (see the module docstring)."""

    def __init__(self, host: KubeletHost, *, address: str = "0.0.0.0", port: int = KUBELET_PORT) -> None:
        self.host = host
        self.address = address
        self.port = port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        r = app.router
        r.add_get("/healthz", self.healthz)
        r.add_get("/pods", self.pods)
        r.add_get("/stats/summary", self.stats_summary)
        r.add_get("/metrics/resource", self.resource_metrics)
        r.add_get("/containerLogs/{namespace}/{pod}/{container}", self.container_logs)
        for verb, handler in (("exec", self.exec), ("attach", self.attach)):
            for path in (f"/{verb}/{{namespace}}/{{pod}}/{{container}}",
                         f"/{verb}/{{namespace}}/{{pod}}/{{uid}}/{{container}}"):
                r.add_route("GET", path, handler)
                r.add_route("POST", path, handler)
        for path in ("/portForward/{namespace}/{pod}", "/portForward/{namespace}/{pod}/{uid}"):
            r.add_route("GET", path, self.port_forward)
            r.add_route("POST", path, self.port_forward)
        return app

    async def start(self) -> None:
        """Listen; with port 0 the chosen port is in `self.port` afterwards."""
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.address, self.port)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = int(server.sockets[0].getsockname()[1])
        log.info("kubelet server listening on %s:%d", self.address, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- lookups ---------------------------------------------------------------------------------
    def find(self, namespace: str, name: str) -> tuple[Kubelet, Obj] | None:
        """The pod (bound to one of this process's nodes) and that node's kubelet."""
        pod = self.host.pod(f"{namespace}/{name}")
        if pod is None:
            return None
        kubelet = self.host.kubelets.get(str(podutil.spec(pod).get("nodeName") or ""))
        return (kubelet, pod) if kubelet is not None else None

    @staticmethod
    def pod_status(kubelet: Kubelet, pod: Obj) -> Obj:
        """The status the kubelet last generated, else the API's (a kubelet just restarted)."""
        return kubelet.status.get_pod_status(podutil.uid_of(pod)) or dict(pod.get("status") or {})

    # -- handlers --------------------------------------------------------------------------------
    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def pods(self, request: web.Request) -> web.Response:
        items = []
        for kubelet in self.host.kubelets.values():
            for key in list(kubelet.pods.values()):
                pod = self.host.pod(key)
                if pod is not None:
                    items.append(pod)
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        return web.Response(body=_encode(body), content_type="application/json")

    def _stats_kubelet(self, request: web.Request) -> Kubelet:
        """The kubelet a stats request is about (see the module docstring)."""
        name = request.query.get("node", "")
        kubelets = self.host.kubelets
        if name:
            kubelet = kubelets.get(name)
            if kubelet is None:
                raise LogError(404, f'node "{name}" is not served here')
            return kubelet
        if len(kubelets) != 1:
            raise LogError(400, f"this server serves {len(kubelets)} nodes: name one with ?node=<name>")
        return next(iter(kubelets.values()))

    async def stats_summary(self, request: web.Request) -> web.Response:
        only = request.query.get("only_cpu_and_memory", "") in ("1", "t", "T", "true", "TRUE", "True")
        try:
            kubelet = self._stats_kubelet(request)
            summary = await node_resources.stats_provider(kubelet).summary()
        except LogError as e:
            return _text(e.status, str(e))
        except cri.CriError as e:
            return _text(500, f"Internal Error: failed to get stats: {e}")
        body = resource_metrics.cpu_and_memory(summary) if only else summary
        return web.Response(body=_encode(body), content_type="application/json")

    async def resource_metrics(self, request: web.Request) -> web.Response:
        try:
            kubelet = self._stats_kubelet(request)
        except LogError as e:
            return _text(e.status, str(e))
        before = kubelet.clock.now()
        summary: Obj | None
        try:
            summary = await node_resources.stats_provider(kubelet).summary()
        except cri.CriError as e:
            log.warning("resource metrics of node %s: %s", kubelet.name, e)
            summary = None
        at = (before + kubelet.clock.now()) / 2  # when the figures were read, near enough
        return web.Response(text=resource_metrics.render(summary, at=at),
                            content_type="text/plain", charset="utf-8", headers={"X-Content-Type-Options": "nosniff"})

    async def container_logs(self, request: web.Request) -> web.StreamResponse:
        ns, name, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        try:
            opts = LogOptions.from_query(request.query)
        except LogOptionsError:
            return _text(400, '{"message": "Unable to decode query."}')
        if opts.validate():
            return _text(422, '{"message": "Invalid request."}')
        found = self.find(ns, name)
        if found is None:
            return _text(404, f'pod "{name}" does not exist')
        kubelet, pod = found
        if container_spec(pod, container) is None:
            return _text(404, f'container "{container}" not found in pod "{name}"')
        try:
            path, cid = await self._log_path(kubelet, pod, container, previous=opts.previous)
        except LogError as e:
            return _text(e.status, str(e))
        return await self._stream_log(request, kubelet, path, cid, opts)

    async def _log_path(self, kubelet: Kubelet, pod: Obj, container: str, *, previous: bool) -> tuple[str, str]:
        name = str(podutil.meta(pod).get("name"))
        cid = raw_container_id(log_container_id(self.pod_status(kubelet, pod), container, name, previous=previous))
        try:
            status = await kubelet.runtime.container_status(cid)
        except cri.CriError as e:
            raise LogError(400, f'failed to get container status "{cid}": {e}') from None
        return status.status.log_path, cid

    async def _stream_log(self, request: web.Request, kubelet: Kubelet, path: str, cid: str,
                          opts: LogOptions) -> web.StreamResponse:
        async def running() -> bool:
            try:
                status = await kubelet.runtime.container_status(cid)
            except cri.CriError:
                return False
            return status.status.state == cri.ContainerState.CONTAINER_RUNNING

        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        async for chunk in crilog.read_messages(path, opts, now=kubelet.clock.now(), running=running):
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    # -- streaming -------------------------------------------------------------------------------
    def _running_container_id(self, kubelet: Kubelet, pod: Obj, container: str) -> str:
        cs = _container_status(self.pod_status(kubelet, pod), container)
        if cs is None or (cs.get("state") or {}).get("running") is None or not cs.get("containerID"):
            raise LogError(404, f'container not found ("{container}")')
        return raw_container_id(str(cs["containerID"]))

    async def exec(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, "exec")

    async def attach(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, "attach")

    async def port_forward(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, "portForward")

    async def _stream(self, request: web.Request, kind: str) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["pod"]
        found = self.find(ns, name)
        if found is None:
            return _text(404, "pod does not exist")
        kubelet, pod = found
        uid = request.match_info.get("uid")
        if uid and uid != podutil.uid_of(pod):
            return _text(404, "pod does not exist")
        try:
            url = await self._stream_url(request, kind, kubelet, pod)
        except LogError as e:
            return _text(e.status, str(e))
        except cri.CriError as e:
            return _text(_STATUS_OF_CODE.get(e.code, 500), str(e))
        parts = urlsplit(url)
        target = Target(parts.hostname or "127.0.0.1", parts.port or 80,
                        parts.path + (f"?{parts.query}" if parts.query else ""))
        translation = streamtranslate.translation_for(request, kind)
        if not getattr(kubelet.runtime, "streaming_needs_translation", False):
            translation = None
        try:
            if translation == streamtranslate.TUNNEL:
                return await streamtranslate.tunnel_port_forward(request, target)
            if translation is not None:
                streams = streamtranslate.ExecStreams(*stream_flags(request.query))
                return await streamtranslate.translate_exec(request, target, streams)
            return await proxy_upgrade(request, target)
        except (UpgradeError, streamtranslate.TranslateError, SpdyStreamError) as e:
            return _text(502, f"error dialing the runtime's streaming server: {e}")

    async def _stream_url(self, request: web.Request, kind: str, kubelet: Kubelet, pod: Obj) -> str:
        runtime = kubelet.runtime
        if kind == "portForward":
            rs = kubelet.cache.get(podutil.uid_of(pod))
            ready = rs.ready_sandboxes() if rs is not None else []
            if not ready:
                raise LogError(404, f'pod "{podutil.meta(pod).get("name")}" has no running sandbox')
            ports = [int(p) for p in request.query.getall("port", []) if p.isdigit()]
            return await runtime.port_forward(ready[0].id, ports)
        container = request.match_info["container"]
        stdin, stdout, stderr, tty = stream_flags(request.query)
        cid = self._running_container_id(kubelet, pod, container)
        if kind == "exec":
            command = list(request.query.getall("command", []))
            return await runtime.exec(cid, command, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr)
        return await runtime.attach(cid, stdin=stdin, tty=tty, stdout=stdout, stderr=stderr)


async def serve(host: KubeletHost, *, address: str, port: int) -> tuple[KubeletServer | None, str]:
    """Start a host's server unless `port` is 0; (None, why) when it cannot listen, so a node
    whose port is taken still runs its pods (logs and exec are then unavailable)."""
    if port == 0:
        return None, "the kubelet server is off (--port 0)"
    server = KubeletServer(host, address=address, port=port)
    try:
        await server.start()
    except OSError as e:
        await server.stop()
        return None, f"the kubelet server cannot listen on {address}:{port}: {e}; logs and exec are unavailable"
    return server, f"kubelet server on http://{address}:{server.port} (plain HTTP)"
