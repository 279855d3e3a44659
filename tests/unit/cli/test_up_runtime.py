"""`kubecore up --runtime`: which nodes it starts (containerd: this machine as one `kubecore kubelet`;
sim: N hollow nodes), what auto chooses, and what it says about it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubecore.cli.apiserver_cmd import UP_POD_CIDR, up_children
from kubecore.cli.main import build_parser


def _nodes(*flags: str) -> list[tuple[str, list[str]]]:
    args = build_parser().parse_args(["up", "--data-dir", "d", "--controllers", "", "--no-scheduler", *flags])
    return [(c.name, c.argv[3:]) for c in up_children(args, kubeconfig=Path("d/kubeconfig"))]


def _kubelet(cidr: str = UP_POD_CIDR, port: str = "10250", eviction_hard: str = "memory.available<100Mi",
             image_gc_high: str = "100") -> tuple[str, list[str]]:
    return ("the kubelet", ["kubelet", "--kubeconfig", "d/kubeconfig", "--runtime", "containerd", "--root-dir",
                            str(Path("d/kubelet").absolute()), "--pod-cidr", cidr, "--port", port,
                            "--eviction-hard", eviction_hard, "--image-gc-high-threshold", image_gc_high])


def test_auto_picks_containerd_when_the_machine_can_run_it(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubecore.kubelet.containerd_node.unusable", lambda: None)
    assert _nodes("--nodes", "1") == [_kubelet()]
    assert "this machine is the node, with containerd" in capsys.readouterr().err
    assert _nodes("--nodes", "3") == [_kubelet()]
    assert "--nodes 3 with containerd: this machine runs one node" in capsys.readouterr().err
    assert _nodes() == []  # auto without --nodes: no node at all, nothing to decide


def test_auto_falls_back_to_sim_and_says_why(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubecore.kubelet.containerd_node.unusable", lambda: "missing /usr/bin/runc")
    assert _nodes("--nodes", "2") == [("the hollow nodes", ["hollow-nodes", "--kubeconfig", "d/kubeconfig",
                                                            "--count", "2"])]
    assert "use the sim runtime (simulated containers; containerd cannot run here: missing /usr/bin/runc)" \
        in capsys.readouterr().err


def test_explicit_runtimes(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubecore.kubelet.containerd_node.unusable", lambda: None)
    assert _nodes("--runtime", "containerd") == [_kubelet()]  # containerd implies one node
    assert _nodes("--runtime", "sim") == []
    assert _nodes("--runtime", "sim", "--nodes", "4")[0][1][-2:] == ["--count", "4"]
    assert capsys.readouterr().err == ""


def test_the_containerd_node_takes_its_pod_cidr_and_kubelet_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubecore.kubelet.containerd_node.unusable", lambda: None)
    flags = ("--runtime", "containerd", "--pod-cidr", "10.250.3.0/24", "--kubelet-port", "20250")
    assert _nodes(*flags) == [_kubelet("10.250.3.0/24", "20250")]


def test_the_containerd_node_evicts_for_memory_only_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """As kind's nodes: the node's disk is this machine's, so no DiskPressure and no image GC by
    default; the kubelet's own flags bring them back."""
    monkeypatch.setattr("kubecore.kubelet.containerd_node.unusable", lambda: None)
    flags = ("--runtime", "containerd", "--eviction-hard", "memory.available<1Gi,nodefs.available<10%",
             "--image-gc-high-threshold", "85")
    assert _nodes(*flags) == [_kubelet(eviction_hard="memory.available<1Gi,nodefs.available<10%", image_gc_high="85")]


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--eviction-hard", "nodefs.available=10%", "malformed eviction threshold 'nodefs.available=10%'"),
    ("--eviction-hard", "disk<10%", "unsupported eviction signal 'disk'"),
    ("--eviction-hard", "nodefs.available<110%", "must be >= 0% and <= 100%"),
    ("--image-gc-high-threshold", "101", "must be a whole percentage from 0 to 100, got '101'"),
])
def test_bad_node_flags_stop_up_before_anything_starts(flag: str, value: str, says: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["up", "--data-dir", "d", flag, value])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err
