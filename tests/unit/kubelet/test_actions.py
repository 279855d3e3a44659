"""computePodActions: what a sync must do, for the cases upstream's kuberuntime_manager_test covers."""

from __future__ import annotations

from kubecore.kubelet import podutil
from kubecore.kubelet.actions import (
    FAILURE, compute_pod_actions, pod_sandbox_changed, should_container_be_restarted,
)
from kubecore.kubelet.cri import ContainerState
from tests.unit.kubelet.kubelet_fixtures import (
    container, exited, make_pod, running, runtime_status, sandbox, view,
)


class Probes:
    def __init__(self, liveness: dict[str, str] | None = None, startup: dict[str, str] | None = None) -> None:
        self._l, self._s = liveness or {}, startup or {}

    def liveness(self, cid: str) -> str | None:
        return self._l.get(cid)

    def startup(self, cid: str) -> str | None:
        return self._s.get(cid)


def test_a_new_pod_gets_a_sandbox_and_all_its_containers() -> None:
    pod = make_pod(containers=[container("a"), container("b")])
    actions = compute_pod_actions(pod, runtime_status(sandboxes=[]))
    assert actions.create_sandbox and actions.kill_pod and actions.attempt == 0
    assert actions.containers_to_start == [0, 1] and actions.init_containers_to_start == []


def test_a_new_pod_with_init_containers_starts_only_the_first() -> None:
    pod = make_pod(init=[container("i1"), container("i2")])
    actions = compute_pod_actions(pod, runtime_status(sandboxes=[]))
    assert actions.init_containers_to_start == [0] and actions.containers_to_start == []


def test_a_running_pod_needs_nothing() -> None:
    pod = make_pod()
    assert compute_pod_actions(pod, runtime_status(running("app"))).is_noop()


def test_sandbox_not_ready_is_replaced_with_the_next_attempt() -> None:
    rs = runtime_status(exited("app", 137), sandboxes=[sandbox(ready=False, attempt=2)])
    assert pod_sandbox_changed(make_pod(), rs) == (True, 3, "s1")
    actions = compute_pod_actions(make_pod(), rs)
    assert actions.create_sandbox and actions.attempt == 3 and actions.containers_to_start == [0]


def test_a_finished_never_pod_gets_no_new_sandbox() -> None:
    rs = runtime_status(exited("app", 0), sandboxes=[sandbox(ready=False)])
    actions = compute_pod_actions(make_pod(restart_policy="Never"), rs)
    assert actions.kill_pod and not actions.create_sandbox and not actions.containers_to_start


def test_a_sandbox_without_ip_is_replaced() -> None:
    rs = runtime_status(running("app"), sandboxes=[sandbox(ip="")])
    assert pod_sandbox_changed(make_pod(), rs)[0]


def test_restart_policies_for_exited_containers() -> None:
    for policy, code, restart in [("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False),
                                  ("OnFailure", 2, True), ("Never", 0, False), ("Never", 1, False)]:
        pod = make_pod(restart_policy=policy)
        rs = runtime_status(exited("app", code))
        assert should_container_be_restarted(podutil.containers(pod)[0], pod, rs) is restart, (policy, code)
        actions = compute_pod_actions(pod, rs)
        assert (actions.containers_to_start == [0]) is restart
        assert actions.kill_pod is (not restart), "nothing running and nothing to start kills the pod"


def test_a_deleted_pod_never_restarts() -> None:
    pod = make_pod(deleting=True)
    assert not should_container_be_restarted(podutil.containers(pod)[0], pod, runtime_status(exited("app", 1)))


def test_liveness_failure_kills_and_restarts() -> None:
    rs = runtime_status(running("app", cid="c-live"))
    actions = compute_pod_actions(make_pod(), rs, Probes(liveness={"c-live": FAILURE}))
    assert actions.containers_to_start == [0]
    info = actions.containers_to_kill["c-live"]
    assert info.message == "Container app failed liveness probe, will be restarted" and info.reason == "LivenessProbe"


def test_liveness_failure_under_never_kills_without_restart() -> None:
    rs = runtime_status(running("app", cid="c-live"))
    actions = compute_pod_actions(make_pod(restart_policy="Never"), rs, Probes(liveness={"c-live": FAILURE}))
    assert actions.containers_to_start == [] and "c-live" in actions.containers_to_kill
    assert actions.kill_pod


def test_a_changed_definition_restarts_even_under_never() -> None:
    rs = runtime_status(running("app", cid="c1", hash_="deadbeef"))
    actions = compute_pod_actions(make_pod(restart_policy="Never"), rs)
    assert actions.containers_to_start == [0]
    assert actions.containers_to_kill["c1"].message == "Container app definition changed, will be restarted"


def test_init_containers_run_in_order() -> None:
    pod = make_pod(init=[container("i1"), container("i2")])
    assert compute_pod_actions(pod, runtime_status(running("i1"))).is_noop()  # wait for i1
    actions = compute_pod_actions(pod, runtime_status(exited("i1", 0)))
    assert actions.init_containers_to_start == [1] and actions.containers_to_start == []
    actions = compute_pod_actions(pod, runtime_status(exited("i2", 0, created=2), exited("i1", 0, created=1)))
    assert actions.init_containers_to_start == [] and actions.containers_to_start == [0]


def test_a_failed_init_container_restarts_or_fails_the_pod() -> None:
    pod = make_pod(init=[container("i1")])
    actions = compute_pod_actions(pod, runtime_status(exited("i1", 1)))
    assert actions.init_containers_to_start == [0] and not actions.kill_pod
    never = make_pod(init=[container("i1")], restart_policy="Never")
    actions = compute_pod_actions(never, runtime_status(exited("i1", 1)))
    assert actions.kill_pod and actions.init_containers_to_start == []


def test_removed_init_containers_of_an_initialized_pod_are_not_rerun() -> None:
    pod = make_pod(init=[container("i1")])
    assert compute_pod_actions(pod, runtime_status(running("app"))).is_noop()


def test_a_sidecar_counts_as_initialized_once_running_and_restarts_when_it_dies() -> None:
    sidecar = container("proxy", restartPolicy="Always")
    pod = make_pod(init=[sidecar])
    actions = compute_pod_actions(pod, runtime_status(running("proxy")))
    assert actions.containers_to_start == [0]
    actions = compute_pod_actions(pod, runtime_status(exited("proxy", 1, created=1), running("app", created=2)))
    assert actions.init_containers_to_start == [0] and not actions.containers_to_start


def test_a_sidecar_with_a_startup_probe_waits_for_it() -> None:
    sidecar = container("proxy", restartPolicy="Always", startupProbe={"exec": {"command": ["true"]}})
    pod = make_pod(init=[sidecar])
    rs = runtime_status(running("proxy", cid="p1"))
    assert compute_pod_actions(pod, rs, Probes()).is_noop()
    assert compute_pod_actions(pod, rs, Probes(startup={"p1": "Success"})).containers_to_start == [0]


def test_unknown_containers_are_killed_before_restart() -> None:
    rs = runtime_status(view("app", ContainerState.CONTAINER_UNKNOWN, cid="u1"))
    actions = compute_pod_actions(make_pod(), rs)
    assert actions.containers_to_start == [0] and "u1" in actions.containers_to_kill
