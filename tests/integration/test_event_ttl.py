"""kube-apiserver's --event-ttl against a real `kubecore apiserver --event-ttl 2s`: Events of both
API groups vanish after their TTL (watchers see DELETED), other objects stay; a bad value is refused."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.integration.conftest import apiserver
from tests.integration.test_events_k8s_io import CORE, EVENTS, NOW, _http, _ok


def _core_event(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "reason": "Test",
            "message": "m", "type": "Normal"}


def _events_event(name: str) -> dict[str, object]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "eventTime": NOW, "reportingController": "example.com/c", "reportingInstance": "c-1",
            "action": "Testing", "reason": "Test", "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
            "note": "n", "type": "Normal"}


def test_events_expire_after_the_ttl_and_other_objects_stay(tmp_path: Path) -> None:
    with apiserver(tmp_path, "--event-ttl", "2s") as url:
        _ok("POST", url + CORE, _core_event("old"))
        _ok("POST", url + EVENTS, _events_event("new"))
        _ok("POST", url + "/api/v1/namespaces/default/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stays"}})
        rv = _ok("GET", url + CORE)["metadata"]["resourceVersion"]
        assert {e["metadata"]["name"] for e in _ok("GET", url + EVENTS)["items"]} == {"old", "new"}
        deadline = time.monotonic() + 30
        while _ok("GET", url + CORE)["items"]:
            assert time.monotonic() < deadline, "events still there 30 s after a 2 s TTL"
            time.sleep(0.5)
        assert _http("GET", url + EVENTS + "/new")[0] == 404
        assert _http("GET", url + "/api/v1/namespaces/default/configmaps/stays")[0] == 200
        # the expiry is a deletion watchers see (the server ends this watch after 2 s)
        with urllib.request.urlopen(f"{url}{CORE}?watch=1&resourceVersion={rv}&timeoutSeconds=2", timeout=30) as r:
            kinds = [json.loads(line)["type"] for line in r.read().splitlines() if line.strip()]
        assert kinds.count("DELETED") == 2, kinds


def test_a_bad_event_ttl_is_refused(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kubecore.cli.main", "apiserver", "--data-dir", str(tmp_path),
                          "--event-ttl", "soon"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and "--event-ttl" in out.stderr and "invalid duration 'soon'" in out.stderr
