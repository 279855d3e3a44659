"""What a plugin can reach: the cache, nominated and waiting pods, the clock, and `Services`.

A plugin factory receives `(args, handle)`. The handle is shared by the profile's plugins; its
`framework` is set once the profile is built (preemption uses it for dry runs).

`Services` is everything that needs the outside world, supplied by whoever wires the scheduler
(an API client, informer listers); the scheduler package itself does no I/O:

    bind(pod, node)                  async: write the binding (DefaultBinder)
    evict(victim, preemptor, node)   start evicting a preemption victim (fire and forget)
    evict_victims(victims, preemptor, node, failed=)
                                     start evicting all of a preemption's victims (upstream's
                                     asynchronous preemption); `failed()` if one could not be
                                     evicted. Preferred over `evict` when given.
    activate(pods)                   move pods to activeQ now (upstream Handle.Activate)
    clear_nominated_node(pod)        start clearing a pod's status.nominatedNodeName
    get_pvc(namespace, name)         a PersistentVolumeClaim or None (VolumeBinding)
    get_pv(name)                     a PersistentVolume or None (VolumeBinding)
    list_pdbs()                      all PodDisruptionBudgets (DefaultPreemption)
    list_pods(namespace)             pods of a namespace, bound or not (Coscheduling)
    list_pod_group(namespace, group) pods labelled with that pod group, from an index (Coscheduling)
    default_selector(pod)            the pod's default LabelSelector from its Services and
                                     controller, or None (PodTopologySpread's default constraints)
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.scheduler.cache import Cache
from kubecore.scheduler.nominator import Nominator
from kubecore.scheduler.podinfo import Obj

if TYPE_CHECKING:
    from kubecore.scheduler.framework import Framework

__all__ = ["Services", "Handle", "MissingService"]


class MissingService(LookupError):
    """A plugin needs a service the wiring did not provide."""


@dataclass
class Services:
    bind: Callable[[Obj, str], Awaitable[None]] | None = None
    evict: Callable[[Obj, Obj, str], None] | None = None
    evict_victims: Callable[..., None] | None = None
    activate: Callable[[list[Obj]], None] | None = None
    clear_nominated_node: Callable[[Obj], None] | None = None
    get_pvc: Callable[[str, str], Obj | None] | None = None
    get_pv: Callable[[str], Obj | None] | None = None
    list_pdbs: Callable[[], list[Obj]] | None = None
    list_pods: Callable[[str], list[Obj]] | None = None
    list_pod_group: Callable[[str, str], list[Obj]] | None = None
    default_selector: Callable[[Obj], Obj | None] | None = None


class Handle:
    """The plugins' view of the scheduler (upstream framework.Handle)."""

    def __init__(self, *, cache: Cache, nominator: Nominator, services: Services | None = None,
                 clock: Clock = REAL_CLOCK, rng: random.Random | None = None) -> None:
        self.cache = cache
        self.nominator = nominator
        self.services = services or Services()
        self.clock = clock
        self.rng = rng or random.Random()
        self._framework: Framework | None = None

    @property
    def framework(self) -> Framework:
        if self._framework is None:
            raise RuntimeError("the profile is still being built")
        return self._framework

    @framework.setter
    def framework(self, fw: Framework) -> None:
        self._framework = fw

    def require(self, name: str, plugin: str) -> None:
        """Fail plugin construction clearly when a needed service is missing."""
        if getattr(self.services, name) is None:
            raise MissingService(f"plugin {plugin} needs the {name!r} service, which was not provided")
