"""Smoke test of the containerd pod startup benchmark: `python -m bench.containerd_startup --pods 3`
runs a real `kubecore up --runtime containerd` end to end and prints one JSON document.

Only the document's structure and bookkeeping are checked (every pod ran and was counted, every
component was found and measured, nothing was left behind), never how fast anything was. Needs
root and Debian's containerd, runc, containernetworking-plugins and busybox-static: without them
the test fails saying so, it never skips.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubecore.kubelet.containerd_node import unusable

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 400
PODS = 3
COMPONENTS = {"apiserver", "controller-manager", "scheduler", "kubelet", "containerd", "shims"}


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def test_containerd_startup_smoke_document(tmp_path: Path) -> None:
    why = unusable()
    if why:
        pytest.fail(f"the containerd benchmark cannot run here: {why} (run as root; tests/run.sh installs the "
                    "packages)", pytrace=False)
    out_file = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "bench.containerd_startup", "--pods", str(PODS), "--settle", "1",
                           "--output", str(out_file)], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                          check=False)
    assert proc.returncode == 0, f"bench exited {proc.returncode}\nstderr:\n{proc.stderr[-4000:]}"
    doc = json.loads(proc.stdout)  # stdout is the JSON document and nothing else
    assert json.loads(out_file.read_text()) == doc
    assert "Ready" in proc.stderr, "progress goes to stderr"

    pods = doc["pods"]
    assert (pods["total"], pods["running"], pods["errors"]) == (PODS, PODS, 0)
    latency = pods["startup_latency"]
    assert latency["count"] == PODS
    assert all(is_number(latency[k]) and latency[k] > 0 for k in ("p50_s", "p90_s", "p99_s", "max_s"))
    assert latency["p50_s"] <= latency["p90_s"] <= latency["p99_s"] <= latency["max_s"]
    assert set(pods["cpu_cores"]) >= COMPONENTS and all(is_number(v) for v in pods["cpu_cores"].values())

    before, after = doc["before"]["memory"], doc["after"]["memory"]
    for mem in (before, after):
        assert set(mem["components"]) >= COMPONENTS
        assert mem["rss_mb"] == pytest.approx(sum(c["rss_mb"] for c in mem["components"].values()), abs=0.5)
        assert all(mem["components"][c]["processes"] == 1 and mem["components"][c]["rss_mb"] > 0
                   for c in COMPONENTS - {"shims"})
    assert before["components"]["shims"]["processes"] == 0  # no pod yet: no shim
    assert after["components"]["shims"]["processes"] >= 1 and after["components"]["shims"]["rss_mb"] > 0
    assert is_number(doc["after"]["memory_per_pod_mb"]["rss"])

    assert doc["cleanup"]["pods_left"] == 0 and doc["cleanup"]["shims_left"] == 0
    [target] = doc["targets"]
    assert target["threshold"] == 5.0 and target["value"] == latency["p99_s"]
    assert target["pass"] == (latency["p99_s"] <= 5.0)
