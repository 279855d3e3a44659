"""Running probe and lifecycle-hook handlers (upstream pkg/probe/{exec,http,tcp} and
kuberuntime's handlerRunner), for a node whose containers are real.

A handler is the API's `exec` / `httpGet` / `tcpSocket` / `grpc` / `sleep` object of a probe or
of a lifecycle hook. `Handlers` is the interface the prober and the runtime manager call; the
simulated runtime answers it from pod annotations instead (`kubecore.kubelet.sim.behaviour.SimHandlers`).

`RealHandlers` does what upstream does:
- exec: CRI ExecSync in the container with the probe's timeout; exit 0 is success, any other
  code a failure with the output as message; a timeout is a failure
  ("command [...] timed out"; upstream's ExecProbeTimeout behaviour).
- httpGet: GET scheme://host:port/path (host defaults to the pod IP; a named port is looked up in
  the container's ports), headers from httpHeaders, User-Agent "kube-probe/1.34" and Accept
  "*/*"; 200 <= code < 400 is success, else "HTTP probe failed with statuscode: N"; a connection
  failure or timeout is a failure with the error as message.
- tcpSocket: a TCP connection opened within the timeout is success.
- grpc: `grpc.health.v1.Health/Check` on the pod IP and port (`grpcprobe.py`); SERVING is success.
- sleep (hooks only): waits that many seconds on the clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from kubecore.client.clock import Clock
from kubecore.kubelet import cri, grpcprobe

Obj = dict[str, Any]
SUCCESS, FAILURE, UNKNOWN = "Success", "Failure", "Unknown"
PROBE_USER_AGENT = "kube-probe/1.34"
MAX_PROBE_OUTPUT = 10 * 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    result: str
    output: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a handler runs: the pod, its container, the runtime's container id and the pod's IP."""

    pod: Obj
    container: Obj
    container_id: str
    pod_ip: str


class Handlers(Protocol):
    async def probe(self, kind: str, target: Target, probe: Obj) -> Outcome:
        """Run one probe (`kind` is "liveness", "readiness" or "startup")."""
        ...

    async def hook(self, kind: str, target: Target, handler: Obj, *, timeout: float) -> str | None:
        """Run a lifecycle hook ("PostStart"/"PreStop"); None on success, else the error message."""
        ...


def resolve_port(port: Any, container: Obj) -> int | None:
    """An IntOrString port: a number, a numeric string, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    text = str(port)
    if text.isdigit():
        return int(text)
    for p in container.get("ports") or []:
        if p.get("name") == text and isinstance(p.get("containerPort"), int):
            return int(p["containerPort"])
    return None


def handler_kind(handler: Obj) -> str:
    for kind in ("exec", "httpGet", "tcpSocket", "grpc", "sleep"):
        if handler.get(kind) is not None:
            return kind
    return ""


class RealHandlers:
    """Handlers against real containers (see the module docstring)."""

    def __init__(self, runtime: cri.RuntimeService, *, clock: Clock) -> None:
        self.runtime = runtime
        self.clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False, force_close=True))
        return self._session

    async def probe(self, kind: str, target: Target, probe: Obj) -> Outcome:
        timeout = float(probe.get("timeoutSeconds") or 1)
        return await self.run(target, probe, timeout=timeout)

    async def hook(self, kind: str, target: Target, handler: Obj, *, timeout: float) -> str | None:
        if handler.get("sleep") is not None:
            await self.clock.sleep(float((handler["sleep"] or {}).get("seconds") or 0))
            return None
        outcome = await self.run(target, handler, timeout=timeout)
        return None if outcome.result == SUCCESS else outcome.output or f"{kind} hook failed"

    async def run(self, target: Target, handler: Obj, *, timeout: float) -> Outcome:
        kind = handler_kind(handler)
        if kind == "exec":
            return await self.exec(target, list((handler["exec"] or {}).get("command") or []), timeout=timeout)
        if kind == "httpGet":
            return await self.http_get(target, handler["httpGet"] or {}, timeout=timeout)
        if kind == "tcpSocket":
            return await self.tcp(target, handler["tcpSocket"] or {}, timeout=timeout)
        if kind == "grpc":
            spec = handler["grpc"] or {}
            healthy, message = await grpcprobe.check(target.pod_ip, int(spec.get("port") or 0),
                                                     str(spec.get("service") or ""), timeout=timeout)
            return Outcome(SUCCESS if healthy else FAILURE, message)
        return Outcome(UNKNOWN, "missing probe handler")

    async def exec(self, target: Target, command: list[str], *, timeout: float) -> Outcome:
        try:
            resp = await self.runtime.exec_sync(target.container_id, command, int(max(1, timeout)))
        except cri.DeadlineExceeded:
            return Outcome(FAILURE, f"command {go_strings(command)} timed out")
        except cri.CriError as e:
            return Outcome(UNKNOWN, str(e))
        output = (resp.stdout + resp.stderr)[:MAX_PROBE_OUTPUT].decode("utf-8", errors="replace")
        if resp.exit_code == 0:
            return Outcome(SUCCESS, output)
        return Outcome(FAILURE, output or f"command {go_strings(command)} exited with {resp.exit_code}")

    async def http_get(self, target: Target, spec: Obj, *, timeout: float) -> Outcome:
        port = resolve_port(spec.get("port"), target.container)
        if port is None:
            return Outcome(FAILURE, f"port {spec.get('port')!r} not found in the container")
        scheme = str(spec.get("scheme") or "HTTP").lower()
        host = str(spec.get("host") or target.pod_ip)
        path = str(spec.get("path") or "/")
        if not path.startswith("/"):
            path = "/" + path
        netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        url = f"{scheme}://{netloc}{path}"
        headers = {"User-Agent": PROBE_USER_AGENT, "Accept": "*/*"}
        for h in spec.get("httpHeaders") or []:
            headers[str(h.get("name"))] = str(h.get("value") or "")
        try:
            async with self._get_session().get(url, headers=headers, allow_redirects=True,
                                               timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                body = await resp.content.read(MAX_PROBE_OUTPUT)
                if 200 <= resp.status < 400:
                    return Outcome(SUCCESS, body.decode("utf-8", errors="replace"))
                return Outcome(FAILURE, f"HTTP probe failed with statuscode: {resp.status}")
        except asyncio.TimeoutError:
            return Outcome(FAILURE, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting '
                                    'headers)')
        except (aiohttp.ClientError, OSError) as e:
            return Outcome(FAILURE, f'Get "{url}": {e}')

    async def tcp(self, target: Target, spec: Obj, *, timeout: float) -> Outcome:
        port = resolve_port(spec.get("port"), target.container)
        if port is None:
            return Outcome(FAILURE, f"port {spec.get('port')!r} not found in the container")
        host = str(spec.get("host") or target.pod_ip)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except asyncio.TimeoutError:
            return Outcome(FAILURE, f"dial tcp {host}:{port}: i/o timeout")
        except OSError as e:
            return Outcome(FAILURE, f"dial tcp {host}:{port}: {e.strerror or e}")
        writer.close()
        return Outcome(SUCCESS)


def go_strings(items: list[str]) -> str:
    return "[" + " ".join(items) + "]"
