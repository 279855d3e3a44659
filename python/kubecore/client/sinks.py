"""Leases and Events over the REST client, in the shapes leader election (`LeaseClient`) and the
event recorders (`events.EventSink`, core/v1; `events_v1.EventSink`, events.k8s.io/v1) ask for:
the small protocols those modules are written against."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec

from kubecore.client.rest import RestClient

Obj = dict[str, Any]


class RestApiSink:
    """Leases and Events over the RestClient (`leaderelection.LeaseClient` + `events.EventSink`)."""

    def __init__(self, rest: RestClient) -> None:
        self.rest = rest

    @staticmethod
    def _leases(namespace: str) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"

    async def get_lease(self, namespace: str, name: str) -> Obj:
        out: Obj = await self.rest.get_json(f"{self._leases(namespace)}/{quote(name, safe='')}")
        return out

    async def create_lease(self, lease: Obj) -> Obj:
        out: Obj = await self.rest.send_json("POST", self._leases(lease["metadata"]["namespace"]), lease)
        return out

    async def update_lease(self, lease: Obj) -> Obj:
        m = lease["metadata"]
        out: Obj = await self.rest.send_json("PUT", f"{self._leases(m['namespace'])}/{quote(m['name'], safe='')}",
                                             lease)
        return out

    @staticmethod
    def _events(event: Obj) -> str:
        ns = (event.get("metadata") or {}).get("namespace") or "default"
        return f"/api/v1/namespaces/{quote(ns, safe='')}/events"

    async def create_event(self, event: Obj) -> Obj:
        out: Obj = await self.rest.send_json("POST", self._events(event), event)
        return out

    async def patch_event(self, event: Obj, patch: Obj) -> Obj:
        path = f"{self._events(event)}/{quote(event['metadata']['name'], safe='')}"
        out: Obj = await self.rest.send_json("PATCH", path, patch,
                                             content_type="application/strategic-merge-patch+json")
        return out


class EventsV1Sink:
    """events.k8s.io/v1 Events over the RestClient (`events_v1.EventSink`, upstream's EventSinkImpl):
    POST to create, strategic merge PATCH for a series."""

    def __init__(self, rest: RestClient) -> None:
        self.rest = rest

    @staticmethod
    def _events(event: Obj, verb: str) -> str:
        ns = (event.get("metadata") or {}).get("namespace")
        if not ns:
            raise ValueError(f"can't {verb} an event with empty namespace")
        return f"/apis/events.k8s.io/v1/namespaces/{quote(ns, safe='')}/events"

    async def create(self, event: Obj, *, keep: bool = True) -> Obj | None:
        answer = await self.rest.request("POST", self._events(event, "create"), body=msgspec.json.encode(event),
                                         content_type="application/json")
        if not keep:  # the answer's status was checked; its body is not decoded
            return None
        out: Obj = answer.json()
        return out

    async def patch(self, event: Obj, patch: bytes | Obj) -> Obj:
        path = f"{self._events(event, 'patch')}/{quote(event['metadata']['name'], safe='')}"
        out: Obj = await self.rest.send_json("PATCH", path, patch,
                                             content_type="application/strategic-merge-patch+json")
        return out
