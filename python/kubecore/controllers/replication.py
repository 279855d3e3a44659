"""The ReplicationController controller: the ReplicaSet controller over core/v1
replicationcontrollers (upstream pkg/controller/replication).

Upstream converts each ReplicationController to a ReplicaSet on the way in and the status back on
the way out, so both kinds share one implementation. The two APIs differ in one field a controller
reads: an RC's `spec.selector` is a plain label map (every pair must match: labels.SelectorFromSet)
where a ReplicaSet has a metav1.LabelSelector. Everything else the controller touches — replicas,
minReadySeconds, template, the status fields and the ReplicaFailure condition — has the same name
and meaning in both, so the "conversion" here is a `ReplicaKind` whose selector function reads the
map; pods get a controller reference of kind ReplicationController, apiVersion v1.

An RC without a selector is defaulted by the API server from its template's labels; one whose
selector is still empty matches every pod, as the converted upstream selector does.
"""

from __future__ import annotations

from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, register
from kubecore.controllers.controller_utils import InvalidSelector, Selector, selector_from_set
from kubecore.controllers.podcontrol import EventRecorderLike, PodControl
from kubecore.controllers.replicaset import BURST_REPLICAS, ReplicaKind, ReplicaSetController

Obj = dict[str, Any]


def rc_selector(obj: Obj) -> Selector:
    """An RC's map selector as a compiled selector (the RC -> RS spec conversion's one change)."""
    selector = (obj.get("spec") or {}).get("selector")
    if selector is not None and not isinstance(selector, dict):
        raise InvalidSelector(f"spec.selector must be a map, not {type(selector).__name__}")
    return selector_from_set(selector)


REPLICATION_CONTROLLER = ReplicaKind(name="replicationcontroller", api_version="v1", kind="ReplicationController",
                                     resource="replicationcontrollers", component="replication-controller",
                                     selector_of=rc_selector)


class ReplicationManager(ReplicaSetController):
    """`ReplicaSetController` for ReplicationControllers (upstream's ReplicationManager)."""

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK,
                 burst_replicas: int = BURST_REPLICAS, pod_control: PodControl | None = None) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock,
                         burst_replicas=burst_replicas, kind=REPLICATION_CONTROLLER, pod_control=pod_control)


@register(REPLICATION_CONTROLLER.name, workers=5)
def new_replication_manager(ctx: ControllerContext) -> ReplicationManager:
    """The controller manager's constructor for the ReplicationController controller."""
    return ReplicationManager(rest=ctx.rest, informers=ctx.informers,
                              recorder=ctx.recorder(REPLICATION_CONTROLLER.component), clock=ctx.clock)
