"""An example of a user plugin: Filter + Score in plain Python.

`NodeLabelPreference` keeps pods off nodes labelled `example.com/maintenance=true` (Filter) and
prefers nodes whose `example.com/tier` label equals the pod's `example.com/tier` annotation
(Score). Write your own the same way and run it next to the native plugins:

    from kubecore.scheduler import build_scheduler, parse_config
    from kubecore.scheduler.plugins.example import NodeLabelPreference

    config = parse_config('''
    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: default-scheduler
      plugins:
        multiPoint:
          enabled:
          - name: NodeLabelPreference
            weight: 2
    ''')
    sched = build_scheduler(config, out_of_tree={"NodeLabelPreference": NodeLabelPreference.new},
                            services=services)

A plugin is a class with a `name` and the methods of its extension points; the factory gets the
plugin's args (the pluginConfig entry, a dict) and the `Handle`. Return `None` for success and a
`Status` otherwise; scores are 0..100 (or give `normalize_score` to map them there). Python Filter
and Score plugins run only on the nodes the native plugins found feasible, once per node, so
they cost Python time per node: keep them cheap.
"""

from __future__ import annotations

from typing import Any

from kubecore.scheduler.events import ActionType, ClusterEvent, ClusterEventWithHint, NODE
from kubecore.scheduler.handle import Handle
from kubecore.scheduler.interface import CycleState, NodeScore
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.status import Code, Status

__all__ = ["NodeLabelPreference"]

MAINTENANCE_LABEL = "example.com/maintenance"
TIER_KEY = "example.com/tier"


class NodeLabelPreference:
    name = "NodeLabelPreference"

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        self.match_score = int((args or {}).get("matchScore", 100))

    @classmethod
    def new(cls, args: Any, handle: Handle) -> NodeLabelPreference:
        return cls(args if isinstance(args, dict) else None)

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        if node_info.labels.get(MAINTENANCE_LABEL) == "true":
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were under maintenance")
        return None

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> tuple[int, Status | None]:
        wanted = ((pod.get("metadata") or {}).get("annotations") or {}).get(TIER_KEY)
        return (self.match_score if wanted and node_info.labels.get(TIER_KEY) == wanted else 0), None

    def normalize_score(self, state: CycleState, pod: Obj, scores: list[NodeScore]) -> Status | None:
        top = max((s.score for s in scores), default=0)
        for s in scores:
            s.score = s.score * 100 // top if top else 0
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # A node leaving maintenance (a label change) or a new node can make a rejected pod fit.
        return [ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL))]
