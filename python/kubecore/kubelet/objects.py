"""The ConfigMaps and Secrets a kubelet reads for its pods' env vars and volumes (upstream
pkg/kubelet/configmap and secret managers, the "get with a TTL cache" strategy).

    objects = ApiObjects(rest, clock=clock)
    cm = await objects.get(CONFIGMAP, "default", "settings")   # ObjectNotFound: configmap "settings" not found

Guarantees:
- One GET by name per object per `ttl` seconds (1 s by default: enough to share one read
  between a pod's env vars, its volumes and its containers within a sync, short enough that a
  ConfigMap created or changed after a failure is seen on the next retry). Answers "not found"
  are cached the same way.
- A missing object raises `ObjectNotFound`, whose message is upstream's (`configmap "x" not
  found`, `secret "x" not found`: the kubelet's own wording, singular, not the API server's);
  any other failure raises `ObjectUnavailable`. Only the first may be skipped by `optional`.
- `configmap_data` / `secret_data` give the keys' bytes: a ConfigMap's `data` (UTF-8) and
  `binaryData` (base64), a Secret's `data` (base64) and, if an object still carries it,
  `stringData`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Protocol

from kubecore.client import errors
from kubecore.client.clock import Clock
from kubecore.client.rest import RestClient

Obj = dict[str, Any]
CONFIGMAP, SECRET = "configmap", "secret"
_RESOURCES = {CONFIGMAP: "configmaps", SECRET: "secrets"}
DEFAULT_TTL = 1.0


class ObjectError(Exception):
    """A referenced ConfigMap or Secret could not be read."""


class ObjectNotFound(ObjectError):
    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f'{kind} "{name}" not found')
        self.kind = kind
        self.name = name


class ObjectUnavailable(ObjectError):
    pass


class ObjectSource(Protocol):
    async def get(self, kind: str, namespace: str, name: str) -> Obj:
        """The object, or ObjectNotFound / ObjectUnavailable."""
        ...


class ApiObjects:
    """ConfigMaps and Secrets by GET through the kubelet's client (see the module docstring)."""

    def __init__(self, rest: RestClient, *, clock: Clock, ttl: float = DEFAULT_TTL) -> None:
        self.rest = rest
        self.clock = clock
        self.ttl = ttl
        self._cache: dict[tuple[str, str, str], tuple[float, Obj | None]] = {}
        self.reads = 0

    async def get(self, kind: str, namespace: str, name: str) -> Obj:
        key = (kind, namespace, name)
        now = self.clock.now()
        hit = self._cache.get(key)
        if hit is None or now - hit[0] >= self.ttl:
            hit = (now, await self._read(kind, namespace, name))
            self._cache[key] = hit
            if len(self._cache) > 4096:
                self._expire(now)
        if hit[1] is None:
            raise ObjectNotFound(kind, name)
        return hit[1]

    async def _read(self, kind: str, namespace: str, name: str) -> Obj | None:
        self.reads += 1
        try:
            obj: Obj = await self.rest.get_json(f"/api/v1/namespaces/{namespace}/{_RESOURCES[kind]}/{name}")
        except errors.NotFound:
            return None
        except errors.ClientError as e:
            raise ObjectUnavailable(f"couldn't get {kind} {namespace}/{name}: {e}") from e
        return obj

    def _expire(self, now: float) -> None:
        for key in [k for k, (t, _) in self._cache.items() if now - t >= self.ttl]:
            del self._cache[key]


class NoObjects:
    """The source of a kubelet without an API client: every read fails."""

    async def get(self, kind: str, namespace: str, name: str) -> Obj:
        raise ObjectUnavailable(f"couldn't get {kind} {namespace}/{name}, no kubeClient defined")


def _b64(value: Any) -> bytes:
    try:
        return base64.b64decode(str(value), validate=False)
    except (binascii.Error, ValueError):
        return b""


def configmap_data(cm: Obj) -> dict[str, bytes]:
    out = {str(k): str(v).encode() for k, v in (cm.get("data") or {}).items()}
    out.update({str(k): _b64(v) for k, v in (cm.get("binaryData") or {}).items()})
    return out


def secret_data(secret: Obj) -> dict[str, bytes]:
    out = {str(k): _b64(v) for k, v in (secret.get("data") or {}).items()}
    out.update({str(k): str(v).encode() for k, v in (secret.get("stringData") or {}).items()})
    return out


def object_data(kind: str, obj: Obj) -> dict[str, bytes]:
    return configmap_data(obj) if kind == CONFIGMAP else secret_data(obj)
