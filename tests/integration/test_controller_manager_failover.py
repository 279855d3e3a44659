"""Leader failover of the ReplicaSet controller between two `kubecore controller-manager`
processes, the leader killed with SIGKILL (no lease release: the standby must wait for the lease
to expire) and take over: the Lease changes holder and its spec.leaseTransitions grows.
test_controllers_gc.py covers the garbage collector across the same kind of failover;
this one covers a workload controller: the new leader keeps reconciling (a scale-up is honoured)
and nothing is created twice, as a pod watch observes from before the first pod to the end
(never more live pods than replicas, and exactly `replicas` pods ever created).

Which process leads: the Lease kube-system/kube-controller-manager's holderIdentity, matched
against the identity each process logs at start (upstream has no flag to choose it either:
`<hostname>_<uuid>`). Short lease settings (SHORT_LEASE); waits poll with generous bounds.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.integration.cluster import SHORT_LEASE, Cluster, start_cluster, stop_cluster, wait_for

IDENTITY = re.compile(r"controller manager (\S+): controllers")
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"


class PodWatch:
    """Follows one namespace's pods through a watch in a thread: live pods (not terminating) and
    every pod name ever added, the largest live count seen, per phase of the test."""

    def __init__(self, url: str, ns: str, resource_version: str) -> None:
        self.live: set[str] = set()
        self.ever: set[str] = set()
        self.max_live: dict[str, int] = {}
        self.phase = "initial"
        self.error: BaseException | None = None
        self._resp = urllib.request.urlopen(
            f"{url}/api/v1/namespaces/{ns}/pods?watch=1&resourceVersion={resource_version}", timeout=300)
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            for line in self._resp:
                event = json.loads(line)
                pod = event["object"]
                name = pod["metadata"]["name"]
                if event["type"] == "ADDED":
                    self.ever.add(name)
                if event["type"] == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                    self.live.discard(name)
                elif event["type"] in ("ADDED", "MODIFIED"):
                    self.live.add(name)
                self.max_live[self.phase] = max(self.max_live.get(self.phase, 0), len(self.live))
        except (OSError, ValueError) as e:  # closed at the end of the test, or a broken stream
            self.error = e

    def close(self) -> None:
        """Stop reading: the stream ends when the API server stops (closing the response here,
        while the thread is blocked reading it, would deadlock)."""
        self._thread.join(timeout=0)


def identity_of(c: Cluster, name: str) -> str:
    def find() -> str | None:
        m = IDENTITY.search((c.base / f"{name}.log").read_text(errors="replace"))
        return m.group(1) if m else None

    found: str = wait_for(f"{name} to log its identity", find, logs=c.logs)
    return found


def lease_spec(c: Cluster) -> dict[str, Any]:
    spec: dict[str, Any] = (c.get(LEASE) or {}).get("spec") or {}
    return spec


def test_replicaset_controller_survives_kill9_of_the_leader(tmp_path: Path) -> None:
    c = start_cluster(tmp_path)
    watch: PodWatch | None = None
    try:
        ns = f"failover-{uuid.uuid4().hex[:6]}"
        c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        status, pods = c.http("GET", f"/api/v1/namespaces/{ns}/pods")
        assert status == 200
        watch = PodWatch(c.url, ns, pods["metadata"]["resourceVersion"])
        for name in ("cm-a", "cm-b"):
            c.start_controller_manager(name, *SHORT_LEASE, "--controllers", "replicaset")
        ids = {name: identity_of(c, name) for name in ("cm-a", "cm-b")}
        first = wait_for("one controller manager to lead", lambda: lease_spec(c).get("holderIdentity")
                         if lease_spec(c).get("holderIdentity") in ids.values() else None, logs=c.logs)
        leader = next(n for n, i in ids.items() if i == first)
        standby = next(n for n in ids if n != leader)
        transitions = int(lease_spec(c).get("leaseTransitions") or 0)

        rs_path = f"/apis/apps/v1/namespaces/{ns}/replicasets"
        c.create(rs_path, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"}, "spec": {
            "replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
        wait_for("3 pods from the first leader", lambda: len(watch.live) == 3, logs=c.logs)

        c.procs[leader].send_signal(signal.SIGKILL)
        assert c.procs[leader].wait(timeout=10) == -signal.SIGKILL
        wait_for("the standby to take the lease", lambda: lease_spec(c).get("holderIdentity") == ids[standby],
                 logs=c.logs)
        assert int(lease_spec(c).get("leaseTransitions") or 0) > transitions

        watch.phase = "scaled"
        status, body = c.http("PATCH", f"{rs_path}/web", {"spec": {"replicas": 5}},
                              content_type="application/merge-patch+json")
        assert status == 200, body
        wait_for("5 pods from the new leader", lambda: len(watch.live) == 5, logs=c.logs)

        def status_caught_up() -> bool:
            rs = c.get(f"{rs_path}/web") or {}
            return (rs.get("status") or {}).get("replicas") == 5

        wait_for("the new leader to report 5 replicas", status_caught_up, logs=c.logs)
        assert c.procs[standby].poll() is None  # the new leader is alive
        assert watch.error is None, watch.error
        assert watch.max_live.get("initial", 0) <= 3, watch.max_live
        assert watch.max_live["scaled"] <= 5, watch.max_live
        assert len(watch.ever) == 5, sorted(watch.ever)  # nothing created twice, nothing replaced
        status, pods = c.http("GET", f"/api/v1/namespaces/{ns}/pods")
        assert sorted(p["metadata"]["name"] for p in pods["items"]) == sorted(watch.ever)
    finally:
        stop_cluster(c)
        if watch is not None:
            watch.close()
