"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): parse, default, validate.

`parse_config(text)` reads YAML or JSON and returns a `SchedulerConfig` with upstream's defaults
applied: one "default-scheduler" profile when none is given, the default plugin set (all in
`plugins.multiPoint`, with upstream's weights) merged with each profile's plugins the way
upstream's mergePluginSet does, and defaulted args for every in-tree plugin. Anything wrong
raises one `ConfigError` listing every problem (field paths as upstream's validation prints
them). The expansion of multiPoint into extension points needs to know which points each
plugin implements, so it happens when the framework is built (`kubecore.scheduler.registry`).

Validation follows upstream's ValidateKubeSchedulerConfiguration on the defaulted document:
leaderElection (durations, "leases" only) and clientConnection (burst) as component-base checks
them, every profile's queueSort set (and its args) equal to the first profile's, the plugins v1
removed (EBSLimits, GCEPDLimits, AzureDiskLimits, CinderLimits) refused at extension points and in
pluginConfig, and each in-tree plugin's args (`config_args`). Empty leaderElection fields take
the scheduler's defaults (leases in kube-system/kube-scheduler, 15s/10s/2s); clientConnection keeps
only what the document sets (upstream's defaults are DEFAULT_CLIENT_CONNECTION, but kubecore's
scheduler command has its own qps/burst defaults).

Merge rules (per extension point, custom over default):

- `disabled: [{name: "*"}]` drops every default plugin of that point;
- a disabled name drops that default plugin;
- an enabled name that is also a default replaces it in place (its weight wins);
- other enabled names are appended in order.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubecore.scheduler.config_args import default_plugin_args, parse_plugin_args
from kubecore.scheduler.configerrors import ConfigError, FieldErrors
from kubecore.scheduler.podinfo import DEFAULT_SCHEDULER_NAME

__all__ = ["API_VERSION", "EXTENSION_POINTS", "PluginRef", "PluginSet", "Profile", "SchedulerConfig",
           "parse_config", "load_config", "default_config", "DEFAULT_PLUGINS", "ConfigError",
           "INVALID_PLUGINS", "DEFAULT_LEADER_ELECTION", "DEFAULT_CLIENT_CONNECTION"]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
EXTENSION_POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
                    "reserve", "permit", "preBind", "bind", "postBind")
MULTI_POINT = "multiPoint"

# Upstream's default plugins (apis/config/v1/default_plugins.go), all via multiPoint; 0 = no weight.
DEFAULT_PLUGINS: list[tuple[str, int]] = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0), ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2), ("DefaultPreemption", 0), ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1), ("DefaultBinder", 0),
]
_TOP_FIELDS = {"apiVersion", "kind", "parallelism", "percentageOfNodesToScore", "podInitialBackoffSeconds",
               "podMaxBackoffSeconds", "profiles", "extenders", "leaderElection", "clientConnection",
               "healthzBindAddress", "metricsBindAddress", "enableProfiling", "enableContentionProfiling",
               "delayCacheUntilActive"}
_PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
# Removed in-tree plugins that v1 rejects (validation.go invalidPluginsByVersion).
INVALID_PLUGINS = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")
# SetDefaults_KubeSchedulerConfiguration and component-base's RecommendedDefaultLeaderElectionConfiguration.
DEFAULT_LEADER_ELECTION: dict[str, Any] = {
    "leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s",
    "resourceLock": "leases", "resourceName": "kube-scheduler", "resourceNamespace": "kube-system"}
DEFAULT_CLIENT_CONNECTION: dict[str, Any] = {
    "kubeconfig": "", "acceptContentTypes": "", "contentType": "application/vnd.kubernetes.protobuf",
    "qps": 50.0, "burst": 100}
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


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
    raw_args: dict[str, Any] = field(default_factory=dict)  # pluginConfig args as written (None if absent)

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
    for key in ("enabled", "disabled"):
        for i, p in enumerate(obj.get(key) or []):
            for k in p if isinstance(p, dict) else ():
                if k not in ("name", "weight"):
                    errs.unknown_field(f"{path}.{key}[{i}]", k)
    for i, p in enumerate(obj.get("enabled") or []):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            errs.required(f"{path}.enabled[{i}].name")
            continue
        w = p.get("weight") or 0
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
        if point != MULTI_POINT:  # upstream checks the extension points, not multiPoint
            for i, p in enumerate(got.enabled):
                if p.name in INVALID_PLUGINS:
                    errs.invalid(f"{path}.plugins.{point}.enabled[{i}]", p.name, _invalid_in_v1())
    _plugin_config(obj.get("pluginConfig"), prof, f"{path}.pluginConfig", errs)
    return prof


def _plugin_config(items: Any, prof: Profile, path: str, errs: FieldErrors) -> None:
    if items is not None and not isinstance(items, list):
        errs.type_error(path, items, "a list")
        items = []
    seen: set[str] = set()
    for i, item in enumerate(items or []):
        p = f"{path}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            errs.required(f"{p}.name")
            continue
        name = item["name"]
        for k in item:
            if k not in ("name", "args"):
                errs.unknown_field(p, k)
        duplicate = name in seen
        if duplicate:
            errs.duplicate(p, name)  # upstream: the entry's path, not .name
        seen.add(name)
        if name in INVALID_PLUGINS:
            errs.invalid(p, name, _invalid_in_v1())
            continue
        args = parse_plugin_args(name, item.get("args"), f"{p}.args", errs)  # a duplicate's args are checked too
        if not duplicate:
            prof.plugin_args[name] = args
            prof.raw_args[name] = item.get("args")
    for name in _enabled_names(prof):
        if name not in prof.plugin_args:
            args = default_plugin_args(name)
            if args is not None:
                prof.plugin_args[name] = args


def _invalid_in_v1() -> str:
    return f"was invalid in version {json.dumps(API_VERSION)} (KubeSchedulerConfiguration is version {json.dumps(API_VERSION)})"


def _enabled_names(prof: Profile) -> list[str]:
    seen: dict[str, None] = {}
    for ps in prof.plugins.values():
        for p in ps.enabled:
            seen.setdefault(p.name, None)
    return list(seen)


# ---- the whole configuration -----------------------------------------------------------------

def _int_field(obj: dict[str, Any], key: str, default: int, errs: FieldErrors) -> int:
    v = obj.get(key)
    if v is None:  # unset or null: the default
        return default
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
        if prof.scheduler_name in names:
            errs.duplicate(f"profiles[{i}].schedulerName", prof.scheduler_name)
        names.add(prof.scheduler_name)
    _validate_common_queue_sort(cfg.profiles, errs)


def _queue_sort_value(ps: PluginSet) -> str:
    enabled = ", ".join(f"{p.name}" + (f":{p.weight}" if p.weight else "") for p in ps.enabled)
    return f"{{enabled: [{enabled}], disabled: [{', '.join(ps.disabled)}]}}"


def _validate_common_queue_sort(profiles: list[Profile], errs: FieldErrors) -> None:
    """validateCommonQueueSort: every profile's queueSort set (and its args) equals the first's."""
    if not profiles:
        return
    canon = profiles[0].plugin_set("queueSort")
    if len(canon.enabled) > 1:
        errs.invalid("profiles[0].plugins.queueSort.Enabled", len(canon.enabled),
                     "only one queue sort plugin can be enabled")
    sort_name = canon.enabled[0].name if canon.enabled else ""
    canon_args = profiles[0].raw_args.get(sort_name) if sort_name else None
    key = ([(p.name, p.weight) for p in canon.enabled], canon.disabled)
    for i, prof in enumerate(profiles[1:], start=1):
        curr = prof.plugin_set("queueSort")
        if ([(p.name, p.weight) for p in curr.enabled], curr.disabled) != key:
            errs.invalid(f"profiles[{i}].plugins.queueSort", _queue_sort_value(curr),
                         "queueSort must be the same for all profiles")
        if sort_name and sort_name in prof.raw_args and (prof.raw_args[sort_name] or None) != (canon_args or None):
            errs.invalid(f"profiles[{i}].pluginConfig.args", json.dumps(prof.raw_args[sort_name]),
                         "queueSort must be the same for all profiles")


def _go_duration(value: Any) -> float | None:
    """Seconds of a Go duration string ("1m30s", "-2s", "0"), None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, str):
        return None
    text, sign = value, 1.0
    if text.startswith(("+", "-")):
        sign, text = (-1.0 if text[0] == "-" else 1.0), text[1:]
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sign * sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def _section(doc: dict[str, Any], key: str, defaults: dict[str, Any], errs: FieldErrors) -> dict[str, Any]:
    """leaderElection / clientConnection: strict fields, empty values take the scheduler's defaults."""
    raw = doc.get(key)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        errs.type_error(key, raw, "an object")
        raw = {}
    out = dict(defaults)
    for k, v in raw.items():
        if k not in defaults:
            errs.unknown_field(key, k)
        elif v is not None and v != "" and v != 0:  # Go zero values are defaulted
            out[k] = v
        elif isinstance(v, bool):
            out[k] = v
    return out


def _validate_leader_election(le: dict[str, Any], errs: FieldErrors) -> None:
    """component-base ValidateLeaderElectionConfiguration plus the scheduler's "leases only" rule."""
    if le.get("leaderElect") is not True:
        return
    secs: dict[str, float] = {}
    for k in ("leaseDuration", "renewDeadline", "retryPeriod"):
        d = _go_duration(le.get(k))
        if d is None:
            errs.type_error(f"leaderElection.{k}", le.get(k), 'a duration such as "15s"')
            return
        secs[k] = d
        if d <= 0:
            errs.invalid_raw(f"leaderElection.{k}", str(le.get(k)), "must be greater than zero")
    if secs["leaseDuration"] <= secs["renewDeadline"]:
        errs.invalid_raw("leaderElection.leaseDuration", str(le.get("renewDeadline")),
                         "LeaseDuration must be greater than RenewDeadline")
    for k in ("resourceLock", "resourceNamespace", "resourceName"):
        if not le.get(k):
            errs.invalid(f"leaderElection.{k}", "", f"{k} is required")
    if le.get("resourceLock") != "leases":
        errs.invalid("leaderElection.resourceLock", le.get("resourceLock"), 'resourceLock value must be "leases"')


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
    # clientConnection keeps only the fields the document sets: kubecore's scheduler command has its
    # own qps/burst defaults (upstream's, DEFAULT_CLIENT_CONNECTION, would hold it to 50 requests/s).
    written = doc.get("clientConnection")
    client_connection = {k: v for k, v in _section(doc, "clientConnection", DEFAULT_CLIENT_CONNECTION, errs).items()
                         if isinstance(written, dict) and k in written}
    burst = client_connection.get("burst", 0)
    if isinstance(burst, int) and burst < 0:
        errs.invalid("clientConnection.burst", burst, "must be non-negative")
    leader_election = _section(doc, "leaderElection", DEFAULT_LEADER_ELECTION, errs)
    _validate_leader_election(leader_election, errs)
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
        leader_election=leader_election,
        client_connection=client_connection,
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
