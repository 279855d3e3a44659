"""Smoke test of `python -m bench.up_footprint` at tiny scale (5 hollow nodes, 20 pods): the whole
`kubecore up --runtime sim` tree is found and measured at each step, every pod ran. Only the
document's structure and bookkeeping are checked, never how much memory anything took."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_up_footprint_smoke_document() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.up_footprint", "--nodes", "5", "--pods", "20", "--settle", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert (doc["nodes"], doc["pods"]) == (5, 20)
    assert doc["no_nodes"]["processes"] == 3  # the API server (up), controller manager, scheduler
    assert doc["with_nodes"]["processes"] == doc["with_pods"]["processes"] == 4  # + the hollow nodes
    for step in ("no_nodes", "with_nodes", "with_pods"):
        assert doc[step]["rss_mb"] > 0 and doc[step]["pss_mb"] > 0
    assert set(doc["mb_per_1000_nodes"]) == set(doc["mb_per_10k_pods"]) == {"rss_mb", "pss_mb"}
    assert doc["seconds_to_all_running"] >= 0
