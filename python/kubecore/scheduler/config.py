"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): parse, default, validate.

`parse_config(text)` reads YAML or JSON and returns a `SchedulerConfig` with upstream's defaults
applied: one "default-scheduler" profile when none is given, the default plugin set (all in
`plugins.multiPoint`, with upstream's weights) merged with each profile's plugins the way
upstream's mergePluginSet does, and defaulted args for every in-tree plugin. Anything wrong
raises one `ConfigError` listing every problem (field paths as upstream's validation prints
them). The expansion of multiPoint into extension points needs to know which points each
plugin implements, so it happens when the framework is built (`kubecore.scheduler.registry`).

Merge rules (per extension point, custom over default):

- `disabled: [{name: "*"}]` drops every default plugin of that point;
- a disabled name drops that default plugin;
- an enabled name that is also a default replaces it in place (its weight wins);
- other enabled names are appended in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubecore.scheduler.config_args import default_plugin_args, parse_plugin_args
from kubecore.scheduler.configerrors import ConfigError, FieldErrors
from kubecore.scheduler.podinfo import DEFAULT_SCHEDULER_NAME

__all__ = ["API_VERSION", "EXTENSION_POINTS", "PluginRef", "PluginSet", "Profile", "SchedulerConfig",
           "parse_config", "load_config", "default_config", "DEFAULT_PLUGINS", "ConfigError"]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
EXTENSION_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
                    "reserve", "permit", "preBind", "bind", "postBind")
MULTI_POINT = "multiPoint"

# Upstream's default plugins (apis/config/v1/default_plugins.go), all via multiPoint; 0 = no weight.
DEFAULT_PLUGINS: list[tuple[str, int]] = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("EBSLimits", 0), ("GCEPDLimits", 0), ("NodeVolumeLimits", 0),
    ("AzureDiskLimits", 0), ("VolumeBinding", 0), ("VolumeZone", 0), ("PodTopologySpread", 2),
    ("InterPodAffinity", 2), ("DefaultPreemption", 0), ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1), ("DefaultBinder", 0),
]
_TOP_FIELDS = {"apiVersion", "kind", "parallelism", "percentageOfNodesToScore", "podInitialBackoffSeconds",
               "podMaxBackoffSeconds", "profiles", "extenders", "leaderElection", "clientConnection",
               "healthzBindAddress", "metricsBindAddress", "enableProfiling", "enableContentionProfiling",
               "delayCacheUntilActive"}
_PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}


@dataclass
class PluginRef:
    name: str
    weight: int = 0  # 0 = not set


@dataclass
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass
class Profile:
    scheduler_name: str
    percentage_of_nodes_to_score: int | None = None
    plugins: dict[str, PluginSet] = field(default_factory=dict)  # point (and multiPoint) -> set
    plugin_args: dict[str, Any] = field(default_factory=dict)    # plugin -> typed args or dict
    explicit: set[str] = field(default_factory=set)  # plugins the document itself enables

    def plugin_set(self, point: str) -> PluginSet:
        return self.plugins.get(point) or PluginSet()


@dataclass
class SchedulerConfig:
    profiles: list[Profile]
    parallelism: int = 16
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: dict[str, Any] = field(default_factory=dict)
    client_connection: dict[str, Any] = field(default_factory=dict)

    def profile(self, scheduler_name: str) -> Profile | None:
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)


# ---- plugin sets -----------------------------------------------------------------------------

def _plugin_set(obj: Any, path: str, errs: FieldErrors) -> PluginSet:
    out = PluginSet()
    if obj is None:
        return out
    if not isinstance(obj, dict):
        errs.type_error(path, obj, "an object")
        return out
    for k in obj:
        if k not in ("enabled", "disabled"):
            errs.unknown_field(path, k)
    for i, p in enumerate(obj.get("enabled") or []):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            errs.required(f"{path}.enabled[{i}].name")
            continue
        w = p.get("weight", 0)
        if not isinstance(w, int) or isinstance(w, bool) or w < 0:
            errs.invalid(f"{path}.enabled[{i}].weight", w, "must be a non-negative integer")
            w = 0
        out.enabled.append(PluginRef(p["name"], w))
    for i, p in enumerate(obj.get("disabled") or []):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            errs.required(f"{path}.disabled[{i}].name")
            continue
        out.disabled.append(p["name"])
    return out


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Upstream mergePluginSet: custom enabled/disabled applied over the defaults."""
    disabled = set(custom.disabled) | set(default.disabled)
    custom_by_name = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled:
        for p in default.enabled:
            if p.name in disabled:
                continue
            i = custom_by_name.get(p.name)
            if i is not None:
                enabled.append(custom.enabled[i])
                replaced.add(i)
            else:
                enabled.append(p)
    enabled.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled, list(custom.disabled) + list(default.disabled))


def _default_plugins() -> dict[str, PluginSet]:
    return {MULTI_POINT: PluginSet([PluginRef(n, w) for n, w in DEFAULT_PLUGINS])}


# ---- profiles --------------------------------------------------------------------------------

def _profile(obj: Any, path: str, errs: FieldErrors, *, single: bool) -> Profile:
    if not isinstance(obj, dict):
        errs.type_error(path, obj, "an object")
        obj = {}
    for k in obj:
        if k not in _PROFILE_FIELDS:
            errs.unknown_field(path, k)
    name = obj.get("schedulerName")
    if name is None and single:
        name = DEFAULT_SCHEDULER_NAME
    if not isinstance(name, str) or not name:
        errs.required(f"{path}.schedulerName")
        name = ""
    prof = Profile(scheduler_name=name)
    pct = obj.get("percentageOfNodesToScore")
    if pct is not None:
        if not isinstance(pct, int) or not 0 <= pct <= 100:
            errs.invalid(f"{path}.percentageOfNodesToScore", pct, "not in valid range [0-100]")
        else:
            prof.percentage_of_nodes_to_score = pct
    custom = obj.get("plugins") or {}
    if not isinstance(custom, dict):
        errs.type_error(f"{path}.plugins", custom, "an object")
        custom = {}
    for k in custom:
        if k not in EXTENSION_POINTS and k != MULTI_POINT:
            errs.unknown_field(f"{path}.plugins", k)
    defaults = _default_plugins()
    for point in (MULTI_POINT, *EXTENSION_POINTS):
        got = _plugin_set(custom.get(point), f"{path}.plugins.{point}", errs)
        prof.explicit.update(p.name for p in got.enabled)
        prof.plugins[point] = merge_plugin_set(defaults.get(point) or PluginSet(), got)
    _plugin_config(obj.get("pluginConfig"), prof, f"{path}.pluginConfig", errs)
    return prof


def _plugin_config(items: Any, prof: Profile, path: str, errs: FieldErrors) -> None:
    if items is not None and not isinstance(items, list):
        errs.type_error(path, items, "a list")
        items = []
    for i, item in enumerate(items or []):
        p = f"{path}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            errs.required(f"{p}.name")
            continue
        name = item["name"]
        if name in prof.plugin_args:
            errs.duplicate(f"{p}.name", name)
            continue
        prof.plugin_args[name] = parse_plugin_args(name, item.get("args"), f"{p}.args", errs)
    for name in _enabled_names(prof):
        if name not in prof.plugin_args:
            args = default_plugin_args(name)
            if args is not None:
                prof.plugin_args[name] = args


def _enabled_names(prof: Profile) -> list[str]:
    seen: dict[str, None] = {}
    for ps in prof.plugins.values():
        for p in ps.enabled:
            seen.setdefault(p.name, None)
    return list(seen)


# ---- the whole configuration -----------------------------------------------------------------

def _int_field(obj: dict[str, Any], key: str, default: int, errs: FieldErrors) -> int:
    v = obj.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        errs.type_error(key, v, "an integer")
        return default
    return v


def _validate_top(cfg: SchedulerConfig, errs: FieldErrors) -> None:
    if cfg.parallelism <= 0:
        errs.invalid("parallelism", cfg.parallelism, "should be an integer value greater than zero")
    if not 0 <= cfg.percentage_of_nodes_to_score <= 100:
        errs.invalid("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score, "not in valid range [0-100]")
    if cfg.pod_initial_backoff_seconds <= 0:
        errs.invalid("podInitialBackoffSeconds", cfg.pod_initial_backoff_seconds, "must be greater than 0")
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        errs.invalid("podMaxBackoffSeconds", cfg.pod_max_backoff_seconds,
                     "must be greater than or equal to PodInitialBackoffSeconds")
    names: set[str] = set()
    for i, prof in enumerate(cfg.profiles):
        if prof.scheduler_name and prof.scheduler_name in names:
            errs.duplicate(f"profiles[{i}].schedulerName", prof.scheduler_name)
        names.add(prof.scheduler_name)
    sorts = {tuple(p.name for p in prof.plugin_set("queueSort").enabled) for prof in cfg.profiles}
    if len(cfg.profiles) > 1 and len(sorts) > 1:
        errs.invalid("profiles[1].plugins.queueSort", "", "queueSort must be the same for all profiles")


def _document(data: Any) -> dict[str, Any]:
    if data is None:
        return {"apiVersion": API_VERSION, "kind": KIND}
    if not isinstance(data, dict):
        raise ConfigError([f"a KubeSchedulerConfiguration must be an object, not {type(data).__name__}"])
    if data.get("apiVersion") != API_VERSION:
        raise ConfigError([f"unsupported apiVersion {data.get('apiVersion')!r}: kubecore reads {API_VERSION}"])
    if data.get("kind") != KIND:
        raise ConfigError([f"unsupported kind {data.get('kind')!r}: expected {KIND}"])
    return data


def config_from_dict(data: dict[str, Any] | None) -> SchedulerConfig:
    """A validated, defaulted configuration from an already decoded document."""
    doc = _document(data)
    errs = FieldErrors()
    for k in doc:
        if k not in _TOP_FIELDS:
            errs.unknown_field("", k)
    if doc.get("extenders"):
        errs.forbidden("extenders", "scheduler extenders are not supported by kubecore")
    raw_profiles = doc.get("profiles") or [{}]
    if not isinstance(raw_profiles, list):
        errs.type_error("profiles", raw_profiles, "a list")
        raw_profiles = [{}]
    single = len(raw_profiles) == 1
    profiles = [_profile(p, f"profiles[{i}]", errs, single=single) for i, p in enumerate(raw_profiles)]
    cfg = SchedulerConfig(
        profiles=profiles,
        parallelism=_int_field(doc, "parallelism", 16, errs),
        percentage_of_nodes_to_score=_int_field(doc, "percentageOfNodesToScore", 0, errs),
        pod_initial_backoff_seconds=_int_field(doc, "podInitialBackoffSeconds", 1, errs),
        pod_max_backoff_seconds=_int_field(doc, "podMaxBackoffSeconds", 10, errs),
        leader_election=dict(doc.get("leaderElection") or {}),
        client_connection=dict(doc.get("clientConnection") or {}),
    )
    _validate_top(cfg, errs)
    errs.raise_if_any()
    return cfg


def parse_config(text: str | bytes) -> SchedulerConfig:
    """Parse a YAML or JSON KubeSchedulerConfiguration."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError([f"cannot decode the scheduler configuration: {e}"]) from e
    return config_from_dict(data)


def load_config(path: str | Path) -> SchedulerConfig:
    try:
        text = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError([f"cannot read the scheduler configuration {str(path)!r}: {e.strerror}"]) from e
    return parse_config(text)


def default_config() -> SchedulerConfig:
    """Upstream's defaults: one default-scheduler profile with the default plugins."""
    return config_from_dict(None)
