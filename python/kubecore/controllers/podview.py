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

Views are cached per indexer entry: the cache's entries are immutable bytes, so a pod whose entry
is the same object as last time has the same view, and a sync of a namespace with 10,000 pods
costs 10,000 dictionary lookups instead of 10,000 decodes (at most `MAX_VIEWS` are kept per
cache, oldest out first). Views are therefore shared between callers and must never be mutated.

Workload controllers read the pods of *one* owner, not of a whole namespace: with
`POD_OWNER_INDEX` (ask the shared pod informer for it: `indexers={POD_OWNER_INDEX: pod_owner_index}`)
the informer files each pod under "<namespace>/<controller uid>" (or "<namespace>/" when it
has no controller), so `owned_pod_views` (a controller's pods plus the namespace's orphans, all a
claim can touch) costs in proportion to that owner's pods, not to the namespace's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any
from weakref import WeakKeyDictionary

import msgspec

from kubecore.client.indexer import NAMESPACE_INDEX, Indexer
from kubecore.controllers.controller_utils import OWNER_INDEX, namespace_owner_index

Obj = dict[str, Any]


class OwnerRefView(msgspec.Struct, omit_defaults=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    blockOwnerDeletion: bool | None = None


class MetaView(msgspec.Struct, omit_defaults=True):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resourceVersion: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[OwnerRefView] | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None


class SpecView(msgspec.Struct, omit_defaults=True):
    nodeName: str | None = None


class ConditionView(msgspec.Struct, omit_defaults=True):
    type: str = ""
    status: str = ""
    lastTransitionTime: str | None = None


class _ContainerStatus(msgspec.Struct, omit_defaults=True):
    restartCount: int = 0


class _Status(msgspec.Struct, omit_defaults=True):
    phase: str | None = None
    conditions: list[ConditionView] | None = None
    containerStatuses: list[_ContainerStatus] | None = None


class _Pod(msgspec.Struct, omit_defaults=True):
    metadata: MetaView = msgspec.field(default_factory=MetaView)
    spec: SpecView = msgspec.field(default_factory=SpecView)
    status: _Status = msgspec.field(default_factory=_Status)


_decoder = msgspec.json.Decoder(_Pod)


def pod_view(raw: bytes) -> Obj:
    """The view of one pod from its JSON bytes."""
    out: Obj = msgspec.to_builtins(_decoder.decode(raw))
    return out


MAX_VIEWS = 16384
"""Views kept per indexer (a view is ~2 KB): an owner of 10,000 pods still syncs from cached views,
and a cache of 150,000 controlled pods costs ~30 MB of views, not ~300."""

_VIEWS: WeakKeyDictionary[Indexer, dict[str, tuple[bytes, Obj]]] = WeakKeyDictionary()
"""Per indexer: key -> (the entry a view was made from, the view)."""


def _views_of(indexer: Indexer) -> dict[str, tuple[bytes, Obj]]:
    views = _VIEWS.get(indexer)
    if views is None:
        views = _VIEWS[indexer] = {}
    elif len(views) > 2 * len(indexer) + 1024:  # pods deleted since: drop their views
        for key in [k for k in views if indexer.entry(k) is None]:
            del views[key]
    return views


def _cached_view(indexer: Indexer, views: dict[str, tuple[bytes, Obj]], key: str) -> Obj | None:
    entry = indexer.entry(key)
    if entry is None:
        return None
    cached = views.get(key)
    if cached is not None and cached[0] is entry:
        return cached[1]
    view = pod_view(indexer.codec.raw(entry))
    if cached is None and len(views) >= MAX_VIEWS:
        del views[next(iter(views))]  # the oldest view goes first
    views[key] = (entry, view)
    return view


def _views(indexer: Indexer, keys: Iterable[str]) -> list[Obj]:
    views = _views_of(indexer)
    out = []
    for key in keys:
        view = _cached_view(indexer, views, key)
        if view is not None:
            out.append(view)
    return out


def iter_namespace_pod_views(indexer: Indexer, namespace: str) -> Iterator[Obj]:
    """Views of every cached pod in `namespace` (shared, read-only; see the module docstring)."""
    yield from _views(indexer, indexer.index_keys(NAMESPACE_INDEX, namespace))


def namespace_pod_views(indexer: Indexer, namespace: str) -> list[Obj]:
    return _views(indexer, indexer.index_keys(NAMESPACE_INDEX, namespace))


POD_OWNER_INDEX = OWNER_INDEX
pod_owner_index = namespace_owner_index


def controlled_pod_views(indexer: Indexer, namespace: str, uid: str) -> list[Obj]:
    """Views of the pods whose controller has `uid` (needs POD_OWNER_INDEX)."""
    return _views(indexer, indexer.index_keys(POD_OWNER_INDEX, f"{namespace}/{uid}"))


def owned_pod_views(indexer: Indexer, namespace: str, uid: str) -> list[Obj]:
    """The pods a claim by the controller `uid` can touch: its own plus the namespace's orphans."""
    return (controlled_pod_views(indexer, namespace, uid)
            + _views(indexer, indexer.index_keys(POD_OWNER_INDEX, f"{namespace}/")))
