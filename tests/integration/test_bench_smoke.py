"""Smoke test of the store benchmark: ``python -m bench.store_vs_etcd --quick`` runs end to end.

It starts a real etcd (bench/etcd_peer.py installs Debian's etcd-server if it is missing; if that is
impossible the run fails, and so does this test) and kubecore's Store, then prints one JSON document.
Only the document's structure is checked -- both systems measured, every ratio and target present
with numeric values -- never how fast anything was.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240
CONCURRENCY = (1, 16, 256)  # the script's default --concurrency
# every figure a ratio is taken of (bench.store_vs_etcd.RATIO_FIELDS), per workload
PER_OP = ("ops_per_s", "p50_ms", "p99_ms")
FIGURES = {
    **{f"puts.c{c}.{f}": f for c in CONCURRENCY for f in PER_OP},
    **{f"reads.{w}.{f}": f for w in ("get", "range_prefix_100") for f in PER_OP},
    "watch.events_per_s": "events_per_s",
    "footprint.memory.bytes_per_key": "bytes_per_key",
    "footprint.memory.bytes_per_key_overhead": "bytes_per_key_overhead",
    "footprint.reopen.reopen_s": "reopen_s",
}
KUBECORE_ONLY = {"watch_sweep.events_per_s"}  # kubecore's batch-drain watch; compared with etcd's watch
TARGETS = {  # target name -> how its pass flag relates value and threshold
    **{f"durable puts >= 5x etcd, {c} writers": ">=" for c in CONCURRENCY},
    **{f"put p99 <= etcd, {c} writers": "<=" for c in CONCURRENCY},
    "watch events delivered in-process > 1M/s": ">",
    "reopen of 1M keys < 2 s": "<",
    "memory per key beyond key+value < 300 B": "<",
}


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def get(tree: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        assert isinstance(tree, dict) and part in tree, f"missing {path!r} (no {part!r})"
        tree = tree[part]
    return tree


def run_quick(tmp_path: Path) -> tuple[dict[str, Any], str]:
    out_file = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.store_vs_etcd", "--quick", "--output", str(out_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"bench exited {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}"
    doc = json.loads(proc.stdout)  # stdout is the JSON document and nothing else
    assert json.loads(out_file.read_text()) == doc, "--output file differs from stdout"
    return doc, proc.stderr


def test_store_vs_etcd_quick_document(tmp_path: Path) -> None:
    doc, stderr = run_quick(tmp_path)
    assert set(doc) >= {"meta", "etcd", "kubecore", "ratios_kubecore_over_etcd", "targets"}, sorted(doc)

    meta = doc["meta"]
    assert meta["params"]["quick"] is True
    assert meta["params"]["only"] is None, "both systems must be measured"
    assert str(meta["etcd_version"]).startswith("3."), meta["etcd_version"]
    assert meta["kubecore_version"], meta
    assert stderr.strip(), "progress goes to stderr"

    # both systems measured every workload, with numeric figures
    for system in ("etcd", "kubecore"):
        side = doc[system]
        assert isinstance(side, dict) and side, f"{system} not measured"
        for path in FIGURES:
            value = get(side, path)
            assert is_number(value) and value >= 0, f"{system}.{path} = {value!r}"
        for c in CONCURRENCY:
            assert get(side, f"puts.c{c}.ops_per_s") > 0, f"{system} did no puts with {c} writers"
        assert get(side, "watch.events") > 0 and get(side, "footprint.memory.keys") > 0
    for path in KUBECORE_ONLY:
        assert is_number(get(doc["kubecore"], path)), path

    # a ratio kubecore/etcd for every figure both measured, consistent with the two figures
    ratios = doc["ratios_kubecore_over_etcd"]
    assert set(ratios) == set(FIGURES) | KUBECORE_ONLY, sorted(set(ratios) ^ (set(FIGURES) | KUBECORE_ONLY))
    for path, ratio in ratios.items():
        assert is_number(ratio), f"ratio {path} = {ratio!r}"
        kube = get(doc["kubecore"], path)
        etcd = get(doc["etcd"], "watch.events_per_s" if path in KUBECORE_ONLY else path)
        if etcd:
            assert math.isclose(ratio, kube / etcd, rel_tol=1e-3), f"ratio {path}: {ratio} vs {kube}/{etcd}"

    # every target present, with value, threshold and a pass flag that agrees with them
    targets = doc["targets"]
    assert isinstance(targets, list)
    by_name = {t["target"]: t for t in targets}
    assert len(by_name) == len(targets), "duplicate target names"
    assert set(by_name) == set(TARGETS), sorted(set(by_name) ^ set(TARGETS))
    for name, op in TARGETS.items():
        t = by_name[name]
        assert {"value", "threshold", "pass"} <= set(t), t
        value, threshold, passed = t["value"], t["threshold"], t["pass"]
        assert is_number(value) and is_number(threshold), t
        assert isinstance(passed, bool), t
        expected = {">=": value >= threshold, "<=": value <= threshold, ">": value > threshold,
                    "<": value < threshold}[op]
        assert passed == expected, t
    # quick runs use far fewer than 1M keys and must say so
    assert "not 1M" in by_name["reopen of 1M keys < 2 s"].get("note", ""), by_name["reopen of 1M keys < 2 s"]


def test_sched_inprocess_small_run_binds_every_pod() -> None:
    """bench.sched_inprocess at a small size: every pod bound, a positive rate in the document."""
    proc = subprocess.run([sys.executable, "-m", "bench.sched_inprocess", "--nodes", "200", "--init-pods", "50",
                           "--pods", "500", "--runs", "1", "--confirm"],
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["pods"] == 500 and len(doc["runs_pods_per_s"]) == 1 and doc["median_pods_per_s"] > 0
