"""InterPodAffinityArgs (hardPodAffinityWeight, ignorePreferredTermsOfExistingPods) and
NodeAffinityArgs (addedAffinity) from a KubeSchedulerConfiguration: parsing, upstream's
validation messages, and scheduling through build_scheduler with the native kernels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubecore.scheduler.config import parse_config
from kubecore.scheduler.config_args import InterPodAffinityArgs, NodeAffinityArgs
from kubecore.scheduler.configerrors import ConfigError
from kubecore.scheduler.native import NativeKernels
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.schedule_one import Assumed, Failed, schedule_one
from tests.unit.scheduler.helpers import build, config, needs_native, node, pod

ARGS = "profiles[0].pluginConfig[0].args"
ADDED = f"{ARGS}.addedAffinity"
REQUIRED = f"{ADDED}.requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = f"{ADDED}.preferredDuringSchedulingIgnoredDuringExecution"
ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
POD_SELECTOR = "node(s) didn't match Pod's node affinity/selector"


def plugin_config(name: str, args: Obj) -> list[Obj]:
    return [{"pluginConfig": [{"name": name, "args": args}]}]


def expr(key: str, op: str, *values: str) -> Obj:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def required(*terms: Obj) -> Obj:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


def preferred(weight: int, term: Obj) -> Obj:
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "preference": term}]}


# ---- parsing and validation ---------------------------------------------------------------------

def test_defaults_and_parsed_values() -> None:
    prof = config().profiles[0]
    assert prof.plugin_args["InterPodAffinity"] == InterPodAffinityArgs(1, False)
    assert prof.plugin_args["NodeAffinity"] == NodeAffinityArgs(None)
    added = required({"matchExpressions": [expr("zone", "In", "a")]})
    cfg = parse_config(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [
            {"name": "InterPodAffinity", "args": {"kind": "InterPodAffinityArgs", "hardPodAffinityWeight": 0,
                                                  "ignorePreferredTermsOfExistingPods": True}},
            {"name": "NodeAffinity", "args": {"addedAffinity": added}}]}]}))
    args = cfg.profiles[0].plugin_args
    assert args["InterPodAffinity"] == InterPodAffinityArgs(0, True)
    assert args["NodeAffinity"] == NodeAffinityArgs(added)
    kwargs = NativeKernels._profile_kwargs(args)
    assert (kwargs["hard_pod_affinity_weight"], kwargs["ignore_preferred_terms_of_existing_pods"]) == (0, True)
    assert json.loads(kwargs["added_affinity"]) == added
    assert NativeKernels._profile_kwargs({})["added_affinity"] is None


@pytest.mark.parametrize("name, args, expected", [
    ("InterPodAffinity", {"hardPodAffinityWeight": 101},
     f"{ARGS}.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
    ("InterPodAffinity", {"hardPodAffinityWeight": -1},
     f"{ARGS}.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"),
    ("InterPodAffinity", {"ignorePreferredTermsOfExistingPods": "yes"},
     f'{ARGS}.ignorePreferredTermsOfExistingPods: Invalid value: "yes": must be a boolean'),
    ("InterPodAffinity", {"hardPodAffinityWeigth": 2},
     f'strict decoding error: unknown field "{ARGS}.hardPodAffinityWeigth"'),
    # upstream TestValidateNodeAffinityArgs "invalid added affinity": both errors
    ("NodeAffinity", {"addedAffinity": {
        **required({"matchExpressions": [expr("invalid key", "In", "label-1-val")]}),
        **preferred(1, {"matchFields": [expr("metadata.name", "In", "node-1", "node-2")]})}},
     [f'{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].key: Invalid value: "invalid key": name part must '
      "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
      f'{PREFERRED}[0].matchFields[0].values: Invalid value: []string{{"node-1", "node-2"}}: must have one element']),
    ("NodeAffinity", {"addedAffinity": required({"matchExpressions": [expr("zone", "In")]})},
     f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string(nil): "
     "for 'in', 'notin' operators, values set can't be empty"),
    ("NodeAffinity", {"addedAffinity": required({}, {"matchExpressions": [expr("zone", "Exists", "a")]})},
     f'{REQUIRED}.nodeSelectorTerms[1].matchExpressions[0].values: Invalid value: []string{{"a"}}: '
     "values set must be empty for exists and does not exist"),
    ("NodeAffinity", {"addedAffinity": required({"matchExpressions": [expr("zone", "Foo", "a")]})},
     f'{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Foo": supported values: '
     '"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"'),
    ("NodeAffinity", {"addedAffinity": required({"matchExpressions": [expr("cores", "Gt", "1.5")]})},
     f'{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: "1.5": '
     "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("NodeAffinity", {"addedAffinity": required({"matchExpressions": [expr("cores", "Lt", "1", "2")]})},
     f'{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: []string{{"1", "2"}}: '
     "for 'Gt', 'Lt' operators, exactly one value is required"),
    # every value must be a label value, Gt/Lt's too ("-3" is not one)
    ("NodeAffinity", {"addedAffinity": required({"matchExpressions": [expr("cores", "Gt", "-3")]})},
     f'{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values[0][cores]: Invalid value: "-3": a valid label '
     "must be an empty string"),
    ("NodeAffinity", {"addedAffinity": required({"matchExpressions": [expr("zone", "In", "-bad")]})},
     f'{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].values[0][zone]: Invalid value: "-bad": a valid label '
     "must be an empty string"),
    ("NodeAffinity", {"addedAffinity": preferred(2, {"matchFields": [expr("metadata.name", "Exists")]})},
     f'{PREFERRED}[0].matchFields[0].operator: Unsupported value: "Exists": supported values: "In", "NotIn"'),
    ("NodeAffinity", {"addedAffinity": {"requiredDuringSchedulingRequiredDuringExecution": {}}},
     f'strict decoding error: unknown field "{ADDED}.requiredDuringSchedulingRequiredDuringExecution"'),
    ("NodeAffinity", {"addedAffinity": ["zone"]}, f"{ADDED}: Invalid value: ['zone']: must be an object"),
])
def test_validation_errors_read_like_upstream(name: str, args: Obj, expected: str | list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        config(plugin_config(name, args))
    wanted = [expected] if isinstance(expected, str) else expected
    for w in wanted:
        assert any(w in got for got in e.value.errors), e.value.errors
    assert len(e.value.errors) == len(wanted), e.value.errors


@pytest.mark.parametrize("added", [
    required(),  # no terms: matches no node, but parses
    required({}, {"matchFields": [expr("metadata.name", "NotIn", "n1")]}),
    required({"matchExpressions": [expr("cores", "Gt", "3"), expr("tier", "DoesNotExist")]}),
    preferred(0, {"matchFields": [expr("metadata.name", "In", "a", "b")]}),  # weight 0: not parsed
    preferred(-5, {"matchExpressions": [expr("zone", "NotIn", "a", "")]}),
])
def test_valid_added_affinities(added: Obj) -> None:
    assert config(plugin_config("NodeAffinity", {"addedAffinity": added})).profiles[0].plugin_args["NodeAffinity"] \
        == NodeAffinityArgs(added)


# ---- scheduling through build_scheduler --------------------------------------------------------

def schedule(core: Any, p: Obj) -> Assumed | Failed:
    core.queue.add(p)
    pinfo = core.queue.pop()
    assert pinfo is not None
    out = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(out, (Assumed, Failed))
    return out


def zones_core(args: list[Obj]) -> Any:
    core, _, _ = build(config([{"pluginConfig": args}]), native=True)
    for i in range(4):
        core.cache.add_node(node(f"n{i}", labels={"zone": "a" if i < 2 else "b"}))
    return core


@needs_native
def test_added_affinity_filters_and_the_fit_error_names_it() -> None:
    core = zones_core([{"name": "NodeAffinity", "args": {"addedAffinity": required(
        {"matchExpressions": [expr("zone", "In", "b")]})}}])
    for i in range(3):
        out = schedule(core, pod(f"free{i}"))
        assert isinstance(out, Assumed) and out.node in {"n2", "n3"}
    out = schedule(core, pod("wants-a", nodeSelector={"zone": "a"}))
    assert isinstance(out, Failed)
    assert out.message == (f"0/4 nodes are available: 2 {POD_SELECTOR}, 2 {ENFORCED}. "
                           "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")
    assert out.unschedulable_plugins == {"NodeAffinity"}


@needs_native
def test_added_affinity_preferred_terms_score() -> None:
    core = zones_core([{"name": "NodeAffinity", "args": {"addedAffinity": preferred(
        7, {"matchExpressions": [expr("kubernetes.io/hostname", "In", "n1")]})}}])
    out = schedule(core, pod("p"))
    assert isinstance(out, Assumed) and out.node == "n1"


def affinity_core(args: Obj, existing: list[tuple[str, Obj]]) -> Any:
    """Zone a: a-busy (4 cpu) and a-free (8 cpu, so resource scores prefer it); zone b: b-busy and
    b-free (4 cpu). `existing` pods go on the busy nodes (name's zone)."""
    core, _, _ = build(config(plugin_config("InterPodAffinity", args)), native=True)
    for name, cpu in [("a-busy", "4"), ("a-free", "8"), ("b-busy", "4"), ("b-free", "4")]:
        core.cache.add_node(node(name, cpu=cpu, labels={"zone": name[0]}))
    for i, (zone, spec) in enumerate(existing):
        core.cache.add_pod(pod(f"existing{i}", labels={"app": f"other{i}"}, node_name=f"{zone}-busy", **spec))
    return core


WEB_TERM = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
HARD = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [WEB_TERM]}}}
SOFT = {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 3, "podAffinityTerm": WEB_TERM}]}}}


def web(**spec: Any) -> Obj:
    return pod("web", cpu="1", labels={"app": "web"}, **spec)


@needs_native
@pytest.mark.parametrize("existing, weight, want", [
    # an existing pod's required affinity to app=web counts hardPodAffinityWeight in its zone
    ([("b", HARD)], None, "b-free"),
    ([("b", HARD)], 0, "a-free"),
    # next to a pod preferring app=web (weight 3) in zone a: 1 < 3 < 5
    ([("b", HARD), ("a", SOFT)], None, "a-free"),
    ([("b", HARD), ("a", SOFT)], 5, "b-free"),
])
def test_hard_pod_affinity_weight(existing: list[tuple[str, Obj]], weight: int | None, want: str) -> None:
    core = affinity_core({} if weight is None else {"hardPodAffinityWeight": weight}, existing)
    out = schedule(core, web())
    assert isinstance(out, Assumed) and out.node == want


@needs_native
@pytest.mark.parametrize("ignore, own_terms, want", [
    (False, False, "b-free"),
    (True, False, "a-free"),  # the existing pod's preference is not looked at
    (True, True, "b-free"),   # ... unless the pod has preferred terms of its own
])
def test_ignore_preferred_terms_of_existing_pods(ignore: bool, own_terms: bool, want: str) -> None:
    core = affinity_core({"ignorePreferredTermsOfExistingPods": ignore}, [("b", SOFT)])
    spec: Obj = {}
    if own_terms:
        nothing = {"labelSelector": {"matchLabels": {"app": "nothing"}}, "topologyKey": "zone"}
        spec = {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": nothing}]}}}
    out = schedule(core, web(**spec))
    assert isinstance(out, Assumed) and out.node == want
