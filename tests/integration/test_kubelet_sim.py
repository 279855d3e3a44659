"""The kubelet with the simulated runtime against a real API server (the `server_url` fixture):
registration, Lease and Ready; pods bound through pods/binding (no scheduler here) reach
Running/Succeeded/Failed with upstream's status; deletion; readiness; re-adoption after a
restart; 100 hollow nodes in one process; the CLI.

Every wait polls with a deadline (inprocess.eventually); nothing asserts on elapsed time."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubecore.client.clock import REAL_CLOCK
from kubecore.client.errors import NotFound
from kubecore.client.rest import RestClient
from kubecore.kubelet.config import KubeletConfig
from kubecore.kubelet.hollow import HollowOptions, add_hollow_nodes, sim_kubelet
from kubecore.kubelet.host import KubeletHost
from kubecore.kubelet.kubelet import Kubelet
from kubecore.kubelet.sim.runtime import SimRuntime
from kubecore.kubelet.timers import Timers
from tests.integration.cluster import env, stop
from tests.integration.inprocess import eventually, new_client, write_kubeconfig

Obj = dict[str, Any]


@dataclass
class Node:
    rest: RestClient
    host: KubeletHost
    kubelet: Kubelet
    ns: str

    @property
    def name(self) -> str:
        return self.kubelet.name


def fast_config(name: str, **extra: Any) -> KubeletConfig:
    """Upstream's periods scaled down so a test sees several of them in a few seconds."""
    return KubeletConfig(node_name=name, node_lease_duration=4, node_status_update_frequency=1.0,
                         node_status_report_frequency=2.0, **extra)


@asynccontextmanager
async def sim_node(server_url: str, *, runtime: SimRuntime | None = None, name: str | None = None,
                   rest: RestClient | None = None) -> AsyncIterator[Node]:
    """A simulated kubelet for one node (a fresh namespace for the test's pods)."""
    own_rest = rest is None
    rest = rest or new_client(server_url)
    name = name or f"sim-{uuid.uuid4().hex[:6]}"
    ns = f"kl-{uuid.uuid4().hex[:8]}"
    await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
    host = KubeletHost(rest)
    kubelet = sim_kubelet(host, fast_config(name), node_ip="10.9.8.7", runtime=runtime)
    await host.start()
    try:
        yield Node(rest=rest, host=host, kubelet=kubelet, ns=ns)
    finally:
        await host.stop()
        if own_rest:
            await rest.close()


async def run_pod(node: Node, name: str, *, restart_policy: str = "Always", annotations: dict[str, str] | None = None,
                  container: Obj | None = None) -> None:
    """Create a pod and bind it to the node, as a scheduler would."""
    c = container or {"name": "app", "image": "registry.example/app:1"}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": node.ns, "annotations": annotations or {}},
           "spec": {"restartPolicy": restart_policy, "containers": [c]}}
    await node.rest.send_json("POST", f"/api/v1/namespaces/{node.ns}/pods", pod)
    await node.rest.send_json("POST", f"/api/v1/namespaces/{node.ns}/pods/{name}/binding",
                              {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                               "target": {"kind": "Node", "name": node.name}})


async def get_pod(node: Node, name: str) -> Obj:
    out: Obj = await node.rest.get_json(f"/api/v1/namespaces/{node.ns}/pods/{name}")
    return out


def condition(obj: Obj, ctype: str) -> Obj:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), {})


async def pod_when(node: Node, name: str, phase: str) -> Obj:
    async def check() -> Obj | None:
        pod = await get_pod(node, name)
        return pod if (pod.get("status") or {}).get("phase") == phase else None
    return await eventually(check, f"pod {name} {phase}")


async def test_registers_its_node_and_lease_and_stays_ready(server_url: str) -> None:
    async with sim_node(server_url) as node:
        n: Obj = await node.rest.get_json(f"/api/v1/nodes/{node.name}")
        ready = condition(n, "Ready")
        assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
        assert n["metadata"]["labels"]["kubernetes.io/hostname"] == node.name
        assert n["status"]["capacity"]["pods"] == "110"
        assert n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10250
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node.name}"
        lease: Obj = await node.rest.get_json(path)
        assert lease["spec"]["holderIdentity"] == node.name and lease["spec"]["leaseDurationSeconds"] == 4
        assert lease["metadata"]["ownerReferences"][0]["uid"] == n["metadata"]["uid"]
        first_renew, first_beat = lease["spec"]["renewTime"], ready["lastHeartbeatTime"]

        async def renewed_and_reported() -> bool:
            later: Obj = await node.rest.get_json(path)
            now: Obj = await node.rest.get_json(f"/api/v1/nodes/{node.name}")
            r = condition(now, "Ready")
            return (later["spec"]["renewTime"] != first_renew and r["lastHeartbeatTime"] != first_beat
                    and r["status"] == "True" and r["lastTransitionTime"] == ready["lastTransitionTime"])

        await eventually(renewed_and_reported, "lease renewal and a status report while staying Ready")


async def test_a_bound_pod_runs_with_an_ip_and_is_ready(server_url: str) -> None:
    async with sim_node(server_url) as node:
        await run_pod(node, "web")
        pod = await pod_when(node, "web", "Running")

        async def ready() -> Obj | None:
            p = await get_pod(node, "web")
            return p if condition(p, "Ready").get("status") == "True" else None

        pod = await eventually(ready, "Ready")
        status = pod["status"]
        cidr = ipaddress.ip_network(node.kubelet.runtime.ipam.cidr)  # type: ignore[attr-defined]
        assert ipaddress.ip_address(status["podIP"]) in cidr and status["podIPs"] == [{"ip": status["podIP"]}]
        assert status["hostIP"] == "10.9.8.7" and status["qosClass"] == "BestEffort" and status["startTime"]
        cs = status["containerStatuses"][0]
        assert "running" in cs["state"] and cs["ready"] and cs["started"] and cs["restartCount"] == 0
        assert cs["containerID"].startswith("sim://") and cs["image"] == "registry.example/app:1"
        types = {c["type"]: c["status"] for c in status["conditions"]}
        assert types == {"PodScheduled": "True", "PodReadyToStartContainers": "True", "Initialized": "True",
                         "Ready": "True", "ContainersReady": "True"}


async def test_job_pods_succeed_or_fail_with_their_exit_code(server_url: str) -> None:
    async with sim_node(server_url) as node:
        await run_pod(node, "ok", restart_policy="Never", annotations={"sim.kubecore.io/duration": "200ms"})
        await run_pod(node, "bad", restart_policy="Never",
                      annotations={"sim.kubecore.io/duration": "200ms", "sim.kubecore.io/exit-code": "3"})
        ok = await pod_when(node, "ok", "Succeeded")
        term = ok["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (0, "Completed")
        assert condition(ok, "Ready")["reason"] == "PodCompleted"
        bad = await pod_when(node, "bad", "Failed")
        term = bad["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (3, "Error")
        assert condition(bad, "ContainersReady")["reason"] == "PodFailed"


async def test_a_deleted_pod_is_gone_within_its_grace_period(server_url: str) -> None:
    async with sim_node(server_url) as node:
        await run_pod(node, "web", annotations={"sim.kubecore.io/stop-duration": "1s"})
        await pod_when(node, "web", "Running")
        await node.rest.request("DELETE", f"/api/v1/namespaces/{node.ns}/pods/web")

        async def gone() -> bool:
            try:
                await get_pod(node, "web")
            except NotFound:
                return True
            return False

        await eventually(gone, "the pod deleted", timeout=30)  # its grace period (the default 30 s)
        counts = node.kubelet.runtime.counts()  # type: ignore[attr-defined]
        assert counts["running"] == 0 and counts["ips"] == 0


async def test_readiness_failure_annotation_keeps_the_pod_unready(server_url: str) -> None:
    async with sim_node(server_url) as node:
        probe = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1, "failureThreshold": 1}
        await run_pod(node, "unready", annotations={"sim.kubecore.io/readiness": "fail"},
                      container={"name": "app", "image": "app:1", "readinessProbe": probe})
        await pod_when(node, "unready", "Running")
        probes = node.kubelet.probes

        async def probed_three_times() -> bool:
            return sum(w.probes for w in probes._workers.values()) >= 3

        await eventually(probed_three_times, "three readiness probes")
        pod = await get_pod(node, "unready")
        assert condition(pod, "Ready")["status"] == "False"
        assert condition(pod, "Ready")["message"] == "containers with unready status: [app]"
        assert pod["status"]["containerStatuses"][0]["ready"] is False


async def test_a_restarted_kubelet_adopts_its_running_containers(server_url: str) -> None:
    rest = new_client(server_url)
    name = f"sim-{uuid.uuid4().hex[:6]}"
    timers = Timers(REAL_CLOCK)  # the runtime's own time: it outlives the kubelets
    timers.start()
    runtime = SimRuntime(clock=REAL_CLOCK, timers=timers, pod_cidr="10.200.0.0/24")
    async with sim_node(server_url, name=name, rest=rest, runtime=runtime) as first:
        await run_pod(first, "web")
        await pod_when(first, "web", "Running")
        before = (await get_pod(first, "web"))["status"]
        ns = first.ns
    async with sim_node(server_url, name=name, rest=rest, runtime=runtime) as second:
        second.ns = ns
        await asyncio.sleep(1.0)  # let it sync the pod again (it would restart containers if it did not adopt)
        after = (await get_pod(second, "web"))["status"]
        assert after["phase"] == "Running" and condition(await get_pod(second, "web"), "Ready")["status"] == "True"
        b, a = before["containerStatuses"][0], after["containerStatuses"][0]
        assert (a["containerID"], a["restartCount"]) == (b["containerID"], 0)
        assert after["podIP"] == before["podIP"] and after["startTime"] == before["startTime"]
        assert runtime.counts() == {"sandboxes": 1, "containers": 1, "running": 1, "images": 1, "ips": 1}
    await timers.stop()
    await rest.close()


async def test_a_hundred_hollow_nodes_register_and_stay_ready(server_url: str) -> None:
    rest = new_client(server_url)
    host = KubeletHost(rest, status_workers=8, record_events=False)
    prefix = f"hollow-{uuid.uuid4().hex[:4]}-"
    for kubelet in add_hollow_nodes(host, HollowOptions(count=100, prefix=prefix)):
        kubelet.config.node_lease_duration = 4
    try:
        await host.start(register_concurrency=16)

        async def leases() -> dict[str, str]:
            items: list[Obj] = (await rest.get_json(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"))["items"]
            return {i["metadata"]["name"]: i["spec"]["renewTime"] for i in items
                    if i["metadata"]["name"].startswith(prefix)}

        async def ready_nodes() -> int:
            items: list[Obj] = (await rest.get_json("/api/v1/nodes"))["items"]
            return sum(1 for n in items if n["metadata"]["name"].startswith(prefix)
                       and condition(n, "Ready").get("status") == "True")

        assert await ready_nodes() == 100
        first = await leases()
        assert len(first) == 100

        async def all_renewed() -> bool:
            now = await leases()
            return all(now[k] != first[k] for k in first)

        await eventually(all_renewed, "every hollow node renewing its lease")
        assert await ready_nodes() == 100
        assert host.spawner.failures == 0
    finally:
        await host.stop()
        await rest.close()


async def test_the_cli_runs_a_node_and_stops_on_sigterm(server_url: str, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path, server_url)
    name = f"cli-{uuid.uuid4().hex[:6]}"
    proc = subprocess.Popen([sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(kubeconfig),
                             "--node-name", name, "--runtime", "sim", "--cpu", "2", "--memory", "4Gi",
                             "--ephemeral-storage", "10Gi", "--pods", "20"], env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    rest = new_client(server_url)
    try:
        async def ready() -> Obj | None:
            try:
                n: Obj = await rest.get_json(f"/api/v1/nodes/{name}")
            except NotFound:
                return None
            return n if condition(n, "Ready").get("status") == "True" else None

        node = await eventually(ready, "the CLI's node Ready")
        assert node["status"]["capacity"] == {"cpu": "2", "ephemeral-storage": "10Gi", "memory": "4Gi", "pods": "20"}
        said = b""  # the CLI says so itself a moment after the Node turns Ready: read up to that line
        assert proc.stderr is not None
        while b"registered and ready" not in said:
            line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 30)
            if not line:
                break
            said += line
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        err = said + err
        assert proc.returncode == 0, err.decode()
        assert b"registered and ready" in err
    finally:
        stop(proc)
        await rest.close()


async def test_the_cli_takes_eviction_thresholds_and_says_when_one_is_crossed(server_url: str, tmp_path: Path) -> None:
    """--eviction-hard replaces upstream's defaults: a memory threshold above the node's 4Gi is
    crossed at once, the Node reports MemoryPressure, and the kubelet says which threshold and
    what to do."""
    kubeconfig = write_kubeconfig(tmp_path, server_url)
    name = f"evict-{uuid.uuid4().hex[:6]}"
    proc = subprocess.Popen([sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(kubeconfig),
                             "--node-name", name, "--runtime", "sim", "--memory", "4Gi", "--root-dir",
                             str(tmp_path / "root"), "--port", "0", "--eviction-hard", "memory.available<8Gi"],
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rest = new_client(server_url)
    try:
        async def pressure() -> Obj | None:
            try:
                n: Obj = await rest.get_json(f"/api/v1/nodes/{name}")
            except NotFound:
                return None
            return n if condition(n, "MemoryPressure").get("status") == "True" else None

        node = await eventually(pressure, "MemoryPressure on the node", timeout=60)
        assert condition(node, "DiskPressure").get("status") == "False"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        said = err.decode()
        assert "memory.available is" in said and "below 8.0Gi" in said, said
        assert "kubelet --eviction-hard" in said, said
    finally:
        stop(proc)
        await rest.close()


def test_the_cli_refuses_a_bad_eviction_threshold(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(tmp_path / "k"),
                          "--eviction-hard", "memory.available>1Gi"], env=env(), capture_output=True, timeout=60)
    assert out.returncode == 2
    assert b"malformed eviction threshold 'memory.available>1Gi': expected signal<quantity" in out.stderr
    low = subprocess.run([sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(tmp_path / "k"),
                          "--image-gc-high-threshold", "50", "--image-gc-low-threshold", "60"], env=env(),
                         capture_output=True, timeout=60)
    assert low.returncode == 2 and b"low (60) <= high (50)" in low.stderr


def test_the_cli_says_when_the_api_server_is_unreachable(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path, "http://127.0.0.1:9")
    out = subprocess.run([sys.executable, "-m", "kubecore.cli.main", "hollow-nodes", "--kubeconfig", str(kubeconfig),
                          "--count", "2"], env={**env(), "KUBECONFIG": ""}, capture_output=True, timeout=120)
    assert out.returncode == 1
    assert b"kubecore: error: cannot reach the API server at http://127.0.0.1:9" in out.stderr
    bad = subprocess.run([sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig",
                          str(tmp_path / "missing"), "--memory", "lots"], env=env(), capture_output=True, timeout=60)
    assert bad.returncode == 2 and b"kubecore: error: memory: 'lots' is not a quantity" in bad.stderr
