"""The pod subresources served by the pod's kubelet: `pods/log` (GET) and `pods/exec`,
`pods/attach`, `pods/portforward` (GET or POST with an upgrade), as upstream's LogREST and the
Exec/Attach/PortForward REST (pkg/registry/core/pod/rest, LogLocation/streamLocation).

Where the kubelet is: the pod's spec.nodeName -> that Node's address (InternalIP first, then
InternalDNS, ExternalIP, ExternalDNS, Hostname: kubeadm's --kubelet-preferred-address-types) and
status.daemonEndpoints.kubeletEndpoint.Port (10250 when unset), over plain HTTP (the kubelet
serves no TLS yet).

pods/log: the PodLogOptions query is checked as upstream (422 Invalid with upstream's field
errors; a pod with several containers needs `container`: 400 `a container name must be
specified for pod P, choose one of: [a b]`; an unknown one: `container c is not valid for pod P`).
A pod not yet on a node has an empty log. The kubelet's `/containerLogs` answer is streamed
back chunk by chunk (a `follow` stays open until the kubelet ends it); a kubelet error becomes a
Status as upstream's GenericHttpResponseChecker makes it (400 BadRequest and 500 InternalError
with the kubelet's text; other codes the generic message).

exec/attach/portforward: the container is checked as for exec upstream (init containers named
too), the pod must have a node (`pod P does not have a host assigned`), and the request is
passed to the kubelet's /exec, /attach or /portForward as an upgrade (`client.upgrade`): SPDY
or websocket, whatever the client asked, bytes copied both ways after the 101.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from kubecore.api import errors
from kubecore.api.podlogoptions import LogOptions, LogOptionsError
from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver.storage import ObjectStore
from kubecore.client.upgrade import Target, UpgradeError, proxy_upgrade

Obj = dict[str, Any]
LOG = "log"
CONNECT = {"exec": "exec", "attach": "attach", "portforward": "portForward"}
"""Subresource -> the kubelet's path."""
LONG_RUNNING = frozenset({LOG, *CONNECT})
ADDRESS_TYPES = ("InternalIP", "InternalDNS", "ExternalIP", "ExternalDNS", "Hostname")
DEFAULT_KUBELET_PORT = 10250
MAX_ERROR_BODY = 50_000
CONNECT_TIMEOUT = 10.0


def _names(section: list[Obj]) -> list[str]:
    return [str(c.get("name")) for c in section]


def _has_container(spec: Obj, name: str) -> bool:
    return any(name in _names(spec.get(s) or []) for s in ("containers", "initContainers", "ephemeralContainers"))


def _container(pod: Obj, container: str, *, choices: Callable[[Obj], str]) -> str:
    """The named container (it must exist), else the only one; several need a name, and the
    message offers `choices(spec)`."""
    spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
    if container:
        if not _has_container(spec, container):
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        return container
    containers = spec.get("containers") or []
    if len(containers) == 1:
        return str(containers[0].get("name"))
    if not containers:
        raise errors.bad_request(f"a container name must be specified for pod {name}")
    raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: {choices(spec)}")


def _every_container(spec: Obj) -> str:
    every = [*_names(spec.get("initContainers") or []), *_names(spec.get("containers") or []),
             *_names(spec.get("ephemeralContainers") or [])]
    return f"[{' '.join(every)}]"


def _app_and_init_containers(spec: Obj) -> str:
    out = f"[{' '.join(_names(spec.get('containers') or []))}]"
    inits = _names(spec.get("initContainers") or [])
    return out + (f" or one of the init containers: [{' '.join(inits)}]" if inits else "")


def log_container(pod: Obj, container: str) -> str:
    """LogLocation's validateContainer: the container a log request reads."""
    return _container(pod, container, choices=_every_container)


def stream_container(pod: Obj, container: str) -> str:
    """streamLocation's check of the container of exec/attach."""
    return _container(pod, container, choices=_app_and_init_containers)


def kubelet_endpoint(node: Obj) -> tuple[str, int]:
    """(address, port) of a Node's kubelet (see the module docstring)."""
    status = node.get("status") or {}
    addresses = status.get("addresses") or []
    port = int(((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 0)
    for kind in ADDRESS_TYPES:
        for a in addresses:
            if a.get("type") == kind and a.get("address"):
                return str(a["address"]), port or DEFAULT_KUBELET_PORT
    name = node["metadata"]["name"]
    raise errors.internal(f"no preferred addresses found; known addresses: {addresses} (node {name})")


def _exec_query(query: Any, command_allowed: bool) -> str:
    """PodExecOptions/PodAttachOptions -> the kubelet's streaming query (streamParams)."""
    params: list[tuple[str, str]] = []
    for api_key, kubelet_key in (("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty")):
        if (query.get(api_key) or "").lower() in ("true", "1"):
            params.append((kubelet_key, "1"))
    if command_allowed:
        params.extend(("command", c) for c in query.getall("command", []))
    return urlencode(params)


class PodStreams:
    """The handlers (see the module docstring), over the object store."""

    def __init__(self, registry: Registry, objects: ObjectStore) -> None:
        self.registry = registry
        self.objects = objects

    def _node(self, pod: Obj) -> tuple[str, int] | None:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            return None
        nodes = self.registry.get("", "v1", "nodes")
        assert nodes is not None
        return kubelet_endpoint(self.objects.get(nodes, "", str(node_name)))

    async def log(self, request: web.Request, rt: ResourceType, namespace: str, name: str) -> web.StreamResponse:
        try:
            opts = LogOptions.from_query(request.query)
        except LogOptionsError as e:
            raise errors.bad_request(str(e)) from None
        problems = opts.validate()
        if problems:
            raise errors.invalid(("", "PodLogOptions"), name, problems)
        pod = self.objects.get(rt, namespace, name)
        container = log_container(pod, opts.container)
        endpoint = self._node(pod)
        if endpoint is None:
            return web.Response(body=b"", content_type="text/plain")
        host, port = endpoint
        url = f"http://{_host(host)}:{port}/containerLogs/{namespace}/{name}/{container}"
        query = opts.kubelet_query()
        return await _relay_log(request, url + (f"?{urlencode(query)}" if query else ""), name=name)

    async def connect(self, request: web.Request, rt: ResourceType, *, subresource: str, namespace: str,
                      name: str) -> web.StreamResponse:
        pod = self.objects.get(rt, namespace, name)
        path = f"/{CONNECT[subresource]}/{namespace}/{name}"
        if subresource == "portforward":
            query = urlencode([("port", p) for p in request.query.getall("ports", [])])
        else:
            path += "/" + stream_container(pod, request.query.get("container", ""))
            query = _exec_query(request.query, subresource == "exec")
        endpoint = self._node(pod)
        if endpoint is None:
            raise errors.bad_request(f"pod {name} does not have a host assigned")
        host, port = endpoint
        try:
            return await proxy_upgrade(request, Target(host, port, path + (f"?{query}" if query else "")))
        except UpgradeError as e:
            raise errors.internal(f"error dialing backend: {e}") from None


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _kubelet_error(status: int, text: str, name: str) -> errors.StatusError:
    """GenericHttpResponseChecker: a kubelet's error answer as a Status."""
    if status == 400:
        return errors.bad_request(text)
    if status == 500:
        return errors.internal(text)
    if status == 404:
        return errors.StatusError(404, "NotFound",
                                  f"the server could not find the requested resource ( pods/log {name})",
                                  {"name": name, "kind": "pods/log", "causes": [{"message": text}]})
    return errors.StatusError(status, "Unknown", f"the server responded with the status code {status} but did not "
                                                 f"return more information ( pods/log {name})",
                              {"name": name, "kind": "pods/log", "causes": [{"message": text}]})


async def _relay_log(request: web.Request, url: str, *, name: str) -> web.StreamResponse:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
    resp: web.StreamResponse | None = None
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
        try:
            async with session.get(url) as upstream:
                if not 200 <= upstream.status <= 206:
                    text = (await upstream.content.read(MAX_ERROR_BODY)).decode(errors="replace").strip()
                    raise _kubelet_error(upstream.status, text, name)
                resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
                resp.enable_chunked_encoding()
                await resp.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await resp.write(chunk)
        except aiohttp.ClientError as e:
            if resp is None:
                raise errors.internal(f'Get "{url}": {e}') from None
            # the kubelet went away mid-stream: end what was sent (the headers are out)
    await resp.write_eof()
    return resp
