"""Upstream's KubeSchedulerConfiguration tables, re-stated as documents kubecore parses.

Sources (kubernetes/kubernetes, pkg/scheduler/apis/config): v1/defaults_test.go (TestSchedulerDefaults,
TestPluginArgsDefaults), v1/default_plugins_test.go (TestMergePlugins), validation/validation_test.go
(TestValidateKubeSchedulerConfigurationV1), validation/validation_pluginargs_test.go and
scheme/scheme_test.go (TestCodecsDecodePluginConfig). Upstream decodes, defaults and then validates;
kubecore does the three in `config_from_dict`, so a case upstream states on the internal (already
defaulted) struct is written here as the file that produces it. Upstream's validation tests compare
field errors by type and path, ignoring value and detail: `field_errors` does the same.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from kubecore.scheduler.config import (
    DEFAULT_CLIENT_CONNECTION, DEFAULT_LEADER_ELECTION, PluginRef, PluginSet, config_from_dict, merge_plugin_set,
)
from kubecore.scheduler.config_args import (
    DefaultPreemptionArgs, InterPodAffinityArgs, NodeAffinityArgs, NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs, PodTopologySpreadArgs, VolumeBindingArgs,
)
from kubecore.scheduler.configerrors import ConfigError

Obj = dict[str, Any]
API = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
CPU_MEM = [("cpu", 1), ("memory", 1)]
_TYPES = {"Invalid value": "Invalid", "Required value": "Required", "Duplicate value": "Duplicate",
          "Unsupported value": "NotSupported", "Forbidden": "Forbidden"}


def parse(**top: Any) -> Any:
    return config_from_dict({"apiVersion": API, "kind": KIND, **top})


def errors(**top: Any) -> list[str]:
    with pytest.raises(ConfigError) as e:
        parse(**top)
    return e.value.errors


def field_errors(**top: Any) -> list[tuple[str, str]]:
    """(type, field) of every error, the way upstream's tests compare them."""
    out = []
    for err in errors(**top):
        m = re.match(r"(.*?): (Invalid value|Required value|Duplicate value|Unsupported value|Forbidden)", err)
        assert m is not None, err
        out.append((_TYPES[m.group(2)], m.group(1)))
    return out


def plugin_config(name: str, args: Any, **profile: Any) -> list[Obj]:
    return [{"pluginConfig": [{"name": name, "args": args}], **profile}]


def args_of(name: str, args: Any) -> Any:
    return parse(profiles=plugin_config(name, args)).profiles[0].plugin_args[name]


def args_errors(name: str, args: Any) -> list[tuple[str, str]]:
    """Field errors of one plugin's args, paths relative to the args (as upstream's args tests)."""
    prefix = "profiles[0].pluginConfig[0].args."
    got = field_errors(profiles=plugin_config(name, args))
    assert all(f.startswith(prefix) for _, f in got), got
    return [(t, f.removeprefix(prefix)) for t, f in got]


# The default pluginConfig of a profile (defaults_test.go `pluginConfigs`).
DEFAULT_ARGS: Obj = {
    "DefaultPreemption": DefaultPreemptionArgs(10, 100),
    "InterPodAffinity": InterPodAffinityArgs(1, False),
    "NodeAffinity": NodeAffinityArgs(None),
    "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs(CPU_MEM),
    "NodeResourcesFit": NodeResourcesFitArgs(strategy="LeastAllocated", resources=CPU_MEM),
    "PodTopologySpread": PodTopologySpreadArgs([], "System"),
    "VolumeBinding": VolumeBindingArgs(600),
}


# ---- defaults_test.go: TestSchedulerDefaults ---------------------------------------------------

def check_top_defaults(cfg: Any, *, parallelism: int = 16, percentage: int = 0) -> None:
    assert cfg.parallelism == parallelism
    assert cfg.percentage_of_nodes_to_score == percentage
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1, 10)
    assert cfg.leader_election == {
        "leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s",
        "resourceLock": "leases", "resourceNamespace": "kube-system", "resourceName": "kube-scheduler"}
    # Upstream defaults clientConnection to qps 50, burst 100 and protobuf; kubecore keeps only what
    # the file sets, its scheduler command having its own (higher) qps/burst defaults.
    assert cfg.client_connection == {}
    assert (DEFAULT_CLIENT_CONNECTION["qps"], DEFAULT_CLIENT_CONNECTION["burst"]) == (50.0, 100)
    assert DEFAULT_CLIENT_CONNECTION["contentType"] == "application/vnd.kubernetes.protobuf"


@pytest.mark.parametrize("case, top", [
    ("empty config", {}),
    ("no scheduler name", {"profiles": [{}]}),
    ("Prallelism with no port", {"parallelism": 16}),
    ("set non default delayCacheUntilActive", {"delayCacheUntilActive": True}),
])
def test_scheduler_defaults(case: str, top: Obj) -> None:
    cfg = parse(**top)
    check_top_defaults(cfg)
    [prof] = cfg.profiles
    assert prof.scheduler_name == "default-scheduler" and prof.percentage_of_nodes_to_score is None
    assert prof.plugin_args == DEFAULT_ARGS


def test_scheduler_defaults_two_profiles() -> None:
    # "two profiles": the second profile keeps its bind set next to the default multiPoint set; the
    # first (no name: only a single profile gets "default-scheduler") is then rejected by validation.
    profiles: list[Obj] = [
        {"pluginConfig": [{"name": "FooPlugin"}]},
        {"schedulerName": "custom-scheduler", "plugins": {"bind": {
            "enabled": [{"name": "BarPlugin"}], "disabled": [{"name": "DefaultBinder"}]}}}]
    assert field_errors(parallelism=16, profiles=profiles) == [("Required", "profiles[0].schedulerName")]
    profiles[0]["schedulerName"] = "first"
    cfg = parse(parallelism=16, profiles=profiles)
    check_top_defaults(cfg)
    first, custom = cfg.profiles
    assert first.plugin_args == {"FooPlugin": {}, **DEFAULT_ARGS}
    assert custom.plugin_args == DEFAULT_ARGS
    bind = custom.plugin_set("bind")
    assert [p.name for p in bind.enabled] == ["BarPlugin"] and bind.disabled == ["DefaultBinder"]
    assert custom.plugin_set("multiPoint").enabled == first.plugin_set("multiPoint").enabled


@pytest.mark.parametrize("case, top, percentage, profile_percentage", [
    ("set non default parallelism", {"parallelism": 8}, 0, None),
    ("set non default global percentageOfNodesToScore", {"percentageOfNodesToScore": 50}, 50, None),
    ("set non default profile percentageOfNodesToScore", {"profiles": [{"percentageOfNodesToScore": 50}]}, 0, 50),
    ("set non default global and profile percentageOfNodesToScore",
     {"percentageOfNodesToScore": 10, "profiles": [{"percentageOfNodesToScore": 50}]}, 10, 50),
])
def test_scheduler_defaults_non_default_values(case: str, top: Obj, percentage: int,
                                               profile_percentage: int | None) -> None:
    cfg = parse(**top)
    check_top_defaults(cfg, parallelism=top.get("parallelism", 16), percentage=percentage)
    assert cfg.profiles[0].percentage_of_nodes_to_score == profile_percentage
    assert cfg.profiles[0].plugin_args == DEFAULT_ARGS


def test_scheduler_defaults_unknown_plugin_config() -> None:
    # "unknown plugin config": args of a plugin kubecore has no type for stay as written.
    cfg = parse(profiles=plugin_config("OutOfTreePlugin", {"foo": "bar"}))
    assert cfg.profiles[0].plugin_args == {"OutOfTreePlugin": {"foo": "bar"}, **DEFAULT_ARGS}


def test_default_plugins_are_upstreams() -> None:
    # getDefaultPlugins (TestApplyFeatureGates "Feature gate DynamicResourceAllocation disabled", current
    # upstream: the in-tree cloud volume-limit plugins are gone and invalid in v1).
    cfg = parse()
    assert [(p.name, p.weight) for p in cfg.profiles[0].plugin_set("multiPoint").enabled] == [
        ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
        ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
        ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0), ("VolumeZone", 0),
        ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DefaultPreemption", 0),
        ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", 0)]


def test_leader_election_and_client_connection_keep_set_values() -> None:
    # SetDefaults_KubeSchedulerConfiguration only fills empty fields; an explicit leaderElect false stays.
    cfg = parse(leaderElection={"leaderElect": False, "resourceName": "mine"},
                clientConnection={"qps": 10, "burst": 20, "contentType": "application/json"})
    assert cfg.leader_election == {**DEFAULT_LEADER_ELECTION, "leaderElect": False, "resourceName": "mine"}
    assert cfg.client_connection == {"qps": 10, "burst": 20, "contentType": "application/json"}


# ---- defaults_test.go: TestPluginArgsDefaults -------------------------------------------------

@pytest.mark.parametrize("case, name, args, want", [
    ("DefaultPreemptionArgs empty", "DefaultPreemption", {}, DefaultPreemptionArgs(10, 100)),
    ("DefaultPreemptionArgs with value", "DefaultPreemption", {"minCandidateNodesPercentage": 50},
     DefaultPreemptionArgs(50, 100)),
    ("InterPodAffinityArgs empty", "InterPodAffinity", {}, InterPodAffinityArgs(1)),
    ("InterPodAffinityArgs explicit 0", "InterPodAffinity", {"hardPodAffinityWeight": 0}, InterPodAffinityArgs(0)),
    ("InterPodAffinityArgs with value", "InterPodAffinity", {"hardPodAffinityWeight": 5}, InterPodAffinityArgs(5)),
    ("NodeResourcesBalancedAllocationArgs resources empty", "NodeResourcesBalancedAllocation", {},
     NodeResourcesBalancedAllocationArgs(CPU_MEM)),
    ("NodeResourcesBalancedAllocationArgs with scalar resource", "NodeResourcesBalancedAllocation",
     {"resources": [{"name": "scalar.io/scalar1", "weight": 1}]},
     NodeResourcesBalancedAllocationArgs([("scalar.io/scalar1", 1)])),
    ("NodeResourcesBalancedAllocationArgs with mixed resources", "NodeResourcesBalancedAllocation",
     {"resources": [{"name": "cpu", "weight": 1}, {"name": "scalar.io/scalar1", "weight": 1}]},
     NodeResourcesBalancedAllocationArgs([("cpu", 1), ("scalar.io/scalar1", 1)])),
    ("NodeResourcesBalancedAllocationArgs have resource no weight", "NodeResourcesBalancedAllocation",
     {"resources": [{"name": "cpu"}, {"name": "scalar.io/scalar0"}, {"name": "scalar.io/scalar1", "weight": 1}]},
     NodeResourcesBalancedAllocationArgs([("cpu", 1), ("scalar.io/scalar0", 1), ("scalar.io/scalar1", 1)])),
    ("PodTopologySpreadArgs resources empty", "PodTopologySpread", {}, PodTopologySpreadArgs([], "System")),
    ("NodeResourcesFitArgs not set", "NodeResourcesFit", {},
     NodeResourcesFitArgs(strategy="LeastAllocated", resources=CPU_MEM)),
    ("NodeResourcesFitArgs Resources empty", "NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated"}},
     NodeResourcesFitArgs(strategy="MostAllocated", resources=CPU_MEM)),
    ("VolumeBindingArgs empty, StorageCapacityScoring disabled", "VolumeBinding", {}, VolumeBindingArgs(600)),
])
def test_plugin_args_defaults(case: str, name: str, args: Obj, want: Any) -> None:
    assert args_of(name, args) == want


def test_plugin_args_defaults_spread_with_value_is_then_rejected() -> None:
    # "PodTopologySpreadArgs resources with value": defaultingType defaults to System, which
    # validation then rejects next to non-empty defaultConstraints.
    args: Obj = {"defaultConstraints": [{"topologyKey": "planet", "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 2}]}
    assert args_errors("PodTopologySpread", args) == [("Invalid", "defaultingType")]
    args["defaultingType"] = "List"
    assert args_of("PodTopologySpread", args) == PodTopologySpreadArgs(args["defaultConstraints"], "List")


# ---- default_plugins_test.go: TestMergePlugins (mergePluginSet) ----------------------------------

def ps(*enabled: str | tuple[str, int], disabled: tuple[str, ...] = ()) -> PluginSet:
    refs = [PluginRef(e) if isinstance(e, str) else PluginRef(*e) for e in enabled]
    return PluginSet(refs, list(disabled))


@pytest.mark.parametrize("case, default, custom, want", [
    ("AppendCustomPlugin", ps("DefaultPlugin1", "DefaultPlugin2"), ps("CustomPlugin"),
     ps("DefaultPlugin1", "DefaultPlugin2", "CustomPlugin")),
    ("InsertAfterDefaultPlugins2", ps("DefaultPlugin1", "DefaultPlugin2"),
     ps("CustomPlugin", "DefaultPlugin2", disabled=("DefaultPlugin2",)),
     ps("DefaultPlugin1", "CustomPlugin", "DefaultPlugin2", disabled=("DefaultPlugin2",))),
    ("InsertBeforeAllPlugins", ps("DefaultPlugin1", "DefaultPlugin2"),
     ps("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",)),
     ps("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",))),
    ("ReorderDefaultPlugins", ps("DefaultPlugin1", "DefaultPlugin2"),
     ps("DefaultPlugin2", "DefaultPlugin1", disabled=("*",)),
     ps("DefaultPlugin2", "DefaultPlugin1", disabled=("*",))),
    ("ApplyNilCustomPlugin", ps("DefaultPlugin1", "DefaultPlugin2"), ps(), ps("DefaultPlugin1", "DefaultPlugin2")),
    ("CustomPluginOverrideDefaultPlugin", ps("Plugin1", "Plugin2"), ps(("Plugin1", 2), ("Plugin3", 3)),
     ps(("Plugin1", 2), "Plugin2", ("Plugin3", 3))),
    ("OrderPreserveAfterOverride", ps("Plugin1", "Plugin2", "Plugin3"), ps(("Plugin2", 2), ("Plugin1", 1)),
     ps(("Plugin1", 1), ("Plugin2", 2), "Plugin3")),
    ("RepeatedCustomPlugin", ps("Plugin1", "Plugin2", "Plugin3", "Plugin4"),
     ps(("Plugin2", 2), "Plugin3", ("Plugin3", 4)),
     ps("Plugin1", ("Plugin2", 2), ("Plugin3", 4), "Plugin4", "Plugin3")),
    ("disabled plugins of the default set are kept", ps("DefaultPlugin", disabled=("DefaultDisabled",)),
     ps("CustomPlugin", disabled=("DefaultPlugin",)),
     ps("CustomPlugin", disabled=("DefaultPlugin", "DefaultDisabled"))),
])
def test_merge_plugins(case: str, default: PluginSet, custom: PluginSet, want: PluginSet) -> None:
    assert merge_plugin_set(default, custom) == want


def test_merge_plugins_through_a_profile() -> None:
    # mergePlugins on the real defaults: a multiPoint override keeps its place with its own weight.
    prof = parse(profiles=[{"plugins": {"multiPoint": {
        "enabled": [{"name": "ImageLocality", "weight": 5}, {"name": "CustomPlugin"}],
        "disabled": [{"name": "NodePorts"}]}}}]).profiles[0]
    multi = [(p.name, p.weight) for p in prof.plugin_set("multiPoint").enabled]
    assert ("ImageLocality", 5) in multi and multi[-1] == ("CustomPlugin", 0)
    assert multi.index(("ImageLocality", 5)) < multi.index(("DefaultBinder", 0))
    assert "NodePorts" not in dict(multi)
    assert prof.plugin_set("multiPoint").disabled == ["NodePorts"]


# ---- validation_test.go: TestValidateKubeSchedulerConfigurationV1 ------------------------------

def valid_config() -> Obj:
    """validConfig (without its extender: kubecore refuses every extender)."""
    return {
        "parallelism": 8,
        "clientConnection": {"acceptContentTypes": "application/json", "contentType": "application/json",
                             "qps": 10, "burst": 10},
        "leaderElection": {"resourceLock": "leases", "leaderElect": True, "leaseDuration": "30s",
                           "renewDeadline": "15s", "retryPeriod": "5s", "resourceNamespace": "name",
                           "resourceName": "name"},
        "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 1,
        "profiles": [
            {"schedulerName": "me", "percentageOfNodesToScore": 35,
             "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}]}, "score": {"disabled": [{"name": "*"}]}},
             "pluginConfig": [{"name": "DefaultPreemption",
                               "args": {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}}]},
            {"schedulerName": "other", "percentageOfNodesToScore": 35,
             "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}]},
                         "bind": {"enabled": [{"name": "CustomBind"}]}}},
        ],
    }


def with_changes(*changes: tuple[str, Any]) -> Obj:
    cfg = valid_config()
    for path, value in changes:
        *parents, last = path.split(".")
        node: Any = cfg
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is None:
            node.pop(last)
        else:
            node[last] = value
    return cfg


MISMATCH_QUEUE_SORT: list[Obj] = [
    {"schedulerName": "me", "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}},
     "pluginConfig": [{"name": "PrioritySort"}]},
    {"schedulerName": "other", "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}]}},
     "pluginConfig": [{"name": "CustomSort"}]},
]


# (case, the one change to validConfig, upstream's single error as (type, field); None: valid)
ONE_CHANGE_CASES: list[tuple[str, str, Any, tuple[str, str] | None]] = [
    ("good", "parallelism", 8, None),
    ("bad-parallelism-invalid-value", "parallelism", 0, ("Invalid", "parallelism")),
    ("bad-resource-lock-not-leases", "leaderElection.resourceLock", "configmap",
     ("Invalid", "leaderElection.resourceLock")),
    ("bad-percentage-of-nodes-to-score", "percentageOfNodesToScore", 101, ("Invalid", "percentageOfNodesToScore")),
    ("negative-percentage-of-nodes-to-score", "percentageOfNodesToScore", -1, ("Invalid", "percentageOfNodesToScore")),
    ("scheduler-name-not-set", "profiles.1.schedulerName", "", ("Required", "profiles[1].schedulerName")),
    ("repeated-scheduler-name", "profiles.0.schedulerName", "other", ("Duplicate", "profiles[1].schedulerName")),
    ("greater-than-100-profile-percentage-of-nodes-to-score", "profiles.1.percentageOfNodesToScore", 101,
     ("Invalid", "profiles[1].percentageOfNodesToScore")),
    ("negative-profile-percentage-of-nodes-to-score", "profiles.1.percentageOfNodesToScore", -1,
     ("Invalid", "profiles[1].percentageOfNodesToScore")),
    ("different-queue-sort", "profiles.1.plugins.queueSort", {"enabled": [{"name": "AnotherSort"}]},
     ("Invalid", "profiles[1].plugins.queueSort")),
    ("one-empty-queue-sort", "profiles.0.plugins", None, ("Invalid", "profiles[1].plugins.queueSort")),
    ("invalid-node-percentage", "profiles.0.pluginConfig", [{"name": "DefaultPreemption", "args": {
        "minCandidateNodesPercentage": 200, "minCandidateNodesAbsolute": 100}}],
     ("Invalid", "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage")),
    ("mismatch-queue-sort", "profiles", MISMATCH_QUEUE_SORT, ("Invalid", "profiles[1].plugins.queueSort")),
    ("valid-plugins", "profiles.0.plugins.score", {"disabled": [{"name": "*"}], "enabled": [
        {"name": "PodTopologySpread", "weight": 2}]}, None),
]


@pytest.mark.parametrize("case, path, value, want", ONE_CHANGE_CASES)
def test_validate_kube_scheduler_configuration(case: str, path: str, value: Any, want: tuple[str, str] | None) -> None:
    cfg = with_changes((path, value))
    if want is None:
        parse(**cfg)
    else:
        assert field_errors(**cfg) == [want]


def test_validate_duplicated_plugin_config() -> None:
    # "duplicated-plugin-config"
    cfg = with_changes(("profiles.0.pluginConfig", [{"name": "config"}, {"name": "config"}]))
    assert field_errors(**cfg) == [("Duplicate", "profiles[0].pluginConfig[1]")]


def test_validate_duplicated_plugin_config_args_still_checked() -> None:
    # "duplicated-plugin-config": the duplicate's args are validated too, as upstream validates
    # every pluginConfig entry.
    cfg = with_changes(("profiles.0.pluginConfig", [
        {"name": "config"}, {"name": "config"},
        {"name": "DefaultPreemption"}, {"name": "DefaultPreemption", "args": {"minCandidateNodesAbsolute": -1}}]))
    assert field_errors(**cfg) == [
        ("Duplicate", "profiles[0].pluginConfig[1]"), ("Duplicate", "profiles[0].pluginConfig[3]"),
        ("Invalid", "profiles[0].pluginConfig[3].args.minCandidateNodesAbsolute")]


def test_validate_resource_name_not_set_is_defaulted_from_a_file() -> None:
    # "bad-resource-name-not-set" / "bad-resource-namespace-not-set" hold for the internal struct only:
    # in a file an empty resourceName/resourceNamespace is defaulted before validation.
    cfg = parse(**with_changes(("leaderElection.resourceName", ""), ("leaderElection.resourceNamespace", "")))
    assert (cfg.leader_election["resourceName"], cfg.leader_election["resourceNamespace"]) == \
        ("kube-scheduler", "kube-system")


def test_validate_queue_sort_args_must_match() -> None:
    # validateCommonQueueSort: the queue sort plugin's args must be the same in every profile.
    profiles: list[Any] = copy.deepcopy(MISMATCH_QUEUE_SORT)
    profiles[0]["pluginConfig"] = [{"name": "PrioritySort", "args": {"a": 1}}]
    profiles[1] = {"schedulerName": "other", "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}},
                   "pluginConfig": [{"name": "PrioritySort", "args": {"a": 2}}]}
    assert field_errors(profiles=profiles) == [("Invalid", "profiles[1].pluginConfig.args")]
    profiles[1]["pluginConfig"][0]["args"] = {"a": 1}
    parse(profiles=profiles)


def test_plugin_sets_are_strict() -> None:
    # The strict decoder names unknown fields of a plugin entry (Plugin has name and weight only).
    assert errors(profiles=[{"plugins": {"score": {"enabled": [{"Name": "ImageLocality", "weight": 2}]}}}]) == [
        'strict decoding error: unknown field "profiles[0].plugins.score.enabled[0].Name"',
        "profiles[0].plugins.score.enabled[0].name: Required value"]


def test_validate_only_one_queue_sort_plugin() -> None:
    profiles = [{"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "A"}, {"name": "B"}]}}}]
    assert field_errors(profiles=profiles) == [("Invalid", "profiles[0].plugins.queueSort.Enabled")]


@pytest.mark.parametrize("plugin", ["AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"])
def test_validate_plugins_removed_in_v1(plugin: str) -> None:
    # invalidPluginsByVersion: removed plugins at an extension point or in pluginConfig.
    profiles = [{"plugins": {"filter": {"enabled": [{"name": "NodePorts"}, {"name": plugin}]}},
                 "pluginConfig": [{"name": plugin}]}]
    errs = errors(profiles=profiles)
    detail = (f'was invalid in version "{API}" (KubeSchedulerConfiguration is version "{API}")')
    assert errs == [f'profiles[0].plugins.filter.enabled[1]: Invalid value: "{plugin}": {detail}',
                    f'profiles[0].pluginConfig[0]: Invalid value: "{plugin}": {detail}']


@pytest.mark.parametrize("case, leader_election, want", [
    ("zero durations", {"leaseDuration": "0s", "renewDeadline": "0s", "retryPeriod": "-1s"},
     ["leaderElection.leaseDuration: Invalid value: 0s: must be greater than zero",
      "leaderElection.renewDeadline: Invalid value: 0s: must be greater than zero",
      "leaderElection.retryPeriod: Invalid value: -1s: must be greater than zero",
      "leaderElection.leaseDuration: Invalid value: 0s: LeaseDuration must be greater than RenewDeadline"]),
    ("lease shorter than renew", {"leaseDuration": "10s", "renewDeadline": "1m"},
     ["leaderElection.leaseDuration: Invalid value: 1m: LeaseDuration must be greater than RenewDeadline"]),
])
def test_validate_leader_election(case: str, leader_election: Obj, want: list[str]) -> None:
    # component-base ValidateLeaderElectionConfiguration (run by the scheduler's validation).
    assert errors(leaderElection=leader_election) == want
    parse(leaderElection={**leader_election, "leaderElect": False})  # not checked when not electing


def test_validate_client_connection_burst() -> None:
    assert errors(clientConnection={"burst": -1}) == [
        "clientConnection.burst: Invalid value: -1: must be non-negative"]


def test_validate_backoff_seconds() -> None:
    assert field_errors(podInitialBackoffSeconds=0, podMaxBackoffSeconds=0) == [
        ("Invalid", "podInitialBackoffSeconds")]
    assert field_errors(podInitialBackoffSeconds=20) == [("Invalid", "podMaxBackoffSeconds")]  # max defaults to 10
    cfg = parse(podInitialBackoffSeconds=5, podMaxBackoffSeconds=5)
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (5, 5)


def test_every_error_of_a_file_at_once() -> None:
    cfg = with_changes(("parallelism", 0), ("percentageOfNodesToScore", 101), ("profiles.0.schedulerName", "other"),
                       ("profiles.1.plugins.queueSort", {"enabled": [{"name": "AnotherSort"}]}),
                       ("leaderElection.resourceLock", "configmap"))
    assert sorted(field_errors(**cfg)) == sorted([
        ("Invalid", "leaderElection.resourceLock"), ("Invalid", "parallelism"),
        ("Duplicate", "profiles[1].schedulerName"), ("Invalid", "profiles[1].plugins.queueSort"),
        ("Invalid", "percentageOfNodesToScore")])


# ---- validation_pluginargs_test.go -------------------------------------------------------------

@pytest.mark.parametrize("case, args, want", [
    ("valid args (default)", {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}, []),
    ("negative minCandidateNodesPercentage", {"minCandidateNodesPercentage": -1, "minCandidateNodesAbsolute": 100},
     [("Invalid", "minCandidateNodesPercentage")]),
    ("minCandidateNodesPercentage over 100", {"minCandidateNodesPercentage": 900, "minCandidateNodesAbsolute": 100},
     [("Invalid", "minCandidateNodesPercentage")]),
    ("negative minCandidateNodesAbsolute", {"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": -1},
     [("Invalid", "minCandidateNodesAbsolute")]),
    ("all zero", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
     [("Invalid", "minCandidateNodesPercentage"), ("Invalid", "minCandidateNodesAbsolute")]),
    ("both negative", {"minCandidateNodesPercentage": -1, "minCandidateNodesAbsolute": -1},
     [("Invalid", "minCandidateNodesPercentage"), ("Invalid", "minCandidateNodesAbsolute")]),
])
def test_validate_default_preemption_args(case: str, args: Obj, want: list[tuple[str, str]]) -> None:
    if want:
        assert args_errors("DefaultPreemption", args) == want
    else:
        args_of("DefaultPreemption", args)


@pytest.mark.parametrize("case, weight, want", [
    ("valid args", 10, []),
    ("hardPodAffinityWeight less than min", -1, [("Invalid", "hardPodAffinityWeight")]),
    ("hardPodAffinityWeight more than max", 101, [("Invalid", "hardPodAffinityWeight")]),
])
def test_validate_inter_pod_affinity_args(case: str, weight: int, want: list[tuple[str, str]]) -> None:
    if want:
        assert args_errors("InterPodAffinity", {"hardPodAffinityWeight": weight}) == want
    else:
        assert args_of("InterPodAffinity", {"hardPodAffinityWeight": weight}) == InterPodAffinityArgs(weight)


def constraint(key: str = "node", when: str = "DoNotSchedule", skew: int = 1, **extra: Any) -> Obj:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}


@pytest.mark.parametrize("case, args, want", [
    ("valid config", {"defaultConstraints": [constraint(), constraint("zone", "ScheduleAnyway", 2)],
                      "defaultingType": "List"}, []),
    ("maxSkew less than zero", {"defaultConstraints": [constraint(skew=-1)], "defaultingType": "List"},
     [("Invalid", "defaultConstraints[0].maxSkew")]),
    ("empty topology key", {"defaultConstraints": [constraint("")], "defaultingType": "List"},
     [("Required", "defaultConstraints[0].topologyKey")]),
    ("whenUnsatisfiable is empty", {"defaultConstraints": [constraint(when="")], "defaultingType": "List"},
     [("Required", "defaultConstraints[0].whenUnsatisfiable")]),
    ("whenUnsatisfiable contains unsupported action",
     {"defaultConstraints": [constraint(when="unknown action")], "defaultingType": "List"},
     [("NotSupported", "defaultConstraints[0].whenUnsatisfiable")]),
    ("duplicated constraints", {"defaultConstraints": [constraint(), constraint(skew=2)], "defaultingType": "List"},
     [("Duplicate", "defaultConstraints[1]")]),
    ("label selector present",
     {"defaultConstraints": [constraint("key", labelSelector={"matchLabels": {"a": "b"}})], "defaultingType": "List"},
     [("Forbidden", "defaultConstraints[0].labelSelector")]),
    ("list default constraints, no constraints", {"defaultingType": "List"}, []),
    ("system default constraints", {"defaultingType": "System"}, []),
    ("wrong constraints", {"defaultingType": "unknown"}, [("NotSupported", "defaultingType")]),
    ("system default constraints, but has constraints",
     {"defaultConstraints": [constraint("key")], "defaultingType": "System"}, [("Invalid", "defaultingType")]),
    # metav1validation.ValidateLabelName on the topology key
    ("invalid topology key", {"defaultConstraints": [constraint("a/b/c")], "defaultingType": "List"},
     [("Invalid", "defaultConstraints[0].topologyKey")]),
])
def test_validate_pod_topology_spread_args(case: str, args: Obj, want: list[tuple[str, str]]) -> None:
    if want:
        assert args_errors("PodTopologySpread", args) == want
    else:
        args_of("PodTopologySpread", args)


def test_validate_pod_topology_spread_messages() -> None:
    errs = errors(profiles=plugin_config("PodTopologySpread", {
        "defaultingType": "unknown", "defaultConstraints": [constraint(when=""), constraint(when="")]}))
    args = "profiles[0].pluginConfig[0].args"
    assert errs == [
        f'{args}.defaultingType: Unsupported value: "unknown": supported values: "System", "List"',
        f"{args}.defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
        f"{args}.defaultConstraints[1].whenUnsatisfiable: Required value: can not be empty",
        f'{args}.defaultConstraints[1]: Duplicate value: "{{node, }}"']


# Upstream's messages; where upstream prints a Go value (%#v of a PluginSet or a *field.Path), kubecore
# prints the value in its YAML-ish form or the duplicated name.
@pytest.mark.parametrize("top, want", [
    ({"profiles": plugin_config("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
        constraint(skew=0)]})},
     "profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    ({"profiles": plugin_config("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 200}]}})},
     "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: 200: "
     "resource weight of cpu not in valid range (0, 100]"),
    ({"profiles": [{"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "X"}]}}},
                   {"schedulerName": "b"}]},
     'profiles[1].plugins.queueSort: Invalid value: "{enabled: [], disabled: []}": queueSort must be the same for all '
     'profiles'),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
     'profiles[1].schedulerName: Duplicate value: "a"'),
])
def test_upstream_details_pinned_otherwise(top: Obj, want: str) -> None:
    assert errors(**top) == [want]


@pytest.mark.parametrize("case, resources, want", [
    ("valid config", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}], []),
    ("invalid config", [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
     [("Invalid", "resources[0].weight")]),
    ("repeated resources", [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}],
     [("Duplicate", "resources[1].name")]),
])
def test_validate_balanced_allocation_args(case: str, resources: list[Obj], want: list[tuple[str, str]]) -> None:
    args = {"resources": resources}
    if want:
        assert args_errors("NodeResourcesBalancedAllocation", args) == want
    else:
        args_of("NodeResourcesBalancedAllocation", args)


@pytest.mark.parametrize("case, args, want", [
    ("zero is a valid config", {"bindTimeoutSeconds": 0}, []),
    ("positive value is valid config", {"bindTimeoutSeconds": 10}, []),
    ("negative value is invalid config", {"bindTimeoutSeconds": -10}, [("Invalid", "bindTimeoutSeconds")]),
    ("[StorageCapacityScoring=off] shape should be nil when the feature is off", {"bindTimeoutSeconds": 10}, []),
    ("[StorageCapacityScoring=off] error if the shape is not nil when the feature is off",
     {"bindTimeoutSeconds": 10, "shape": [{"utilization": 1, "score": 1}, {"utilization": 3, "score": 3}]},
     [("Invalid", "shape")]),
])
def test_validate_volume_binding_args(case: str, args: Obj, want: list[tuple[str, str]]) -> None:
    if want:
        assert args_errors("VolumeBinding", args) == want
    else:
        assert args_of("VolumeBinding", args) == VolumeBindingArgs(args["bindTimeoutSeconds"])


@pytest.mark.parametrize("case, args, expect", [
    ("IgnoredResources: too long value", {"ignoredResources": ["longvalue" + "a" * 64]},
     "name part must be no more than 63 characters"),
    ("IgnoredResources: name is empty", {"ignoredResources": ["example.com/"]}, "name part must be non-empty"),
    # upstream's older text says "a qualified name must consist ..."; apimachinery's content.IsLabelKey
    # (what kubecore's is_qualified_name follows) says "a valid label key must consist ..."
    ("IgnoredResources: name has too many slash", {"ignoredResources": ["example.com/aaa/bbb"]},
     "must consist of alphanumeric characters"),
    ("IgnoredResources: valid args", {"ignoredResources": ["example.com"]}, ""),
    ("IgnoredResourceGroups: valid args", {"ignoredResourceGroups": ["example.com"]}, ""),
    ("IgnoredResourceGroups: illegal args", {"ignoredResourceGroups": ["example.com/"]}, "name part must be non-empty"),
    ("IgnoredResourceGroups: name is too long", {"ignoredResourceGroups": ["a" * 64]},
     "name part must be no more than 63 characters"),
    ("IgnoredResourceGroups: name cannot be contain slash", {"ignoredResourceGroups": ["example.com/aa"]},
     "resource group name can't contain '/'"),
    ("ScoringStrategy: type is unsupported", {"scoringStrategy": {"type": "Invalid"}}, 'Unsupported value: "Invalid"'),
])
def test_validate_fit_args(case: str, args: Obj, expect: str) -> None:
    if not expect:
        args_of("NodeResourcesFit", args)
        return
    errs = errors(profiles=plugin_config("NodeResourcesFit", args))
    assert any(expect in e for e in errs), errs


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize("case, resources, want", [
    ("default config", None, []),
    ("multi valid resources", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 10}], []),
    # upstream's "weight less than min" uses weight 0, which a file defaults to 1; -1 is the file's case
    ("weight less than min", [{"name": "cpu", "weight": -1}], [("Invalid", "scoringStrategy.resources[0].weight")]),
    ("weight greater than max", [{"name": "cpu", "weight": 101}], [("Invalid", "scoringStrategy.resources[0].weight")]),
    ("multi invalid resources", [{"name": "cpu", "weight": -1}, {"name": "memory", "weight": 101}],
     [("Invalid", "scoringStrategy.resources[0].weight"), ("Invalid", "scoringStrategy.resources[1].weight")]),
    # ValidateNodeResourcesFitArgs has no duplicate check (only BalancedAllocation's has)
    ("repeated resources are allowed", [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 2}], []),
])
def test_validate_allocated_scoring_strategy(strategy: str, case: str, resources: list[Obj] | None,
                                             want: list[tuple[str, str]]) -> None:
    args: Obj = {"scoringStrategy": {"type": strategy, **({"resources": resources} if resources else {})}}
    if want:
        assert args_errors("NodeResourcesFit", args) == want
    else:
        fit = args_of("NodeResourcesFit", args)
        assert fit.strategy == strategy
        assert fit.resources == ([(r["name"], r["weight"]) for r in resources] if resources else CPU_MEM)


def test_fit_resource_weight_zero_is_defaulted() -> None:
    # SetDefaults_NodeResourcesFitArgs: a weight of 0 (or none) becomes 1.
    fit = args_of("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated", "resources": [
        {"name": "cpu", "weight": 0}, {"name": "gpu"}]}})
    assert fit.resources == [("cpu", 1), ("gpu", 1)]


def test_fit_scoring_strategy_without_type() -> None:
    # SetDefaults_NodeResourcesFitArgs defaults the type only with the whole scoringStrategy; a
    # scoringStrategy without one keeps "" and ValidateNodeResourcesFitArgs (run by NewFit) rejects it.
    assert args_errors("NodeResourcesFit", {"scoringStrategy": {"resources": [{"name": "cpu"}]}}) == [
        ("NotSupported", "scoringStrategy.type")]


DEFAULT_SHAPE = [{"utilization": 30, "score": 3}]


@pytest.mark.parametrize("case, resources, shape, want", [
    ("no shapes", None, [], [("Required", "scoringStrategy.shape")]),
    ("weight greater than max", [{"name": "cpu", "weight": 101}], DEFAULT_SHAPE,
     [("Invalid", "scoringStrategy.resources[0].weight")]),
    ("weight less than min", [{"name": "cpu", "weight": -1}], DEFAULT_SHAPE,
     [("Invalid", "scoringStrategy.resources[0].weight")]),
    ("valid shapes", None, DEFAULT_SHAPE, []),
    ("utilization less than min", None, [{"utilization": -1, "score": 3}],
     [("Invalid", "scoringStrategy.shape[0].utilization")]),
    ("utilization greater than max", None, [{"utilization": 101, "score": 3}],
     [("Invalid", "scoringStrategy.shape[0].utilization")]),
    ("duplicated utilization values", None, [{"utilization": 10, "score": 3}, {"utilization": 10, "score": 3}],
     [("Invalid", "scoringStrategy.shape[1].utilization")]),
    ("increasing utilization values", None,
     [{"utilization": 10, "score": 3}, {"utilization": 20, "score": 3}, {"utilization": 30, "score": 3}], []),
    ("non-increasing utilization values", None,
     [{"utilization": 10, "score": 3}, {"utilization": 20, "score": 3}, {"utilization": 15, "score": 3}],
     [("Invalid", "scoringStrategy.shape[2].utilization")]),
    ("score less than min", None, [{"utilization": 10, "score": -1}], [("Invalid", "scoringStrategy.shape[0].score")]),
    ("score greater than max", None, [{"utilization": 10, "score": 11}], [("Invalid", "scoringStrategy.shape[0].score")]),
    # validateFunctionShape: only the first unsorted point, and every point's ranges
    ("shape point: invalid utilization and score", None,
     [{"utilization": -1, "score": 1}, {"utilization": 10, "score": -1}, {"utilization": 20, "score": 11},
      {"utilization": 101, "score": 1}, {"utilization": 5, "score": 1}, {"utilization": 1, "score": 1}],
     [("Invalid", "scoringStrategy.shape[4].utilization"), ("Invalid", "scoringStrategy.shape[0].utilization"),
      ("Invalid", "scoringStrategy.shape[1].score"), ("Invalid", "scoringStrategy.shape[2].score"),
      ("Invalid", "scoringStrategy.shape[3].utilization")]),
])
def test_validate_requested_to_capacity_ratio_scoring_strategy(case: str, resources: list[Obj] | None,
                                                                 shape: list[Obj], want: list[tuple[str, str]]) -> None:
    strategy: Obj = {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}
    if resources:
        strategy["resources"] = resources
    args = {"scoringStrategy": strategy}
    if want:
        assert args_errors("NodeResourcesFit", args) == want
    else:
        fit = args_of("NodeResourcesFit", args)
        assert fit.shape == [(p["utilization"], p["score"]) for p in shape]


# ---- scheme_test.go: TestCodecsDecodePluginConfig ----------------------------------------------

ALL_ARGS_PROFILE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: DefaultPreemption
    args:
      minCandidateNodesPercentage: 50
      minCandidateNodesAbsolute: 500
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 5
  - name: NodeResourcesFit
    args:
      ignoredResources: ["foo"]
  - name: PodTopologySpread
    args:
      defaultConstraints:
      - maxSkew: 1
        topologyKey: zone
        whenUnsatisfiable: ScheduleAnyway
  - name: VolumeBinding
    args:
      bindTimeoutSeconds: 300
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - key: foo
              operator: In
              values: ["bar"]
  - name: NodeResourcesBalancedAllocation
    args:
      resources:
        - name: cpu       # default weight(1) will be set.
        - name: memory    # weight 0 will be replaced by 1.
          weight: 0
        - name: scalar0
          weight: 1
        - name: scalar1   # default weight(1) will be set for scalar1
        - name: scalar2   # weight 0 will be replaced by 1.
          weight: 0
        - name: scalar3
          weight: 2
"""


def test_decode_all_plugin_args_in_default_profile() -> None:
    # "v1 all plugin args in default profile" decodes; kube-scheduler's validation then rejects two of
    # its args (defaultingType System with constraints, a BalancedAllocation weight of 2).
    from kubecore.scheduler.config import parse_config
    with pytest.raises(ConfigError) as e:
        parse_config(ALL_ARGS_PROFILE)
    args = "profiles[0].pluginConfig"
    assert [err.split(":")[0] for err in e.value.errors] == [
        f"{args}[3].args.defaultingType", f"{args}[6].args.resources[5].weight"]
    text = ALL_ARGS_PROFILE.replace("      defaultConstraints:", "      defaultingType: List\n      defaultConstraints:")
    text = text.replace("weight: 2", "weight: 1")
    prof = parse_config(text).profiles[0]
    assert prof.scheduler_name == "default-scheduler" and prof.percentage_of_nodes_to_score is None
    got = prof.plugin_args
    assert got["DefaultPreemption"] == DefaultPreemptionArgs(50, 500)
    assert got["InterPodAffinity"] == InterPodAffinityArgs(5)
    assert got["NodeResourcesFit"] == NodeResourcesFitArgs(ignored_resources=["foo"], strategy="LeastAllocated",
                                                           resources=CPU_MEM)
    assert got["PodTopologySpread"] == PodTopologySpreadArgs(
        [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}], "List")
    assert got["VolumeBinding"] == VolumeBindingArgs(300)
    assert got["NodeAffinity"] == NodeAffinityArgs({"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]}})
    assert got["NodeResourcesBalancedAllocation"] == NodeResourcesBalancedAllocationArgs(
        [("cpu", 1), ("memory", 1), ("scalar0", 1), ("scalar1", 1), ("scalar2", 1), ("scalar3", 1)])


@pytest.mark.parametrize("case, top, global_pct, profile_pct", [
    ("v1 with non-default global percentageOfNodesToScore", {"percentageOfNodesToScore": 10}, 10, None),
    ("v1 with non-default global and profile percentageOfNodesToScore",
     {"percentageOfNodesToScore": 10, "profiles": [{"percentageOfNodesToScore": 20}]}, 10, 20),
])
def test_decode_percentage_of_nodes_to_score(case: str, top: Obj, global_pct: int, profile_pct: int | None) -> None:
    cfg = parse(**top)
    assert (cfg.percentage_of_nodes_to_score, cfg.profiles[0].percentage_of_nodes_to_score) == (global_pct, profile_pct)
    assert cfg.profiles[0].plugin_args == DEFAULT_ARGS


def test_decode_plugins_can_include_version_and_kind() -> None:
    args = {"apiVersion": API, "kind": "DefaultPreemptionArgs", "minCandidateNodesPercentage": 50}
    assert parse(profiles=plugin_config("DefaultPreemption", args)).profiles[0].plugin_args == {
        **DEFAULT_ARGS, "DefaultPreemption": DefaultPreemptionArgs(50, 100)}


def test_decode_plugin_group_and_kind_should_match_the_type() -> None:
    args = {"apiVersion": API, "kind": "InterPodAffinityArgs"}
    assert errors(profiles=plugin_config("DefaultPreemption", args)) == [
        "decoding .profiles[0].pluginConfig[0]: args for plugin DefaultPreemption were not of type "
        "DefaultPreemptionArgs.kubescheduler.config.k8s.io, got InterPodAffinityArgs.kubescheduler.config.k8s.io"]


@pytest.mark.parametrize("case, strategy, unknown", [
    ("v1 NodResourcesFitArgs shape encoding is strict",
     {"requestedToCapacityRatio": {"shape": [{"Score": 2, "Utilization": 1}]}},
     ["scoringStrategy.requestedToCapacityRatio.shape[0].Score",
      "scoringStrategy.requestedToCapacityRatio.shape[0].Utilization"]),
    ("v1 NodeResourcesFitArgs resources encoding is strict", {"resources": [{"Name": "cpu", "Weight": 1}]},
     ["scoringStrategy.resources[0].Name", "scoringStrategy.resources[0].Weight"]),
])
def test_decode_fit_args_are_strict(case: str, strategy: Obj, unknown: list[str]) -> None:
    # Upstream wraps these in one decoder error ("strict decoding error: decoding .profiles[0].pluginConfig[0]:
    # strict decoding error: decoding args for plugin NodeResourcesFit: strict decoding error: unknown
    # field ..."); kubecore reports each field with its full path, as for every other unknown field,
    # and goes on validating (here: the strategy has no type) where upstream's decoder stops.
    args = "profiles[0].pluginConfig[0].args"
    errs = errors(profiles=plugin_config("NodeResourcesFit", {"scoringStrategy": strategy}))
    assert errs[1:] == [f'strict decoding error: unknown field "{args}.{f}"' for f in unknown]
    assert errs[0].startswith(f'{args}.scoringStrategy.type: Unsupported value: ""')


def test_decode_out_of_tree_plugin_args() -> None:
    cfg = parse(profiles=plugin_config("OutOfTreePlugin", {"foo": "bar"}))
    assert cfg.profiles[0].plugin_args == {"OutOfTreePlugin": {"foo": "bar"}, **DEFAULT_ARGS}


def test_decode_empty_and_no_plugin_args() -> None:
    names = ["DefaultPreemption", "InterPodAffinity", "NodeResourcesFit", "OutOfTreePlugin", "VolumeBinding",
             "PodTopologySpread", "NodeAffinity", "NodeResourcesBalancedAllocation"]
    entries: list[Obj] = [{"name": n, "args": None} if i % 2 == 0 else {"name": n} for i, n in enumerate(names)]
    cfg = parse(profiles=[{"pluginConfig": entries}])
    assert cfg.profiles[0].plugin_args == {**DEFAULT_ARGS, "OutOfTreePlugin": {}}


def test_decode_ignore_preferred_terms_of_existing_pods_is_enabled() -> None:
    cfg = parse(profiles=plugin_config("InterPodAffinity", {"ignorePreferredTermsOfExistingPods": True}))
    assert cfg.profiles[0].plugin_args == {**DEFAULT_ARGS, "InterPodAffinity": InterPodAffinityArgs(1, True)}
