"""kube-controller-manager's --concurrent-<x>-syncs flags size the controllers they name."""

from __future__ import annotations

import pytest

from kubecore.cli import controller_manager_cmd
from kubecore.cli.main import build_parser
from kubecore.controllers.base import REGISTRY, load_builtin_controllers


def test_every_concurrency_flag_names_a_registered_controller() -> None:
    load_builtin_controllers()
    assert set(controller_manager_cmd.CONCURRENCY_FLAGS.values()) <= set(REGISTRY)


def test_flags_given_become_worker_counts_and_the_rest_keep_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    class Manager:
        def __init__(self, config: object, *, options: object) -> None:
            seen["workers"] = options.workers  # type: ignore[attr-defined]
            raise ValueError("stop here")

    monkeypatch.setattr("kubecore.controllers.manager.ControllerManager", Manager)
    monkeypatch.setattr("kubecore.client.config.load_kubeconfig", lambda path: type("C", (), {})())
    args = build_parser().parse_args(["controller-manager", "--concurrent-deployment-syncs", "50",
                                      "--concurrent-service-endpoint-syncs", "7", "--concurrent-gc-syncs", "3"])
    assert args.run(args) == 2  # the ValueError above, reported as a usage error
    assert seen["workers"] == {"deployment": 50, "endpointslice": 7, "garbagecollector": 3}


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_a_worker_count_must_be_positive(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["controller-manager", "--concurrent-job-syncs", value])
    assert e.value.code == 2
    assert "must be a positive number of workers" in capsys.readouterr().err
