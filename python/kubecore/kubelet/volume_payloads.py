"""The files of configMap, secret, downwardAPI and projected volumes: path -> (bytes, mode), as
upstream's volume plugins build them (MakePayload / CollectData) before the atomic writer.

- configMap / secret: without `items`, every key (a ConfigMap's data and binaryData, a Secret's
  data) becomes a file named after it with `defaultMode` (0644); with `items`, only those keys,
  at `path`, with the item's `mode` or `defaultMode`. A missing object fails the volume (upstream's
  `configmap "x" not found`) unless `optional` (then an empty volume); a missing item key fails
  it ("configmap references non-existent config key: k", "secret references non-existent secret
  key: k") unless `optional`.
- downwardAPI: one file per item, `fieldRef` (metadata fields; labels and annotations as
  `k="v"` lines) or `resourceFieldRef` (`containerName` required in volumes, limits default to
  the node's allocatable).
- projected: the union of its sources' files (configMap, secret, downwardAPI as above; a
  source's own `items` and `optional`), all with the volume's `defaultMode` unless an item says
  otherwise. `serviceAccountToken` sources are left out: kubecore's API server issues no tokens
  (it has no authentication), so there is nothing to write; clusterTrustBundle likewise.
Failures are `PayloadError`s carrying upstream's message.
"""

from __future__ import annotations

from typing import Any

from kubecore.kubelet import downward, podutil
from kubecore.kubelet.atomic_writer import FileProjection
from kubecore.kubelet.objects import CONFIGMAP, SECRET, ObjectError, ObjectNotFound, ObjectSource, object_data

Obj = dict[str, Any]
Payload = dict[str, FileProjection]
DEFAULT_MODE = 0o644
_MISSING_KEY = {CONFIGMAP: "configmap references non-existent config key: {}",
                SECRET: "secret references non-existent secret key: {}"}


class PayloadError(Exception):
    """A volume's files cannot be built; the message is upstream's."""


def _mode(value: Any, default: int) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default


async def object_payload(pod: Obj, kind: str, source: Obj, *, objects: ObjectSource, default_mode: int) -> Payload:
    """A configMap or secret volume (or projected source): `source` has name/items/optional."""
    namespace = str(podutil.meta(pod).get("namespace") or "")
    name = str((source.get("secretName") if kind == SECRET else None) or source.get("name") or "")
    optional = bool(source.get("optional"))
    try:
        data = object_data(kind, await objects.get(kind, namespace, name))
    except ObjectNotFound as e:
        if optional:
            return {}
        raise PayloadError(str(e)) from None
    except ObjectError as e:
        raise PayloadError(str(e)) from None
    items = source.get("items") or []
    if not items:
        return {key: FileProjection(value, default_mode) for key, value in data.items()}
    out: Payload = {}
    for item in items:
        key = str(item.get("key") or "")
        if key not in data:
            if optional:
                continue
            raise PayloadError(_MISSING_KEY[kind].format(key))
        out[str(item.get("path") or key)] = FileProjection(data[key], _mode(item.get("mode"), default_mode))
    return out


def downward_payload(pod: Obj, items: list[Obj], *, allocatable: dict[str, str], default_mode: int) -> Payload:
    out: Payload = {}
    for item in items:
        path = str(item.get("path") or "")
        mode = _mode(item.get("mode"), default_mode)
        try:
            if item.get("fieldRef"):
                value = downward.metadata_value(pod, str(item["fieldRef"].get("fieldPath") or ""))
            elif item.get("resourceFieldRef"):
                ref = item["resourceFieldRef"]
                container = downward.find_container(pod, str(ref.get("containerName") or ""))
                value = downward.resource_value(container, ref, allocatable=allocatable)
            else:
                continue
        except downward.DownwardError as e:
            raise PayloadError(str(e)) from None
        out[path] = FileProjection(value.encode(), mode)
    return out


async def projected_payload(pod: Obj, volume: Obj, *, objects: ObjectSource, allocatable: dict[str, str]) -> Payload:
    default_mode = _mode(volume.get("defaultMode"), DEFAULT_MODE)
    out: Payload = {}
    errors: list[str] = []
    for source in volume.get("sources") or []:
        try:
            if source.get("configMap") is not None:
                out.update(await object_payload(pod, CONFIGMAP, source["configMap"], objects=objects,
                                                default_mode=default_mode))
            elif source.get("secret") is not None:
                out.update(await object_payload(pod, SECRET, source["secret"], objects=objects,
                                                default_mode=default_mode))
            elif source.get("downwardAPI") is not None:
                out.update(downward_payload(pod, source["downwardAPI"].get("items") or [], allocatable=allocatable,
                                            default_mode=default_mode))
        except PayloadError as e:
            errors.append(str(e))
    if errors:
        raise PayloadError(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")
    return out


async def volume_payload(pod: Obj, volume: Obj, kind: str, *, objects: ObjectSource,
                         allocatable: dict[str, str]) -> Payload:
    """The files of `volume`, whose type `kind` is configMap, secret, downwardAPI or projected."""
    source = volume.get(kind) or {}
    if kind == "projected":
        return await projected_payload(pod, source, objects=objects, allocatable=allocatable)
    default_mode = _mode(source.get("defaultMode"), DEFAULT_MODE)
    if kind == "downwardAPI":
        return downward_payload(pod, source.get("items") or [], allocatable=allocatable, default_mode=default_mode)
    return await object_payload(pod, CONFIGMAP if kind == "configMap" else SECRET, source, objects=objects,
                                default_mode=default_mode)
