"""Plugin arguments of a KubeSchedulerConfiguration: parsing, upstream's defaults and validation.

One dataclass per in-tree args kind (NodeResourcesFitArgs, NodeResourcesBalancedAllocationArgs,
PodTopologySpreadArgs, DefaultPreemptionArgs, InterPodAffinityArgs, NodeAffinityArgs,
VolumeBindingArgs) and kubecore's CoschedulingArgs. Args of out-of-tree plugins stay plain dicts.
Defaults are upstream's (apis/config/v1/defaults.go); validation follows
validation_pluginargs.go and reports through `FieldErrors`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubecore.api.validation import is_label_value, is_qualified_name
from kubecore.scheduler.configerrors import FieldErrors

__all__ = [
    "ResourceSpec", "NodeResourcesFitArgs", "NodeResourcesBalancedAllocationArgs", "PodTopologySpreadArgs",
    "DefaultPreemptionArgs", "InterPodAffinityArgs", "NodeAffinityArgs", "VolumeBindingArgs",
    "CoschedulingArgs", "parse_plugin_args", "default_plugin_args", "SYSTEM_DEFAULT_CONSTRAINTS",
]

_T = TypeVar("_T")
ResourceSpec = tuple[str, int]
DEFAULT_RESOURCES: list[ResourceSpec] = [("cpu", 1), ("memory", 1)]
FIT_STRATEGIES = ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]
SYSTEM_DEFAULT_CONSTRAINTS: list[dict[str, Any]] = [
    {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"},
    {"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
]


@dataclass
class NodeResourcesFitArgs:
    ignored_resources: list[str] = field(default_factory=list)
    ignored_resource_groups: list[str] = field(default_factory=list)
    strategy: str = "LeastAllocated"
    resources: list[ResourceSpec] = field(default_factory=lambda: list(DEFAULT_RESOURCES))
    shape: list[tuple[int, int]] = field(default_factory=list)  # (utilization 0-100, score 0-10)


@dataclass
class NodeResourcesBalancedAllocationArgs:
    resources: list[ResourceSpec] = field(default_factory=lambda: list(DEFAULT_RESOURCES))


@dataclass
class PodTopologySpreadArgs:
    default_constraints: list[dict[str, Any]] = field(default_factory=list)
    defaulting_type: str = "System"

    def effective_constraints(self) -> list[dict[str, Any]]:
        """The cluster default constraints applied to pods without their own."""
        if self.defaulting_type == "System":
            return [dict(c) for c in SYSTEM_DEFAULT_CONSTRAINTS]
        return [dict(c) for c in self.default_constraints]


@dataclass
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100


@dataclass
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False


@dataclass
class NodeAffinityArgs:
    added_affinity: dict[str, Any] | None = None


@dataclass
class VolumeBindingArgs:
    bind_timeout_seconds: int = 600


@dataclass
class CoschedulingArgs:
    """kubecore's gang plugin: how long a partial gang may hold its members at Permit, and how
    long a gang that fit nowhere is refused at PreFilter (scheduler-plugins' podGroupBackoffSeconds;
    0, the default, never refuses)."""

    permit_waiting_time_seconds: int = 60
    pod_group_backoff_seconds: int = 0


# ---- small readers ---------------------------------------------------------------------------

class _Reader:
    """Reads fields of one args object, recording type errors and unknown fields."""

    def __init__(self, obj: dict[str, Any], path: str, errs: FieldErrors, known: set[str]) -> None:
        self.obj, self.path, self.errs = obj, path, errs
        for k in obj:
            if k not in known and k not in ("apiVersion", "kind"):
                errs.unknown_field(path, k)

    def _get(self, key: str, default: _T, kind: type[_T], expected: str) -> _T:
        """The field when it is a `kind` (a bool is not an int here), else `default`."""
        v = self.obj.get(key)
        if v is None:
            return default
        if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
            self.errs.type_error(f"{self.path}.{key}", v, expected)
            return default
        return v

    def get_int(self, key: str, default: int) -> int:
        return self._get(key, default, int, "an integer")

    def get_bool(self, key: str, default: bool) -> bool:
        return self._get(key, default, bool, "a boolean")

    def get_str(self, key: str, default: str) -> str:
        return self._get(key, default, str, "a string")

    def get_list(self, key: str) -> list[Any]:
        return self._get(key, [], list, "a list")


def _resources(items: list[Any], path: str, errs: FieldErrors, *, balanced: bool) -> list[ResourceSpec]:
    out: list[ResourceSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        p = f"{path}[{i}]"
        if isinstance(item, dict) and any(k not in ("name", "weight") for k in item):
            _Reader(item, p, errs, {"name", "weight"})  # strict decoding: "Name" is not "name"
            continue
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            errs.required(f"{p}.name")
            continue
        name, weight = item["name"], item.get("weight") or 1  # 0 or unset: weight 1
        if not isinstance(weight, int) or isinstance(weight, bool):
            errs.type_error(f"{p}.weight", weight, "an integer")
            continue
        if balanced and name in seen:  # upstream checks duplicates for BalancedAllocation only
            errs.duplicate(f"{p}.name", name)
        seen.add(name)
        if balanced and weight != 1:
            errs.invalid(f"{p}.weight", weight, "must be 1")
        elif not 1 <= weight <= 100:
            errs.invalid(f"{p}.weight", weight, f"resource weight of {name} not in valid range (0, 100]")
        out.append((name, weight))
    return out


def _shape(items: list[Any], path: str, errs: FieldErrors, decode_path: str) -> list[tuple[int, int]]:
    """validateFunctionShape: at least one point; the first unsorted point; every point's ranges.
    Decoding errors (unknown fields) name the points under `decode_path`, as written."""
    if not items:
        errs.required(path, "at least one point must be specified")
        return []
    out: list[tuple[int, int]] = []
    indexed: list[int] = []
    unsorted_reported = False
    for i, pt in enumerate(items):
        p = f"{path}[{i}]"
        if isinstance(pt, dict) and any(k not in ("utilization", "score") for k in pt):
            _Reader(pt, f"{decode_path}[{i}]", errs, {"utilization", "score"})
            continue
        u = pt.get("utilization", 0) if isinstance(pt, dict) else None
        s = pt.get("score", 0) if isinstance(pt, dict) else None
        if not isinstance(u, int) or not isinstance(s, int):
            errs.type_error(p, pt, "a point with integer utilization and score")
            continue
        if out and u <= out[-1][0] and not unsorted_reported:
            errs.invalid(f"{p}.utilization", u, "utilization values must be sorted in increasing order")
            unsorted_reported = True
        out.append((u, s))
        indexed.append(i)
    for i, (u, s) in zip(indexed, out):
        p = f"{path}[{i}]"
        if not 0 <= u <= 100:
            errs.invalid(f"{p}.utilization", u, "not in valid range [0, 100]")
        if not 0 <= s <= 10:
            errs.invalid(f"{p}.score", s, "not in valid range [0, 10]")
    return out


def _label_names(values: list[str], path: str, errs: FieldErrors) -> None:
    """metav1validation.ValidateLabelName for each value: one error per message."""
    for i, v in enumerate(values):
        for msg in is_qualified_name(v):
            errs.invalid(f"{path}[{i}]", v, msg)


# ---- one parser per kind ---------------------------------------------------------------------

def _fit(obj: dict[str, Any], path: str, errs: FieldErrors) -> NodeResourcesFitArgs:
    r = _Reader(obj, path, errs, {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"})
    args = NodeResourcesFitArgs(ignored_resources=[str(x) for x in r.get_list("ignoredResources")],
                                ignored_resource_groups=[str(x) for x in r.get_list("ignoredResourceGroups")])
    _label_names(args.ignored_resources, f"{path}.ignoredResources", errs)
    for i, g in enumerate(args.ignored_resource_groups):
        gp = f"{path}.ignoredResourceGroups[{i}]"
        if "/" in g:
            errs.invalid(gp, g, "resource group name can't contain '/'")
        for msg in is_qualified_name(g):
            errs.invalid(gp, g, msg)
    strategy = obj.get("scoringStrategy")
    if strategy is None:
        return args
    if not isinstance(strategy, dict):
        errs.type_error(f"{path}.scoringStrategy", strategy, "an object")
        return args
    sp = f"{path}.scoringStrategy"
    s = _Reader(strategy, sp, errs, {"type", "resources", "requestedToCapacityRatio"})
    # A scoringStrategy without a type keeps "" (only a missing scoringStrategy is defaulted), which
    # upstream's NewFit then rejects as an unsupported type.
    args.strategy = s.get_str("type", "")
    if args.strategy not in FIT_STRATEGIES:
        errs.unsupported(f"{sp}.type", args.strategy, FIT_STRATEGIES)
    args.resources = _resources(s.get_list("resources"), f"{sp}.resources", errs, balanced=False) \
        or list(DEFAULT_RESOURCES)
    rtc = strategy.get("requestedToCapacityRatio")
    if rtc is not None and not isinstance(rtc, dict):
        errs.type_error(f"{sp}.requestedToCapacityRatio", rtc, "an object")
        rtc = {}
    if rtc is not None:
        _Reader(rtc, f"{sp}.requestedToCapacityRatio", errs, {"shape"})
    if rtc is not None or args.strategy == "RequestedToCapacityRatio":
        # Upstream validates the shape whenever requestedToCapacityRatio is set, and names it
        # scoringStrategy.shape (not .requestedToCapacityRatio.shape).
        shape = (rtc or {}).get("shape")
        args.shape = _shape(shape if isinstance(shape, list) else [], f"{sp}.shape", errs,
                            f"{sp}.requestedToCapacityRatio.shape")
    return args


def _balanced(obj: dict[str, Any], path: str, errs: FieldErrors) -> NodeResourcesBalancedAllocationArgs:
    r = _Reader(obj, path, errs, {"resources"})
    resources = _resources(r.get_list("resources"), f"{path}.resources", errs, balanced=True)
    return NodeResourcesBalancedAllocationArgs(resources=resources or list(DEFAULT_RESOURCES))


def _spread_constraint(c: Any, path: str, errs: FieldErrors, earlier: list[tuple[str, str]]) -> None:
    if not isinstance(c, dict):
        errs.type_error(path, c, "an object")
        return
    if not isinstance(c.get("maxSkew"), int) or c["maxSkew"] <= 0:
        errs.invalid(f"{path}.maxSkew", c.get("maxSkew"), "not in valid range (0, inf)")
    key, when = str(c.get("topologyKey") or ""), str(c.get("whenUnsatisfiable") or "")
    if not key:
        errs.required(f"{path}.topologyKey", "can not be empty")
    else:
        for msg in is_qualified_name(key):
            errs.invalid(f"{path}.topologyKey", key, msg)
    if not when:
        errs.required(f"{path}.whenUnsatisfiable", "can not be empty")
    elif when not in ("DoNotSchedule", "ScheduleAnyway"):
        errs.unsupported(f"{path}.whenUnsatisfiable", when, ["DoNotSchedule", "ScheduleAnyway"])
    if c.get("labelSelector") is not None:
        errs.forbidden(f"{path}.labelSelector",
                       "constraint must not define a selector, as they deduced for each pod")
    if (key, when) in earlier:
        errs.duplicate(path, f"{{{key}, {when}}}")
    earlier.append((key, when))


def _spread(obj: dict[str, Any], path: str, errs: FieldErrors) -> PodTopologySpreadArgs:
    r = _Reader(obj, path, errs, {"defaultConstraints", "defaultingType"})
    args = PodTopologySpreadArgs(default_constraints=r.get_list("defaultConstraints"),
                                 defaulting_type=r.get_str("defaultingType", "") or "System")
    if args.defaulting_type not in ("System", "List"):
        errs.unsupported(f"{path}.defaultingType", args.defaulting_type, ["System", "List"])
    elif args.defaulting_type == "System" and args.default_constraints:
        errs.invalid(f"{path}.defaultingType", "System", "when .defaultConstraints are not empty")
    earlier: list[tuple[str, str]] = []
    for i, c in enumerate(args.default_constraints):
        _spread_constraint(c, f"{path}.defaultConstraints[{i}]", errs, earlier)
    return args


def _preemption(obj: dict[str, Any], path: str, errs: FieldErrors) -> DefaultPreemptionArgs:
    r = _Reader(obj, path, errs, {"minCandidateNodesPercentage", "minCandidateNodesAbsolute"})
    args = DefaultPreemptionArgs(r.get_int("minCandidateNodesPercentage", 10),
                                 r.get_int("minCandidateNodesAbsolute", 100))
    if not 0 <= args.min_candidate_nodes_percentage <= 100:
        errs.invalid(f"{path}.minCandidateNodesPercentage", args.min_candidate_nodes_percentage,
                     "not in valid range [0, 100]")
    if args.min_candidate_nodes_absolute < 0:
        errs.invalid(f"{path}.minCandidateNodesAbsolute", args.min_candidate_nodes_absolute,
                     "not in valid range [0, inf)")
    if args.min_candidate_nodes_percentage == 0 and args.min_candidate_nodes_absolute == 0:
        errs.invalid(f"{path}.minCandidateNodesPercentage", 0,
                     "cannot be zero at the same time as minCandidateNodesAbsolute")
        errs.invalid(f"{path}.minCandidateNodesAbsolute", 0,
                     "cannot be zero at the same time as minCandidateNodesPercentage")
    return args


def _interpod(obj: dict[str, Any], path: str, errs: FieldErrors) -> InterPodAffinityArgs:
    r = _Reader(obj, path, errs, {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"})
    args = InterPodAffinityArgs(r.get_int("hardPodAffinityWeight", 1),
                                r.get_bool("ignorePreferredTermsOfExistingPods", False))
    if not 0 <= args.hard_pod_affinity_weight <= 100:
        errs.invalid(f"{path}.hardPodAffinityWeight", args.hard_pod_affinity_weight,
                     "not in valid range [0, 100]")
    return args


# ---- NodeAffinityArgs.addedAffinity (component-helpers' NewNodeSelector / NewPreferredSchedulingTerms)

_SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
_FIELD_OPERATORS = ["In", "NotIn"]
_INT32 = (-(2 ** 31), 2 ** 31 - 1)
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _is_int64(v: str) -> bool:
    """strconv.ParseInt(v, 10, 64) succeeds: an optional sign and ASCII digits, in range."""
    return _DECIMAL.fullmatch(v) is not None and -(2 ** 63) <= int(v) < 2 ** 63


class _GoStrings:
    """A []string as a field error prints it: []string{"a", "b"}, or []string(nil)."""

    def __init__(self, values: list[str] | None) -> None:
        self.values = values

    def __str__(self) -> str:
        if self.values is None:
            return "[]string(nil)"
        return "[]string{" + ", ".join(f'"{v}"' for v in self.values) + "}"


def _objects(r: _Reader, key: str) -> list[tuple[int, dict[str, Any]]]:
    """The objects of list field `key` with their indices; other items are type errors."""
    out: list[tuple[int, dict[str, Any]]] = []
    for i, item in enumerate(r.get_list(key)):
        if isinstance(item, dict):
            out.append((i, item))
        else:
            r.errs.type_error(f"{r.path}.{key}[{i}]", item, "an object")
    return out


def _requirement(req: dict[str, Any], path: str, errs: FieldErrors) -> tuple[str, str, list[str] | None]:
    r = _Reader(req, path, errs, {"key", "operator", "values"})
    values: list[str] | None = None
    if req.get("values") is not None:
        values = []
        for i, v in enumerate(r.get_list("values")):
            if isinstance(v, str):
                values.append(v)
            else:
                errs.type_error(f"{path}.values[{i}]", v, "a string")
    return r.get_str("key", ""), r.get_str("operator", ""), values


def _match_expression(req: dict[str, Any], path: str, errs: FieldErrors) -> None:
    """nodeSelectorRequirementsAsSelector and labels.NewRequirement."""
    key, op, values = _requirement(req, path, errs)
    if op not in _SELECTOR_OPERATORS:
        errs.unsupported(f"{path}.operator", op, _SELECTOR_OPERATORS)
        return
    key_errs = is_qualified_name(key)
    if key_errs:
        errs.invalid(f"{path}.key", key, "; ".join(key_errs))
    vals = values or []
    if op in ("In", "NotIn") and not vals:
        errs.invalid(f"{path}.values", _GoStrings(values), "for 'in', 'notin' operators, values set can't be empty")
    elif op in ("Exists", "DoesNotExist") and vals:
        errs.invalid(f"{path}.values", _GoStrings(values), "values set must be empty for exists and does not exist")
    elif op in ("Gt", "Lt"):
        if len(vals) != 1:
            errs.invalid(f"{path}.values", _GoStrings(values), "for 'Gt', 'Lt' operators, exactly one value is required")
        for i, v in enumerate(vals):
            if not _is_int64(v):
                errs.invalid(f"{path}.values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
    for i, v in enumerate(vals):
        value_errs = is_label_value(v)
        if value_errs:
            errs.invalid(f"{path}.values[{i}][{key}]", v, "; ".join(value_errs))


def _match_field(req: dict[str, Any], path: str, errs: FieldErrors) -> None:
    """nodeSelectorRequirementsAsFieldSelector: In / NotIn with exactly one value."""
    _, op, values = _requirement(req, path, errs)
    if op not in _FIELD_OPERATORS:
        errs.unsupported(f"{path}.operator", op, _FIELD_OPERATORS)
    elif len(values or []) != 1:
        errs.invalid(f"{path}.values", _GoStrings(values), "must have one element")


def _selector_term(term: dict[str, Any], path: str, errs: FieldErrors, error_path: str) -> None:
    """newNodeSelectorTerm: every requirement must parse (an empty term selects nothing)."""
    r = _Reader(term, path, errs, {"matchExpressions", "matchFields"})
    for j, req in _objects(r, "matchExpressions"):
        _match_expression(req, f"{error_path}.matchExpressions[{j}]", errs)
    for j, req in _objects(r, "matchFields"):
        _match_field(req, f"{error_path}.matchFields[{j}]", errs)


def _added_affinity(added: dict[str, Any], path: str, errs: FieldErrors) -> None:
    """ValidateNodeAffinityArgs: every term of the addedAffinity parses."""
    r = _Reader(added, path, errs, {"requiredDuringSchedulingIgnoredDuringExecution",
                                    "preferredDuringSchedulingIgnoredDuringExecution"})
    rp = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not isinstance(required, dict):
        errs.type_error(rp, required, "an object")
    elif required is not None:
        sel = _Reader(required, rp, errs, {"nodeSelectorTerms"})
        for i, term in _objects(sel, "nodeSelectorTerms"):
            _selector_term(term, f"{rp}.nodeSelectorTerms[{i}]", errs, f"{rp}.nodeSelectorTerms[{i}]")
    pp = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, pref in _objects(r, "preferredDuringSchedulingIgnoredDuringExecution"):
        pr = _Reader(pref, f"{pp}[{i}]", errs, {"weight", "preference"})
        weight = pr.get_int("weight", 0)
        if not _INT32[0] <= weight <= _INT32[1]:
            errs.invalid(f"{pp}[{i}].weight", weight, "must be a 32-bit integer")
        preference = pref.get("preference")
        if preference is not None and not isinstance(preference, dict):
            errs.type_error(f"{pp}[{i}].preference", preference, "an object")
        elif preference is not None and weight != 0:
            # Upstream's errors name the term by its index alone ("...[0].matchExpressions[0]").
            _selector_term(preference, f"{pp}[{i}].preference", errs, f"{pp}[{i}]")


def _node_affinity(obj: dict[str, Any], path: str, errs: FieldErrors) -> NodeAffinityArgs:
    _Reader(obj, path, errs, {"addedAffinity"})
    added = obj.get("addedAffinity")
    if added is not None and not isinstance(added, dict):
        errs.type_error(f"{path}.addedAffinity", added, "an object")
        added = None
    if added is not None:
        _added_affinity(added, f"{path}.addedAffinity", errs)
    return NodeAffinityArgs(added)


def _volume_binding(obj: dict[str, Any], path: str, errs: FieldErrors) -> VolumeBindingArgs:
    r = _Reader(obj, path, errs, {"bindTimeoutSeconds", "shape"})
    args = VolumeBindingArgs(r.get_int("bindTimeoutSeconds", 600))
    if args.bind_timeout_seconds < 0:
        errs.invalid(f"{path}.bindTimeoutSeconds", args.bind_timeout_seconds,
                     "invalid BindTimeoutSeconds, should not be a negative value")
    if obj.get("shape") is not None:  # feature gate StorageCapacityScoring is off (alpha)
        errs.invalid(f"{path}.shape", str(obj["shape"]),
                     "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring")
    return args


def _coscheduling(obj: dict[str, Any], path: str, errs: FieldErrors) -> CoschedulingArgs:
    r = _Reader(obj, path, errs, {"permitWaitingTimeSeconds", "podGroupBackoffSeconds"})
    args = CoschedulingArgs(r.get_int("permitWaitingTimeSeconds", 60), r.get_int("podGroupBackoffSeconds", 0))
    if args.permit_waiting_time_seconds <= 0:
        errs.invalid(f"{path}.permitWaitingTimeSeconds", args.permit_waiting_time_seconds,
                     "must be greater than 0")
    if args.pod_group_backoff_seconds < 0:
        errs.invalid(f"{path}.podGroupBackoffSeconds", args.pod_group_backoff_seconds,
                     "must be greater than or equal to 0")
    return args


_PARSERS: dict[str, Any] = {
    "NodeResourcesFit": _fit,
    "NodeResourcesBalancedAllocation": _balanced,
    "PodTopologySpread": _spread,
    "DefaultPreemption": _preemption,
    "InterPodAffinity": _interpod,
    "NodeAffinity": _node_affinity,
    "VolumeBinding": _volume_binding,
    "Coscheduling": _coscheduling,
}


def parse_plugin_args(plugin: str, args: Any, path: str, errs: FieldErrors) -> Any:
    """Typed, defaulted args for an in-tree plugin; a plain dict for any other plugin."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        errs.type_error(path, args, "an object")
        args = {}
    parser = _PARSERS.get(plugin)
    if parser is None:
        return dict(args)
    kind = args.get("kind")
    if kind is not None and kind != f"{plugin}Args":
        # The decoder's error (plugin group and kind must match the type); the args are not read.
        group = "kubescheduler.config.k8s.io"
        errs.decoding(path.removesuffix(".args"),
                      f"args for plugin {plugin} were not of type {plugin}Args.{group}, got {kind}.{group}")
        return parser({}, path, FieldErrors())
    return parser(args, path, errs)


def default_plugin_args(plugin: str) -> Any:
    """The defaulted args of an in-tree plugin with no pluginConfig entry (None for others)."""
    parser = _PARSERS.get(plugin)
    return None if parser is None else parser({}, "", FieldErrors())
