"""A slim, read-only view of cached pods: only the fields workload controllers read, decoded
straight from the informer cache's JSON bytes.

Why. A ReplicaSet sync lists every pod of its namespace from the cache. The cache keeps pods as
compact JSON (`kubecore.client.codec`) and a full decode of a ~3.5 KB pod (spec, managedFields,
...) costs far more than the sync uses: with 2,000 pods a sync spent most of its time in
`msgspec.json.decode`. Decoding into the typed structs below skips every other field inside
msgspec, then `to_builtins` gives back a plain dict of the same shape as the API object (fields
that were absent stay absent), so the helpers in `controller_utils` work on it unchanged.

What is kept: metadata (name, namespace, uid, resourceVersion, generation-free fields a pod has:
labels, annotations, ownerReferences, creationTimestamp, deletionTimestamp), spec.nodeName and
status (phase, the conditions' type/status/lastTransitionTime, containerStatuses' restartCount).
A view must never be written back to the API server: it is not the whole object.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from kubecore.client.indexer import NAMESPACE_INDEX, Indexer

Obj = dict[str, Any]


class _OwnerRef(msgspec.Struct, omit_defaults=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    blockOwnerDeletion: bool | None = None


class _Meta(msgspec.Struct, omit_defaults=True):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resourceVersion: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[_OwnerRef] | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None


class _Spec(msgspec.Struct, omit_defaults=True):
    nodeName: str | None = None


class _Condition(msgspec.Struct, omit_defaults=True):
    type: str = ""
    status: str = ""
    lastTransitionTime: str | None = None


class _ContainerStatus(msgspec.Struct, omit_defaults=True):
    restartCount: int = 0


class _Status(msgspec.Struct, omit_defaults=True):
    phase: str | None = None
    conditions: list[_Condition] | None = None
    containerStatuses: list[_ContainerStatus] | None = None


class _Pod(msgspec.Struct, omit_defaults=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)


_decoder = msgspec.json.Decoder(_Pod)


def pod_view(raw: bytes) -> Obj:
    """The view of one pod from its JSON bytes."""
    out: Obj = msgspec.to_builtins(_decoder.decode(raw))
    return out


def iter_namespace_pod_views(indexer: Indexer, namespace: str) -> Iterator[Obj]:
    """Views of every cached pod in `namespace` (from the indexer's entries; no full decode)."""
    codec = indexer.codec
    for key in indexer.index_keys(NAMESPACE_INDEX, namespace):
        entry = indexer.entry(key)
        if entry is not None:
            yield pod_view(codec.raw(entry))


def namespace_pod_views(indexer: Indexer, namespace: str) -> list[Obj]:
    return list(iter_namespace_pod_views(indexer, namespace))
