"""Profiles from a configuration: plugin registry, multiPoint expansion, weights (upstream NewFramework).

`build_scheduler(config, services=...)` returns the `SchedulerCore`: one cache and one queue
shared by every profile, and a `Framework` per profile (schedulerName).

A plugin name resolves to a Python plugin (the in-tree ones in `kubecore.scheduler.plugins` plus
`out_of_tree` factories) or to a native kernel plugin (`kubecore._native.NATIVE_FILTER_PLUGINS` /
`NATIVE_SCORE_PLUGINS`). Each extension point gets its plugins as upstream expands them:

1. the point's own enabled plugins, in order, each existing, implementing the point, once;
2. then every multiPoint plugin implementing the point, unless the point disables it (or "*");
   a plugin the point enables explicitly keeps the point's settings (an override);
3. order: overrides (in the point's order), multiPoint plugins, then the point's other plugins.

Score weights come from the score point first, then multiPoint; 0 means 1; the total must not
overflow. A profile needs exactly one QueueSort and at least one Bind plugin. Upstream default
plugins kubecore does not implement (the cloud volume-limit plugins, VolumeRestrictions,
VolumeZone, and native kernels a build lacks) are dropped from the defaults and listed in
`Framework.unavailable`; naming one explicitly is an error.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.scheduler import events as ev
from kubecore.scheduler import interface as itf
from kubecore.scheduler.cache import Cache
from kubecore.scheduler.config import EXTENSION_POINTS, MULTI_POINT, PluginRef, Profile, SchedulerConfig
from kubecore.scheduler.config_args import PodTopologySpreadArgs
from kubecore.scheduler.configerrors import ConfigError
from kubecore.scheduler.defaultspread import DefaultSpread
from kubecore.scheduler.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHintFn
from kubecore.scheduler.framework import Framework, PluginLists
from kubecore.scheduler.handle import Handle, MissingService, Services
from kubecore.scheduler.native import (
    NativeKernels, NativeSnapshot, native_available, native_filter_plugins, native_score_plugins, new_snapshot,
)
from kubecore.scheduler.plugins import PluginFactory, python_plugins
from kubecore.scheduler.nominator import Nominator
from kubecore.scheduler.queue import QueueProfile, SchedulingQueue

__all__ = ["SchedulerCore", "build_scheduler", "build_framework", "PluginFactory", "KNOWN_NATIVE"]

KNOWN_NATIVE = frozenset({"NodeName", "NodeUnschedulable", "NodeResourcesFit", "NodeResourcesBalancedAllocation",
                          "NodeAffinity", "TaintToleration", "NodePorts", "ImageLocality", "PodTopologySpread",
                          "InterPodAffinity"})
UNIMPLEMENTED_DEFAULTS = frozenset({"VolumeRestrictions", "NodeVolumeLimits", "VolumeZone"})

_A = ActionType
_POD_DELETE = ClusterEventWithHint(ClusterEvent(ev.POD, _A.DELETE))
NATIVE_EVENTS: dict[str, list[ClusterEventWithHint]] = {
    "NodeName": [ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.UPDATE))],
    "NodeUnschedulable": [ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.UPDATE_NODE_TAINT)),
                          ClusterEventWithHint(ClusterEvent(ev.POD, _A.UPDATE_POD_TOLERATIONS))],
    "NodeResourcesFit": [ClusterEventWithHint(ClusterEvent(ev.POD, _A.DELETE | _A.UPDATE_POD_SCALE_DOWN)),
                         ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.UPDATE_NODE_ALLOCATABLE
                                                           | _A.UPDATE_NODE_TAINT | _A.UPDATE_NODE_LABEL))],
    "NodeAffinity": [ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.UPDATE_NODE_LABEL))],
    "TaintToleration": [ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.UPDATE_NODE_TAINT)),
                        ClusterEventWithHint(ClusterEvent(ev.POD, _A.UPDATE_POD_TOLERATIONS))],
    "NodePorts": [_POD_DELETE, ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.UPDATE))],
    "PodTopologySpread": [ClusterEventWithHint(ClusterEvent(ev.POD, _A.ALL)),
                          ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.DELETE | _A.UPDATE_NODE_LABEL
                                                            | _A.UPDATE_NODE_TAINT))],
    "InterPodAffinity": [ClusterEventWithHint(ClusterEvent(ev.POD, _A.ALL)),
                         ClusterEventWithHint(ClusterEvent(ev.NODE, _A.ADD | _A.UPDATE_NODE_LABEL))],
}

# extension point -> (protocol, upstream interface name)
_POINTS: dict[str, tuple[type, str]] = {
    "preEnqueue": (itf.PreEnqueuePlugin, "PreEnqueuePlugin"),
    "queueSort": (itf.QueueSortPlugin, "QueueSortPlugin"),
    "preFilter": (itf.PreFilterPlugin, "PreFilterPlugin"),
    "filter": (itf.FilterPlugin, "FilterPlugin"),
    "postFilter": (itf.PostFilterPlugin, "PostFilterPlugin"),
    "preScore": (itf.PreScorePlugin, "PreScorePlugin"),
    "score": (itf.ScorePlugin, "ScorePlugin"),
    "reserve": (itf.ReservePlugin, "ReservePlugin"),
    "permit": (itf.PermitPlugin, "PermitPlugin"),
    "preBind": (itf.PreBindPlugin, "PreBindPlugin"),
    "bind": (itf.BindPlugin, "BindPlugin"),
    "postBind": (itf.PostBindPlugin, "PostBindPlugin"),
}
_REQUEUE_POINTS = ("preEnqueue", "preFilter", "filter", "reserve", "permit")


class _Native:
    """Stands for a native kernel plugin during profile building."""

    def __init__(self, name: str, *, filter: bool, score: bool) -> None:
        self.name, self.filter, self.score = name, filter, score


def _implements(plugin: object, point: str) -> bool:
    if isinstance(plugin, _Native):
        return (point == "filter" and plugin.filter) or (point == "score" and plugin.score)
    if point == "queueSort":
        return isinstance(plugin, (itf.QueueSortPlugin, itf.SortKeyPlugin))
    return isinstance(plugin, _POINTS[point][0])


@dataclass
class _Resolved:
    plugins: dict[str, object] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)


def _instantiate(profile: Profile, registry: Mapping[str, PluginFactory], handle: Handle) -> _Resolved:
    out = _Resolved()
    nf, ns = set(native_filter_plugins()), set(native_score_plugins())
    names: dict[str, None] = {}
    for ps in profile.plugins.values():
        for p in ps.enabled:
            names.setdefault(p.name, None)
    for name in names:
        factory = registry.get(name)
        if factory is not None:
            try:
                out.plugins[name] = factory(profile.plugin_args.get(name), handle)
            except (MissingService, ValueError, TypeError) as e:
                raise ConfigError([f'initializing plugin "{name}": {e}']) from e
        elif name in nf or name in ns:
            out.plugins[name] = _Native(name, filter=name in nf, score=name in ns)
        elif name in profile.explicit:
            if name in KNOWN_NATIVE and not native_available():
                raise ConfigError([f'plugin "{name}" runs in the native kernels, which this build of '
                                   "kubecore._native does not have"])
            continue  # reported as "does not exist" where it is used
        elif name in KNOWN_NATIVE and not native_available():
            raise ConfigError([f'default plugin "{name}" runs in the native kernels, which this build of '
                               "kubecore._native does not have; disable it in the profile to run without them"])
        else:
            out.unavailable.append(name)
    return out


def _expand(profile: Profile, resolved: _Resolved) -> dict[str, list[PluginRef]]:
    """Each extension point's plugins after multiPoint expansion (module docstring, steps 1-3)."""
    errors: list[str] = []
    out: dict[str, list[PluginRef]] = {}
    multi = profile.plugin_set(MULTI_POINT)
    for point, (_, iface) in _POINTS.items():
        ps = profile.plugin_set(point)
        own: list[PluginRef] = []
        for p in ps.enabled:
            pl = resolved.plugins.get(p.name)
            if pl is None:
                errors.append(f'{iface} "{p.name}" does not exist')
            elif not _implements(pl, point):
                errors.append(f'plugin "{p.name}" does not extend {iface} plugin')
            elif any(o.name == p.name for o in own):
                errors.append(f'plugin "{p.name}" already registered as "{iface}"')
            else:
                own.append(p)
        if "*" in ps.disabled:
            out[point] = own
            continue
        own_names = {p.name for p in own}
        overrides: set[str] = set()
        from_multi: list[PluginRef] = []
        for p in multi.enabled:
            pl = resolved.plugins.get(p.name)
            if pl is None:
                if p.name not in resolved.unavailable:
                    errors.append(f'{iface} "{p.name}" does not exist')
                continue
            if not _implements(pl, point) or p.name in ps.disabled:
                continue
            if p.name in own_names:
                overrides.add(p.name)
            elif any(m.name == p.name for m in from_multi):
                errors.append(f'plugin "{p.name}" already registered as "{iface}"')
            else:
                from_multi.append(p)
        out[point] = ([p for p in own if p.name in overrides] + from_multi
                      + [p for p in own if p.name not in overrides])
    if errors:
        raise ConfigError(sorted(set(errors), key=errors.index))
    return out


def _weights(profile: Profile, resolved: _Resolved) -> dict[str, int]:
    weights: dict[str, int] = {}
    total = 0
    for p in profile.plugin_set("score").enabled + profile.plugin_set(MULTI_POINT).enabled:
        pl = resolved.plugins.get(p.name)
        if pl is None or not _implements(pl, "score") or p.name in weights:
            continue
        weights[p.name] = p.weight or 1
        if weights[p.name] * itf.MAX_NODE_SCORE > itf.MAX_TOTAL_SCORE - total:
            raise ConfigError(["total score of Score plugins could overflow"])
        total += weights[p.name] * itf.MAX_NODE_SCORE
    return weights


def _hints(points: dict[str, list[PluginRef]],
           resolved: _Resolved) -> list[tuple[ClusterEvent, str, QueueingHintFn | None]]:
    out: list[tuple[ClusterEvent, str, QueueingHintFn | None]] = []
    seen: set[str] = set()
    for point in _REQUEUE_POINTS:
        for ref in points[point]:
            if ref.name in seen:
                continue
            seen.add(ref.name)
            pl = resolved.plugins[ref.name]
            if isinstance(pl, _Native):
                events = NATIVE_EVENTS.get(ref.name, ev.unrolled_wildcard())
            elif isinstance(pl, itf.EnqueueExtensions):
                events = pl.events_to_register()
            else:
                events = ev.unrolled_wildcard()
            out.extend((e.event, ref.name, e.hint) for e in events)
    return out


def build_framework(profile: Profile, *, config: SchedulerConfig, handle: Handle,
                    registry: Mapping[str, PluginFactory], snapshot: NativeSnapshot | None) -> Framework:
    """One profile's framework (see the module docstring for the rules)."""
    resolved = _instantiate(profile, registry, handle)
    points = _expand(profile, resolved)
    name = profile.scheduler_name
    if len(points["queueSort"]) != 1:
        raise ConfigError([f'only one queue sort plugin required for profile with scheduler name "{name}", '
                           f"but got {len(points['queueSort'])}"])
    if not points["bind"]:
        raise ConfigError([f'at least one bind plugin is needed for profile with scheduler name "{name}"'])
    weights = _weights(profile, resolved)
    lists = PluginLists(queue_sort=resolved.plugins[points["queueSort"][0].name])
    for point, attr in (("preEnqueue", "pre_enqueue"), ("preFilter", "pre_filter"), ("filter", "filter"),
                        ("postFilter", "post_filter"), ("preScore", "pre_score"), ("score", "score"),
                        ("reserve", "reserve"), ("permit", "permit"), ("preBind", "pre_bind"), ("bind", "bind"),
                        ("postBind", "post_bind")):
        getattr(lists, attr).extend(resolved.plugins[r.name] for r in points[point]
                                    if not isinstance(resolved.plugins[r.name], _Native))
    percentage = (profile.percentage_of_nodes_to_score if profile.percentage_of_nodes_to_score is not None
                  else config.percentage_of_nodes_to_score)
    native_filters = [r.name for r in points["filter"] if isinstance(resolved.plugins[r.name], _Native)]
    native_scores = [(r.name, weights[r.name]) for r in points["score"]
                     if isinstance(resolved.plugins[r.name], _Native)]
    kernels = None
    if native_filters or native_scores:
        if snapshot is None:
            raise ConfigError([f'profile "{name}" uses native plugins but the scheduler has no native snapshot'])
        kernels = NativeKernels(snapshot, filters=native_filters, scores=native_scores, args=profile.plugin_args,
                                percentage_of_nodes_to_score=percentage)
    fw = Framework(name=name, plugins=lists, weights=weights, native=kernels, hints=_hints(points, resolved),
                   percentage_of_nodes_to_score=percentage, handle=handle,
                   filter_order=[r.name for r in points["filter"]], score_order=[r.name for r in points["score"]])
    fw.unavailable = resolved.unavailable
    fw.default_spread = _default_spread(profile, handle, native=[*native_filters, *(n for n, _ in native_scores)])
    handle.framework = fw
    return fw


def _default_spread(profile: Profile, handle: Handle, *, native: Sequence[str]) -> DefaultSpread | None:
    """PodTopologySpread's cluster defaults, when the profile runs it natively and the wiring can
    find a pod's Services and controller."""
    selector_for = handle.services.default_selector
    if "PodTopologySpread" not in native or selector_for is None:
        return None
    args = profile.plugin_args.get("PodTopologySpread")
    return DefaultSpread(args if isinstance(args, PodTopologySpreadArgs) else PodTopologySpreadArgs(), selector_for)


@dataclass
class SchedulerCore:
    """Everything a scheduler process wires to the API: config, cache, queue, one framework per profile."""

    config: SchedulerConfig
    cache: Cache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    clock: Clock

    def framework_for(self, pod: dict[str, Any]) -> Framework | None:
        name = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        return self.frameworks.get(name)


def _queue_order(fw: Framework) -> tuple[Callable[[Any], Any] | None, Callable[[Any, Any], bool] | None]:
    """(sort_key, less) of the profile's QueueSort plugin: the key when it offers one."""
    qs = fw.plugins.queue_sort
    if isinstance(qs, itf.SortKeyPlugin):
        return qs.sort_key, None
    return None, qs.less


def build_scheduler(config: SchedulerConfig, *, services: Services | None = None, clock: Clock = REAL_CLOCK,
                    out_of_tree: Mapping[str, PluginFactory] | None = None, snapshot: NativeSnapshot | None = None,
                    use_native: bool | None = None, rng: random.Random | None = None,
                    assumed_ttl: float = 0.0, pop_from_backoff: bool = False) -> SchedulerCore:
    """The cache, the queue and every profile's framework for `config`.

    `use_native` None means "when the build has the kernels"; a `snapshot` given is used as is.
    `pop_from_backoff`: upstream's SchedulerPopFromBackoffQ (see queue.py; off by default here)."""
    registry: dict[str, PluginFactory] = python_plugins()
    for name, factory in (out_of_tree or {}).items():
        if name in registry:
            raise ConfigError([f'a plugin named "{name}" already exists'])
        registry[name] = factory
    if snapshot is None and (use_native or (use_native is None and native_available())):
        snapshot = new_snapshot()
    cache = Cache(clock=clock, snapshot=snapshot, assumed_ttl=assumed_ttl)
    rng = rng or random.Random()
    nominator = Nominator()
    frameworks: dict[str, Framework] = {}
    for profile in config.profiles:
        handle = Handle(cache=cache, nominator=nominator, services=services, clock=clock, rng=rng)
        frameworks[profile.scheduler_name] = build_framework(profile, config=config, handle=handle,
                                                             registry=registry, snapshot=snapshot)
    queue_profiles = {name: QueueProfile(pre_enqueue=list(fw.plugins.pre_enqueue), hints=list(fw.hints))
                      for name, fw in frameworks.items()}
    sort_key, less = _queue_order(next(iter(frameworks.values())))
    queue = SchedulingQueue(profiles=queue_profiles, clock=clock, nominator=nominator, sort_key=sort_key,
                            less=less, initial_backoff=float(config.pod_initial_backoff_seconds),
                            max_backoff=float(config.pod_max_backoff_seconds),
                            pop_from_backoff=pop_from_backoff)
    return SchedulerCore(config=config, cache=cache, queue=queue, frameworks=frameworks, clock=clock)
