"""Two small memories the endpoint controllers keep between syncs of a Service.

`TriggerTimeTracker` (upstream util/trigger_time_tracker.go) computes the value of the
endpoints.kubernetes.io/last-change-trigger-time annotation: the earliest of the trigger times that
changed since the previous sync of that Service. A pod's trigger time is its Ready condition's
lastTransitionTime; the Service's is its creationTimestamp. The first sync of a Service answers the
Service's creationTimestamp. None means "no new trigger" (the annotation is then removed).

    sync 1: service created t0, pod a ready at t1         -> t0 (first time: the Service)
    sync 2: pod b becomes ready at t3, pod c at t2         -> t2
    sync 3: nothing changed                                -> None

`EndpointSliceTracker` (upstream util/endpointslice_tracker.go) remembers the generation of
every slice this controller wrote, per Service, so a sync can tell that its informer cache has not
yet seen its own writes (`stale_slices`): a tracked slice is missing from the cache, shows an older
generation, or was deleted by us but still listed. Slice events from others (`should_sync`) are
those with a generation newer than ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubecore.controllers.controller_utils import meta, parse_time

Obj = dict[str, Any]
DELETION_EXPECTED = -1


def pod_trigger_time(pod: Obj) -> float | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Ready":
            return parse_time(c.get("lastTransitionTime"))
    return None


@dataclass
class _ServiceState:
    pod_times: dict[str, float] = field(default_factory=dict)
    service_time: float | None = None


def _min(a: float | None, b: float) -> float:
    return b if a is None or b < a else a


class TriggerTimeTracker:
    def __init__(self) -> None:
        self._states: dict[str, _ServiceState] = {}

    def compute(self, namespace: str, service: Obj, pods: list[Obj]) -> float | None:
        """The trigger time for this sync of `service` (see the module docstring); updates state."""
        key = f"{namespace}/{meta(service).get('name')}"
        state = self._states.get(key)
        known = state is not None
        last = state if state is not None else _ServiceState()
        changed: float | None = None
        pod_times: dict[str, float] = {}
        for pod in pods:
            t = pod_trigger_time(pod)
            if t is None:
                continue
            name = str(meta(pod).get("name"))
            pod_times[name] = t
            previous = last.pod_times.get(name)
            if previous is None or t > previous:
                changed = _min(changed, t)
        service_time = parse_time(meta(service).get("creationTimestamp"))
        if service_time is not None and (last.service_time is None or service_time > last.service_time):
            changed = _min(changed, service_time)
        self._states[key] = _ServiceState(pod_times=pod_times, service_time=service_time)
        if not known:
            return service_time
        return changed

    def delete_service(self, namespace: str, name: str) -> None:
        self._states.pop(f"{namespace}/{name}", None)


class EndpointSliceTracker:
    """Generations of the slices this controller wrote, by Service key then slice UID."""

    def __init__(self) -> None:
        self._by_service: dict[str, dict[str, int]] = {}

    @staticmethod
    def _service_key(endpoint_slice: Obj) -> str:
        m = meta(endpoint_slice)
        return f"{m.get('namespace')}/{(m.get('labels') or {}).get('kubernetes.io/service-name', '')}"

    def has(self, endpoint_slice: Obj) -> bool:
        gens = self._by_service.get(self._service_key(endpoint_slice))
        return gens is not None and str(meta(endpoint_slice).get("uid")) in gens

    def should_sync(self, endpoint_slice: Obj) -> bool:
        """True unless the slice is one we wrote and the cache shows no newer generation."""
        gens = self._by_service.get(self._service_key(endpoint_slice))
        if gens is None:
            return True
        g = gens.get(str(meta(endpoint_slice).get("uid")))
        return g is None or int(meta(endpoint_slice).get("generation") or 0) > g

    def stale_slices(self, service: Obj, slices: list[Obj]) -> bool:
        m = meta(service)
        gens = self._by_service.get(f"{m.get('namespace')}/{m.get('name')}")
        if gens is None:
            return False
        provided = set()
        for s in slices:
            uid = str(meta(s).get("uid"))
            provided.add(uid)
            g = gens.get(uid)
            if g is not None and (g == DELETION_EXPECTED or g > int(meta(s).get("generation") or 0)):
                return True
        return any(g != DELETION_EXPECTED and uid not in provided for uid, g in gens.items())

    def update(self, endpoint_slice: Obj) -> None:
        gens = self._by_service.setdefault(self._service_key(endpoint_slice), {})
        gens[str(meta(endpoint_slice).get("uid"))] = int(meta(endpoint_slice).get("generation") or 0)

    def expect_deletion(self, endpoint_slice: Obj) -> None:
        gens = self._by_service.setdefault(self._service_key(endpoint_slice), {})
        gens[str(meta(endpoint_slice).get("uid"))] = DELETION_EXPECTED

    def handle_deletion(self, endpoint_slice: Obj) -> bool:
        """Forget a deleted slice; True when the deletion was not ours (the Service needs a sync)."""
        key = self._service_key(endpoint_slice)
        gens = self._by_service.get(key)
        if gens is None:
            return True
        g = gens.pop(str(meta(endpoint_slice).get("uid")), None)
        if not gens:
            del self._by_service[key]
        return g != DELETION_EXPECTED

    def delete_service(self, namespace: str, name: str) -> None:
        self._by_service.pop(f"{namespace}/{name}", None)
