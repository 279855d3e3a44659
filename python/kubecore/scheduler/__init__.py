"""kubecore's scheduler: upstream's scheduling framework in Python, node-level kernels in Rust.

Layout (one idea per module):

    status, events, podinfo, interface   Status codes, cluster events, the plugin protocol
    config, config_args, configerrors    KubeSchedulerConfiguration v1: parse, default, validate
    registry                             profiles from a config: plugins, multiPoint, weights
    framework, waiting, handle           running extension points; pods waiting at Permit
    native                               the only door to kubecore._native's kernels
    cache, nominator                     nodes and bound/assumed pods; nominated pods
    queue, inflight                      activeQ / backoffQ / unschedulable pool, in-flight events
    schedule_one, batch, binding         the scheduling cycle (one pod, or a native batch), binding
    driver                               the loop: pop, schedule, bind, requeue (no I/O)
    plugins/                             PrioritySort, SchedulingGates, DefaultBinder, VolumeBinding,
                                         DefaultPreemption, Coscheduling, and an example plugin
    server, eventhandlers, apiwrites     the process (`kubecore scheduler`): informers and upstream's
    metrics, namespaces                  event handlers, the API writes, Prometheus metrics,
                                         namespaceSelector resolution for pod affinity

Typical wiring (`server.py` does this: the process supplies informers and the API calls):

    core = build_scheduler(load_config(path), services=Services(bind=..., evict=..., get_pvc=..., ...))
    await Driver(core, on_failed=report).run()     # report: FailedScheduling event + PodScheduled

and the informer events, as upstream's eventhandlers.go:

    node add / update / delete     cache.add_node(n)        queue.node_added(n)
                                   cache.update_node(new)   queue.node_updated(old, new)
                                   cache.remove_node(name)  queue.node_deleted(n)
    unbound pod of our profiles    queue.add(p) / queue.update(old, new) / queue.delete(p)
                                   (a deleted pod waiting at Permit: fw.waiting_pods.reject(key))
    bound pod add / update / del   cache.add_pod(p)         queue.assigned_pod_added(p)
                                   cache.update_pod(o, n)   queue.assigned_pod_updated(o, n)
                                   cache.remove_pod(p)      queue.assigned_pod_deleted(p)
    PVC / PV / StorageClass        queue.move_all_to_active_or_backoff(ClusterEvent(...), old, new)

A long-running process should `gc.freeze()` once its informers have synced: the collector then
stops re-walking the node and pod objects (about +20 % scheduling throughput here).
"""

from kubecore.scheduler.binding import Bound, bind_one, record_binding_failure, record_failure
from kubecore.scheduler.cache import Cache, CacheError
from kubecore.scheduler.config import SchedulerConfig, default_config, load_config, parse_config
from kubecore.scheduler.configerrors import ConfigError
from kubecore.scheduler.driver import Driver
from kubecore.scheduler.fiterror import FitError
from kubecore.scheduler.framework import Framework
from kubecore.scheduler.handle import Handle, Services
from kubecore.scheduler.interface import CycleState, NodeScore, PreFilterResult
from kubecore.scheduler.native import native_available
from kubecore.scheduler.queue import SchedulingQueue
from kubecore.scheduler.registry import SchedulerCore, build_scheduler
from kubecore.scheduler.schedule_one import Assumed, Failed, schedule_one
from kubecore.scheduler.status import Code, Status

__all__ = [
    "Bound", "bind_one", "record_binding_failure", "record_failure", "Cache", "CacheError", "SchedulerConfig",
    "default_config", "load_config", "parse_config", "ConfigError", "Driver", "FitError", "Framework", "Handle",
    "Services", "CycleState", "NodeScore", "PreFilterResult", "native_available", "SchedulingQueue",
    "SchedulerCore", "build_scheduler", "Assumed", "Failed", "schedule_one", "Code", "Status",
]
