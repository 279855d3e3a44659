"""`kubecore scheduler` flags and configuration, and the components `kubecore up` starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubecore.cli.apiserver_cmd import up_children
from kubecore.cli.main import build_parser
from kubecore.cli.scheduler_cmd import options_from

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
  leaseDuration: 30s
  resourceName: my-scheduler
profiles:
- schedulerName: default-scheduler
- schedulerName: batch
"""


def test_defaults_are_upstreams() -> None:
    o = options_from(build_parser().parse_args(["scheduler"]))
    assert (o.leader_elect, o.lease_duration, o.renew_deadline, o.retry_period) == (True, 15.0, 10.0, 2.0)
    assert (o.lease_namespace, o.lease_name, o.metrics_port) == ("kube-system", "kube-scheduler", 10259)
    assert [p.scheduler_name for p in o.config.profiles] == ["default-scheduler"]


def test_the_config_file_sets_profiles_and_leader_election_and_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(CONFIG)
    o = options_from(build_parser().parse_args(["scheduler", "--config", str(path)]))
    assert [p.scheduler_name for p in o.config.profiles] == ["default-scheduler", "batch"]
    assert (o.leader_elect, o.lease_duration, o.lease_name) == (False, 30.0, "my-scheduler")
    o = options_from(build_parser().parse_args(["scheduler", "--config", str(path), "--leader-elect",
                                                "--leader-elect-lease-duration", "20s", "--metrics-port", "0"]))
    assert (o.leader_elect, o.lease_duration, o.metrics_port) == (True, 20.0, 0)


def test_feature_gates_turn_pop_from_backoff_on_and_refuse_unknown_gates(capsys: pytest.CaptureFixture[str]) -> None:
    assert options_from(build_parser().parse_args(["scheduler"])).pop_from_backoff is False
    o = options_from(build_parser().parse_args(["scheduler", "--feature-gates", "SchedulerPopFromBackoffQ=true"]))
    assert o.pop_from_backoff is True
    for bad, said in [("Nope=true", "unrecognized feature gate: Nope"), ("SchedulerPopFromBackoffQ", "want NAME=true")]:
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args(["scheduler", "--feature-gates", bad])
        assert e.value.code == 2 and said in capsys.readouterr().err


def test_a_bad_config_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: 3\n")
    args = build_parser().parse_args(["scheduler", "--config", str(path)])
    assert args.run(args) == 2
    assert capsys.readouterr().err.startswith("kubecore: error:")


def _up(*flags: str) -> list[tuple[str, list[str]]]:
    args = build_parser().parse_args(["up", "--data-dir", "d", *flags])
    return [(c.name, c.argv[3:]) for c in up_children(args, kubeconfig=Path("d/kubeconfig"))]


def test_up_starts_the_controller_manager_then_the_scheduler() -> None:
    assert _up() == [
        ("the controller manager", ["controller-manager", "--kubeconfig", "d/kubeconfig", "--controllers", "*"]),
        ("the scheduler", ["scheduler", "--kubeconfig", "d/kubeconfig", "--metrics-port", "10259"])]


def test_up_without_controllers_or_scheduler_starts_no_child() -> None:
    assert _up("--controllers", "", "--no-scheduler") == []


def test_up_with_nodes_adds_one_hollow_nodes_process_and_says_auto_means_sim(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubecore.kubelet.containerd_node.unusable", lambda: "not running as root")
    children = _up("--controllers", "", "--nodes", "3", "--scheduler-config", "s.yaml")
    assert children == [
        ("the scheduler", ["scheduler", "--kubeconfig", "d/kubeconfig", "--metrics-port", "10259", "--config", "s.yaml"]),
        ("the hollow nodes", ["hollow-nodes", "--kubeconfig", "d/kubeconfig", "--count", "3"])]
    assert "sim runtime" in capsys.readouterr().err
    _up("--nodes", "1", "--runtime", "sim")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["-1", "some"])
def test_up_nodes_must_be_a_count(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--data-dir", "d", "--nodes", value])
    assert "must be a number of nodes" in capsys.readouterr().err


def test_up_with_the_metrics_port_taken_runs_the_scheduler_without_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        children = _up("--controllers", "", "--scheduler-metrics-port", str(taken))
    assert children == [("the scheduler", ["scheduler", "--kubeconfig", "d/kubeconfig", "--metrics-port", "0"])]
    assert f"127.0.0.1:{taken} is in use" in capsys.readouterr().err
