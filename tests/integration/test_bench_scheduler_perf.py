"""Smoke test of `python -m bench.scheduler_perf` at a tiny scale: every workload runs end to end
against a real API server and a real `kubecore scheduler` process, and its JSON document is
well formed and says the run did what the workload means (every measured pod bound, placements
valid, preemption victims deleted, the unschedulable pods still pending). How fast anything
was is never checked; only that the figures are there and agree with each other.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCALE = 0.01
TIMEOUT_S = 300
WORKLOADS = ("SchedulingBasic", "NodeAffinity", "TopologySpreading", "PodAntiAffinity", "PreemptionBasic",
             "Unschedulable", "Gang")
THRESHOLDS = {"SchedulingBasic": 680, "NodeAffinity": 220, "TopologySpreading": 85, "PodAntiAffinity": 60,
              "PreemptionBasic": 18, "Unschedulable": 590}
PERCENTILES = ("Average", "Perc50", "Perc90", "Perc95", "Perc99")


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    out_file = tmp_path_factory.mktemp("scheduler_perf") / "doc.json"
    proc = subprocess.run([sys.executable, "-m", "bench.scheduler_perf", "--scale", str(SCALE),
                           "--output", str(out_file)],
                          cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"bench exited {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}"
    doc = json.loads(proc.stdout)  # stdout is the JSON document and nothing else
    assert json.loads(out_file.read_text()) == doc, "--output file differs from stdout"
    return doc, proc.stderr


def workload(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found = [w for w in doc["workloads"] if w["workload"] == name]
    assert len(found) == 1, [w["workload"] for w in doc["workloads"]]
    return found[0]


def test_document_lists_every_workload_and_its_target(run: tuple[dict[str, Any], str]) -> None:
    doc, stderr = run
    assert doc["benchmark"] == "scheduler_perf" and doc["scale"] == SCALE
    assert [w["workload"] for w in doc["workloads"]] == list(WORKLOADS)
    assert all(name in stderr for name in WORKLOADS), "progress lines go to stderr"
    targets = {t["target"].split()[0]: t for t in doc["targets"]}
    assert set(targets) == set(THRESHOLDS)
    for name, t in targets.items():
        w = workload(doc, name)
        assert t["threshold"] == w["target"] == 5 * THRESHOLDS[name]
        assert t["value"] == w["SchedulingThroughput"]["Average"] and t["pass"] == w["pass"]
        assert t["at_upstream_size"] is False, "a scaled-down run must not claim upstream's size"


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_figures_are_well_formed(run: tuple[dict[str, Any], str], name: str) -> None:
    w = workload(run[0], name)
    for key in ("nodes", "init", "measured"):
        assert isinstance(w[key], int) and w[key] > 0, (key, w[key])
    tp = w["SchedulingThroughput"]
    assert tp["samples"] >= 1 and all(is_number(tp[k]) and tp[k] > 0 for k in PERCENTILES), tp
    assert tp["Perc50"] <= tp["Perc90"] <= tp["Perc95"] <= tp["Perc99"], tp
    assert w["threshold"] == THRESHOLDS.get(name)
    if w["threshold"] is None:
        assert w["target"] is None and w["pass"] is None
    else:
        assert w["target"] == 5 * w["threshold"] and w["pass"] == (tp["Average"] >= w["target"])
    assert is_number(w["pods_per_s_overall"]) and w["pods_per_s_overall"] > 0
    assert is_number(w["create"]["pods_per_s"]) and w["create"]["pods_per_s"] > 0
    cpu = w["cpu"]
    for key in ("apiserver_cpu_s", "scheduler_cpu_s", "bench_client_cpu_s", "other_cpu_s"):
        assert is_number(cpu[key]), (key, cpu)
    assert cpu["scheduler_cpu_s"] >= 0 and cpu["apiserver_cpu_s"] >= 0, cpu  # clock ticks: 0 in a tiny window


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_measured_pod_is_bound_and_placements_are_valid(run: tuple[dict[str, Any], str], name: str) -> None:
    checks = workload(run[0], name)["checks"]
    assert checks["measured_bound"] is True
    assert checks["overcommitted_nodes"] == 0
    assert checks["nodes_with_two_anti_affinity_pods"] == 0


def test_topology_spreading_respects_max_skew(run: tuple[dict[str, Any], str]) -> None:
    assert workload(run[0], "TopologySpreading")["checks"]["spread_zone_skew"] <= 5  # the pods' maxSkew


def test_preemption_deleted_the_victims(run: tuple[dict[str, Any], str]) -> None:
    w = workload(run[0], "PreemptionBasic")
    checks = w["checks"]
    assert w["init"] == 4 * w["nodes"], "every node starts full of low-priority pods"
    # a 3-cpu pod on a node holding 4 x 900m needs three of them gone
    assert checks["victims_deleted"] >= 3 * w["measured"], checks
    assert checks["init_pods_left"] == w["init"] - checks["victims_deleted"]


def test_unschedulable_pods_stay_pending(run: tuple[dict[str, Any], str]) -> None:
    w = workload(run[0], "Unschedulable")
    checks = w["checks"]
    assert checks["pending_pods"] >= w["pending"] >= 1, checks
    assert checks["pending_pods_bound"] == 0, checks
    assert checks["pending_pods_marked_unschedulable"] == checks["pending_pods"], checks


def test_gangs_are_bound_whole(run: tuple[dict[str, Any], str]) -> None:
    w = workload(run[0], "Gang")
    assert w["checks"]["gangs"] == w["measured"] // 10 and w["checks"]["partial_gangs"] == 0, w["checks"]


def test_collector_samples_the_upstream_way_and_covers_short_runs() -> None:
    """The sampling rules of upstream's throughputCollector on given counts, and the one sample
    that stands for a run too short for any (no process is started)."""
    from bench.scheduler_perf_collect import ThroughputCollector

    c = ThroughputCollector(bound=None, namespace="ns")  # type: ignore[arg-type]  # only count() would use it
    c._sample(1.0, 0)  # nothing bound yet: not even a baseline
    c._sample(2.0, 100)  # the baseline
    c._sample(3.0, 100)  # nothing new: merged into the next sample
    c._sample(4.0, 700)
    assert c.samples == [300.0, 300.0] and c.tail_sample_used is None
    c.finish(4.5, 800)  # samples exist: the partial last interval is dropped, as upstream
    assert c.samples == [300.0, 300.0]

    short = ThroughputCollector(bound=None, namespace="ns")  # type: ignore[arg-type]
    short._start_time = 0.0
    short._sample(1.0, 400)  # the baseline, then the run ends before the next tick
    short.finish(1.5, 500)
    assert short.samples == [200.0] and short.tail_sample_used == "since-baseline"

    all_at_once = ThroughputCollector(bound=None, namespace="ns")  # type: ignore[arg-type]
    all_at_once._start_time = 0.0
    all_at_once._sample(1.0, 500)  # every pod was bound before the first tick that saw any
    all_at_once.finish(1.25, 500)
    assert all_at_once.samples == [400.0] and all_at_once.tail_sample_used == "whole-run"
