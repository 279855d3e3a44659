"""KubeSchedulerConfiguration parsing: upstream defaults, merging, multiPoint expansion, errors."""

from __future__ import annotations

import pytest

from kubecore.scheduler.config import DEFAULT_PLUGINS, default_config, load_config, parse_config
from kubecore.scheduler.config_args import (
    DefaultPreemptionArgs, NodeResourcesFitArgs, PodTopologySpreadArgs, SYSTEM_DEFAULT_CONSTRAINTS,
)
from kubecore.scheduler.configerrors import ConfigError
from tests.unit.scheduler.helpers import build, config, needs_native, python_profile


def test_defaults_are_upstreams() -> None:
    cfg = default_config()
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler"]
    assert (cfg.parallelism, cfg.percentage_of_nodes_to_score) == (16, 0)
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1, 10)
    prof = cfg.profiles[0]
    multi = [(p.name, p.weight) for p in prof.plugin_set("multiPoint").enabled]
    assert multi == DEFAULT_PLUGINS
    assert ("TaintToleration", 3) in multi and ("NodeAffinity", 2) in multi and ("PodTopologySpread", 2) in multi
    fit = prof.plugin_args["NodeResourcesFit"]
    assert isinstance(fit, NodeResourcesFitArgs)
    assert (fit.strategy, fit.resources) == ("LeastAllocated", [("cpu", 1), ("memory", 1)])
    assert prof.plugin_args["DefaultPreemption"] == DefaultPreemptionArgs(10, 100)
    spread = prof.plugin_args["PodTopologySpread"]
    assert isinstance(spread, PodTopologySpreadArgs) and spread.defaulting_type == "System"
    assert spread.effective_constraints() == SYSTEM_DEFAULT_CONSTRAINTS


def test_yaml_and_json_profiles_and_plugin_args(tmp_path: object) -> None:
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  percentageOfNodesToScore: 50
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: nvidia.com/gpu, weight: 3}, {name: cpu}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
  - name: DefaultPreemption
    args: {minCandidateNodesPercentage: 20, minCandidateNodesAbsolute: 5}
"""
    cfg = parse_config(text)
    assert cfg.percentage_of_nodes_to_score == 30
    packer = cfg.profile("bin-packer")
    assert packer is not None and packer.percentage_of_nodes_to_score == 50
    fit = packer.plugin_args["NodeResourcesFit"]
    assert fit.strategy == "RequestedToCapacityRatio"
    assert fit.resources == [("nvidia.com/gpu", 3), ("cpu", 1)]
    assert fit.shape == [(0, 0), (100, 10)]
    assert packer.plugin_args["DefaultPreemption"] == DefaultPreemptionArgs(20, 5)
    score = packer.plugin_set("score")
    assert [p.name for p in score.enabled] == ["NodeResourcesFit"] and score.disabled == ["NodeResourcesBalancedAllocation"]
    import json
    path = tmp_path / "c.json"  # type: ignore[operator]
    path.write_text(json.dumps({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                "profiles": [{"schedulerName": "x"}]}))
    assert load_config(path).profiles[0].scheduler_name == "x"


@pytest.mark.parametrize("doc, expected", [
    ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3", "kind": "KubeSchedulerConfiguration"},
     "unsupported apiVersion 'kubescheduler.config.k8s.io/v1beta3'"),
    ({"percentageOfNodesToScore": 120}, "percentageOfNodesToScore: Invalid value: 120: not in valid range [0-100]"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 2},
     "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to PodInitialBackoffSeconds"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, 'profiles[1].schedulerName: Duplicate value: "a"'),
    ({"profiles": [{"schedulerName": "a"}, {}]}, "profiles[1].schedulerName: Required value"),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Foo"}}}]}]},
     'profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Foo": supported values: '
     '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "resources": [{"name": "cpu", "weight": 200}]}}}]}]},
     "resource weight of cpu not in valid range (0, 100]"),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
            {"utilization": 50, "score": 1}, {"utilization": 10, "score": 20}]}}}}]}]},
     "utilization values must be sorted in increasing order"),
    ({"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}}]}]},
     'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    ({"profiles": [{"pluginConfig": [{"name": "PodTopologySpread", "args": {"defaultingType": "List",
                                                                             "defaultConstraints": [{"maxSkew": 0}]}}]}]},
     "maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    ({"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": {
        "minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}}]}]},
     "cannot be zero at the same time as minCandidateNodesAbsolute"),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}]}]},
     'profiles[0].pluginConfig[1]: Duplicate value: "NodeResourcesFit"'),
    ({"profiles": [{"plugins": {"filters": {}}}]}, 'strict decoding error: unknown field "profiles[0].plugins.filters"'),
    ({"bogus": 1}, 'strict decoding error: unknown field "bogus"'),
    ({"profiles": [{"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "Other"}],
                                                                    "disabled": [{"name": "*"}]}}},
                   {"schedulerName": "b"}]}, "queueSort must be the same for all profiles"),
])
def test_bad_configs_say_what_is_wrong(doc: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        config(**{k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}) if "apiVersion" not in doc \
            else parse_config(__import__("json").dumps(doc))
    assert expected in str(e.value), str(e.value)


def test_every_error_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as e:
        config(percentageOfNodesToScore=-1, parallelism=0)
    assert len(e.value.errors) == 2


def test_undecodable_document() -> None:
    with pytest.raises(ConfigError, match="cannot decode"):
        parse_config("profiles: [unclosed")


def test_star_disables_defaults_and_custom_plugins_are_appended() -> None:
    cfg = config([python_profile("CpuFit")])
    multi = cfg.profiles[0].plugin_set("multiPoint")
    assert [p.name for p in multi.enabled] == ["PrioritySort", "DefaultBinder", "CpuFit"]
    core, _, _ = build(cfg)
    fw = core.frameworks["default-scheduler"]
    assert [p.name for p in fw.plugins.filter] == ["CpuFit"]
    assert fw.native is None


def test_multipoint_expansion_overrides_and_disables() -> None:
    prof = python_profile("CpuFit", "VolumeBinding",
                          filter={"enabled": [{"name": "VolumeBinding"}], "disabled": [{"name": "CpuFit"}]})
    core, _, _ = build(config([prof]))
    fw = core.frameworks["default-scheduler"]
    # CpuFit disabled at filter; VolumeBinding enabled there explicitly: an override, kept first.
    assert [p.name for p in fw.plugins.filter] == ["VolumeBinding"]
    assert [p.name for p in fw.plugins.pre_filter] == ["VolumeBinding"]
    assert fw.filter_order == ["VolumeBinding"]


@pytest.mark.parametrize("prof, expected", [
    (python_profile("NoSuchPlugin"), 'PreEnqueuePlugin "NoSuchPlugin" does not exist'),
    (python_profile(filter={"enabled": [{"name": "PrioritySort"}]}), 'plugin "PrioritySort" does not extend FilterPlugin plugin'),
    (python_profile(filter={"enabled": [{"name": "CpuFit"}, {"name": "CpuFit"}]}),
     'plugin "CpuFit" already registered as "FilterPlugin"'),
    ({"schedulerName": "x", "plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultBinder"}]}}},
     'only one queue sort plugin required for profile with scheduler name "x", but got 0'),
    ({"schedulerName": "x", "plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}]}}},
     'at least one bind plugin is needed for profile with scheduler name "x"'),
])
def test_framework_build_errors(prof: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        build(config([prof]))
    assert expected in str(e.value)


def test_missing_service_is_a_config_error() -> None:
    from kubecore.scheduler import Services, build_scheduler

    async def bind(p: object, n: str) -> None:
        return None
    with pytest.raises(ConfigError, match='initializing plugin "VolumeBinding".*get_pvc'):
        build_scheduler(config([python_profile("VolumeBinding")]), services=Services(bind=bind), use_native=False)
    with pytest.raises(ConfigError, match='initializing plugin "DefaultBinder".*bind'):
        build_scheduler(config([python_profile()]), use_native=False)


@needs_native
def test_default_profile_weights_and_native_split() -> None:
    core, _, _ = build(default_config(), native=True)
    fw = core.frameworks["default-scheduler"]
    assert fw.weights["TaintToleration"] == 3 and fw.weights["NodeAffinity"] == 2
    assert fw.weights["NodeResourcesFit"] == 1 and fw.weights["ImageLocality"] == 1
    assert fw.native is not None
    assert fw.native.filters == ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
                                 "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity"]
    assert [p.name for p in fw.plugins.filter] == ["VolumeBinding"]
    assert [p.name for p in fw.plugins.post_filter] == ["DefaultPreemption"]
    assert "VolumeZone" in fw.unavailable and "NodeVolumeLimits" in fw.unavailable


@needs_native
def test_score_point_weight_overrides_multipoint() -> None:
    cfg = config([{"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}]}}}])
    core, _, _ = build(cfg, native=True)
    fw = core.frameworks["default-scheduler"]
    assert fw.weights["NodeResourcesFit"] == 7
    assert fw.native is not None and ("NodeResourcesFit", 7) in fw.native.scores
    assert fw.native.scores[0] == ("NodeResourcesFit", 7)  # an override comes first


def test_weight_overflow_is_rejected() -> None:
    from kubecore.scheduler.plugins.example import NodeLabelPreference
    prof = python_profile(score={"enabled": [{"name": "NodeLabelPreference", "weight": 10 ** 17}]})
    with pytest.raises(ConfigError, match="total score of Score plugins could overflow"):
        build(config([prof]), out_of_tree={"NodeLabelPreference": NodeLabelPreference.new})


def test_explicit_unimplemented_plugin_is_an_error() -> None:
    with pytest.raises(ConfigError, match='"VolumeZone" does not exist'):
        build(config([python_profile(filter={"enabled": [{"name": "VolumeZone"}]})]))
