"""Binding a pod to a node: `POST .../pods/NAME/binding` and `POST .../bindings` (what a
scheduler writes). Sets spec.nodeName and the PodScheduled condition in one conditional write, as
upstream's BindingREST: a pod that is already bound or being deleted is a 409 Conflict.

A binding is the one write per pod a scheduler makes, so the pod is not decoded whole: the stored
bytes are split into their top-level fields, metadata and spec are only read for the two fields
that decide a conflict, nodeName is written into the spec's bytes and the small status is
re-encoded; metadata (managedFields and all) is written back byte for byte. A pod whose bytes
do not have the stored layout, or a binding with annotations, takes the general path (decode,
edit, encode).
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubecore.api import errors
from kubecore.api.meta import now_rfc3339
from kubecore.api.registry import ResourceType
from kubecore.apiserver.storage import ObjectStore, decode, encode

Obj = dict[str, Any]


class _Meta(msgspec.Struct):
    deletionTimestamp: Any = None


class _Spec(msgspec.Struct):
    nodeName: Any = None


_fields = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_meta = msgspec.json.Decoder(_Meta).decode
_spec = msgspec.json.Decoder(_Spec).decode
_object = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.encode
_DELETION = b'"deletionTimestamp":'
_NODE_NAME = b'"nodeName":'


async def bind(objects: ObjectStore, pods: ResourceType, namespace: str, pod_name: str, binding: Obj) -> None:
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not isinstance(node, str) or not node:
        raise errors.invalid(("", "Binding"), pod_name, [{"reason": "FieldValueRequired", "field": "target.name",
                                                          "message": "Required value"}])
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(("", "Binding"), pod_name, [{"reason": "FieldValueNotSupported", "field": "target.kind",
                                                          "message": f'Unsupported value: "{target["kind"]}": supported values: "Node"'}])
    annotations = (binding.get("metadata") or {}).get("annotations") or {}
    for _ in range(100):  # concurrent status writes only mean: read again
        kv = objects.get_stored(pods, namespace, pod_name)
        value = None if annotations else _bound_bytes(pods, pod_name, kv.value, node)
        if value is None:
            value = _bound_object(pods, pod_name, decode(kv.value, kv.mod_revision), node, annotations)
        try:
            await objects.replace_stored(pods, namespace, pod_name, value, expect_revision=kv.mod_revision)
            return
        except errors.StatusError as e:
            if e.code != 409:
                raise
    raise errors.conflict(pods, pod_name, "too many concurrent writes; try again")


def _check_bindable(pods: ResourceType, pod_name: str, deletion_timestamp: Any, node_name: Any) -> None:
    if deletion_timestamp:
        raise errors.conflict(pods, pod_name, f"pod {pod_name} is being deleted, cannot be assigned to a host")
    if node_name:
        raise errors.conflict(pods, pod_name, f'pod {pod_name} is already assigned to node "{node_name}"')


def _bound_bytes(pods: ResourceType, pod_name: str, stored: bytes, node: str) -> bytes | None:
    """The stored form of the pod bound to `node`, editing only spec and status; None when the
    bytes are not in the stored layout (metadata first, spec an object without nodeName)."""
    fields = _fields(stored)
    meta, spec = fields.get("metadata"), fields.get("spec")
    if meta is None or spec is None or next(iter(fields)) != "metadata":
        return None
    body = bytes(spec)
    try:
        # A key is `"name":` in the bytes only where it is a key (inside a string the quotes are
        # escaped): without one, the field is absent and nothing needs decoding. With one (here
        # or nested deeper), the struct decode says what it holds.
        deletion = _meta(meta).deletionTimestamp if _DELETION in bytes(meta) else None
        node_name = _spec(spec).nodeName if _NODE_NAME in body else None
        status = _object(fields["status"]) if "status" in fields else {}
    except msgspec.ValidationError:
        return None
    _check_bindable(pods, pod_name, deletion, node_name)
    if node_name is not None or body[:1] != b"{":  # nodeName written out empty: let the general path edit it
        return None
    fields["spec"] = msgspec.Raw(b'{"nodeName":' + _encode(node) + (b"" if body == b"{}" else b",") + body[1:])
    fields["status"] = msgspec.Raw(_encode(_scheduled(status)))
    return _encode(fields)


def _bound_object(pods: ResourceType, pod_name: str, pod: Obj, node: str, annotations: dict[str, Any]) -> bytes:
    """The general path: the decoded pod (a fresh decoding nothing else holds) edited in place."""
    meta, spec = pod["metadata"], pod.setdefault("spec", {})
    _check_bindable(pods, pod_name, meta.get("deletionTimestamp"), spec.get("nodeName"))
    spec["nodeName"] = node
    if annotations:
        meta.setdefault("annotations", {}).update(annotations)
    pod["status"] = _scheduled(pod.get("status") or {})
    return encode(pod)


def _scheduled(status: Obj) -> Obj:
    """`status` with the PodScheduled condition True (replacing any earlier one)."""
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
    status["conditions"] = conds
    return status
