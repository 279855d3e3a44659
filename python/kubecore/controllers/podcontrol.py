"""How controllers write pods: create from a template, delete, patch, each with its Event
(upstream's controller.PodControlInterface and RealPodControl).

`PodControl` is the protocol controllers depend on (tests substitute a fake that records calls);
`RealPodControl` talks to the API server through a `RestClient` and reports what it did through an
event recorder, with upstream's reasons and messages:

    SuccessfulCreate  "Created pod: <name>"        FailedCreate  "Error creating: <error>"
    SuccessfulDelete  "Deleted pod: <name>"        FailedDelete  "Error deleting: <error>"

A create refused because the namespace is terminating records no event (the namespace controller
is about to delete everything anyway). A pod is created with `generateName: "<owner name>-"`,
the template's labels, annotations, finalizers and spec, and the controller reference; a
template without labels is refused before anything is sent, as upstream.

The request body of a template's pod is encoded once per owner version and reused for every pod
of a batch; the answer is decoded only as far as the new pod's name.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import msgspec

from kubecore.client.errors import NotFound
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, has_status_cause, meta, object_key,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SUCCESSFUL_CREATE = "SuccessfulCreate"
FAILED_CREATE = "FailedCreate"
SUCCESSFUL_DELETE = "SuccessfulDelete"
FAILED_DELETE = "FailedDelete"
NORMAL, WARNING = "Normal", "Warning"


class EventRecorderLike(Protocol):
    """What a controller needs of `kubecore.client.events.EventRecorder`."""

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None: ...


class NullRecorder:
    """A recorder that drops every event (for tests and tools that do not report)."""

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None:
        return None


class PodControl(Protocol):
    async def create_pods(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj) -> None:
        """Create one pod from `template`, controlled by `owner`."""
        ...

    async def delete_pod(self, namespace: str, name: str, owner: Obj) -> None:
        """Delete one pod on behalf of `owner` (raises the API error, NotFound included)."""
        ...

    async def patch_pod(self, namespace: str, name: str, patch: Obj) -> None:
        """Strategic-merge-patch one pod."""
        ...


class NoLabels(ValueError):
    """The pod template has no labels: its pods could never be selected."""


def pods_prefix(owner_name: str) -> str:
    """generateName for an owner's pods: "<name>-" (upstream's getPodsPrefix)."""
    return f"{owner_name}-"


def pod_from_template(template: Obj, *, owner: Obj, controller_ref: Obj | None) -> Obj:
    """The pod `owner` creates from `template` (upstream's GetPodFromTemplate). Shares no
    mutable structure with the arguments except what msgspec encoding reads."""
    tmeta = template.get("metadata") or {}
    pod_meta: Obj = {"generateName": pods_prefix(str(meta(owner).get("name", "")))}
    for field in ("labels", "annotations"):
        value = tmeta.get(field)
        if value:
            pod_meta[field] = dict(value)
    if tmeta.get("finalizers"):
        pod_meta["finalizers"] = list(tmeta["finalizers"])
    if controller_ref is not None:
        pod_meta["ownerReferences"] = [dict(controller_ref)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": msgspec.json.decode(msgspec.json.encode(template.get("spec") or {}))}


class _CreatedMeta(msgspec.Struct):
    name: str = ""


class _Created(msgspec.Struct):
    metadata: _CreatedMeta = msgspec.field(default_factory=_CreatedMeta)


_created_decoder = msgspec.json.Decoder(_Created)


class RealPodControl:
    """`PodControl` over the API server (`pods`: the core/v1 pods `ResourceClient`)."""

    def __init__(self, pods: ResourceClient, recorder: EventRecorderLike) -> None:
        self.pods = pods
        self.recorder = recorder
        self._body_key: tuple[str, str, str, str] | None = None
        self._body = b""

    def _encoded(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj) -> bytes:
        m = meta(owner)
        key = (namespace, str(m.get("uid", "")), str(m.get("resourceVersion", "")), str(controller_ref.get("uid")))
        if key != self._body_key:
            pod = pod_from_template(template, owner=owner, controller_ref=controller_ref)
            if not pod["metadata"].get("labels"):
                raise NoLabels("unable to create pods, no labels")
            self._body, self._body_key = msgspec.json.encode(pod), key
        return self._body

    async def create_pods(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj) -> None:
        body = self._encoded(namespace, template, owner, controller_ref)
        try:
            resp = await self.pods.rest.request("POST", self.pods.info.path(namespace=namespace), body=body,
                                                content_type="application/json")
        except Exception as e:
            if not has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                self.recorder.event(owner, WARNING, reason=FAILED_CREATE, message=f"Error creating: {e}")
            raise
        name = _created_decoder.decode(resp.body).metadata.name if resp.body else ""
        log.debug("controller %s created pod %s", object_key(owner), name)
        self.recorder.event(owner, NORMAL, reason=SUCCESSFUL_CREATE, message=f"Created pod: {name}")

    async def delete_pod(self, namespace: str, name: str, owner: Obj) -> None:
        try:
            await self.pods.delete(name, namespace=namespace)
        except NotFound:
            log.debug("pod %s/%s already deleted", namespace, name)
            raise
        except Exception as e:
            self.recorder.event(owner, WARNING, reason=FAILED_DELETE, message=f"Error deleting: {e}")
            raise
        log.debug("controller %s deleted pod %s/%s", object_key(owner), namespace, name)
        self.recorder.event(owner, NORMAL, reason=SUCCESSFUL_DELETE, message=f"Deleted pod: {name}")

    async def patch_pod(self, namespace: str, name: str, patch: Obj) -> None:
        await self.pods.patch(name, patch, namespace=namespace, patch_type="strategic")
