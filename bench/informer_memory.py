"""Memory of the informer cache with many pods, one JSON document on stdout (issue 4: 150,000 pods
cached in one process in under 1 GB).

    python -m bench.informer_memory                      # 150,000 pods straight into the indexer
    python -m bench.informer_memory --pods 20000 --via-server   # through a real `kubecore up`
    python -m bench.informer_memory --dict-sample 5000    # also: what plain dicts would cost

Pods are `bench.apiserver_load.pod()` (the clusterloader2 density pod) plus what a running cluster
adds: uid, resourceVersion, creationTimestamp, two managedFields entries (controller, kubelet
status), nodeName and a Running status with conditions and a container status: ~3.5 KB of JSON.

Direct mode (default, no server) fills the cache the way a LIST does: each pod's JSON bytes are
decoded (msgspec, as the reflector does to compute keys and indexes) and added to a `Replacement`
in pages of 500, then committed into the `Indexer` (namespace index plus a custom by-node index).
`--via-server` instead creates the pods through the API server (concurrent POSTs) and measures a
`SharedIndexInformer` that LISTs/WATCHes them from it, in this process.

Figures: RSS (VmRSS of this process) before and after filling, after a full `gc.collect()`,
and the difference per pod; `entry_bytes_avg` is the mean compact entry size. With
`--dict-sample N`, N pods are also kept as decoded dicts to show the per-pod cost of that design.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.apiserver_load import pod

from kubecore.client.indexer import Indexer

TARGET_BYTES = 1 << 30
PAGE = 500
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def log(msg: str) -> None:
    print(f"[informer_memory] {msg}", file=sys.stderr, flush=True)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def settled_rss() -> int:
    gc.collect()
    return rss_bytes()


def running_pod(i: int) -> dict[str, Any]:
    """pod() as a running cluster holds it (see the module docstring)."""
    name = f"load-small-{i // 100:05d}-6f8b9c7d4-{i:06x}"
    p = pod(name, i)
    m = p["metadata"]
    m.update(uid=f"{i:08x}-1f2e-4d3c-8b4a-{i * 7919 % 16**12:012x}", resourceVersion=str(1000 + i),
             creationTimestamp="2026-01-02T03:04:05Z")
    m["managedFields"] = [
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
         "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:group": {},
                                                                        "f:name": {}, "f:pod-template-hash": {},
                                                                        "f:tier": {}},
                                     "f:ownerReferences": {".": {}, f'k:{{"uid":"{m["ownerReferences"][0]["uid"]}"}}': {}}},
                      "f:spec": {"f:containers": {'k:{"name":"load-small"}': {".": {}, "f:image": {}, "f:name": {},
                                                                               "f:resources": {}}}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-01-02T03:04:09Z",
         "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {},
                                   "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}}},
    ]
    p["spec"]["nodeName"] = f"hollow-node-{i % 5000:04d}"
    ip = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
    p["status"] = {
        "phase": "Running", "hostIP": f"10.64.{i % 5000 // 250}.{i % 250}", "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": "2026-01-02T03:04:06Z", "qosClass": "Guaranteed",
        "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": "2026-01-02T03:04:08Z"}
                       for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [{
            "name": "load-small", "ready": True, "restartCount": 0, "started": True,
            "image": "registry.k8s.io/pause:3.9",
            "imageID": "registry.k8s.io/pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097",
            "containerID": f"containerd://{i * 2654435761 % 16**16:016x}{i:048x}",
            "state": {"running": {"startedAt": "2026-01-02T03:04:07Z"}}, "lastState": {}}],
    }
    return p


def by_node(obj: dict[str, Any]) -> list[str]:
    return [str((obj.get("spec") or {}).get("nodeName") or "")]


def fill_direct(n: int) -> tuple[Indexer, int, float]:
    """The cache as a LIST fills it; returns (indexer, JSON bytes seen, seconds)."""
    ix = Indexer(indexers={"node": by_node})
    began = time.perf_counter()
    repl = ix.replacement()
    json_bytes = 0
    for start in range(0, n, PAGE):
        page = [_encode(running_pod(i)) for i in range(start, min(n, start + PAGE))]
        for raw in page:
            json_bytes += len(raw)
            repl.add(_decode(raw), raw=raw)
    ix.commit_replacement(repl)
    return ix, json_bytes, time.perf_counter() - began


async def fill_via_server(n: int, *, concurrency: int = 64) -> tuple[Indexer, int, float, dict[str, Any]]:
    from bench.apiserver_load import Server
    from kubecore.client.config import ClientConfig
    from kubecore.client.informer import SharedIndexInformer
    from kubecore.client.rest import RestClient

    server = Server()
    try:
        server.wait_ready()
        async with RestClient(ClientConfig(server=server.url, qps=0, max_retries=3)) as rest:
            pods = await rest.resource("v1", "pods")
            log(f"creating {n} pods through {server.url}")
            nxt = iter(range(n))

            async def worker() -> None:
                for i in nxt:
                    p = running_pod(i)
                    del p["metadata"]["uid"], p["metadata"]["resourceVersion"], p["metadata"]["managedFields"]
                    del p["spec"]["nodeName"]
                    await pods.create(p, namespace="default")

            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            create_s = time.perf_counter() - t0
            gc.collect()
            before = settled_rss()
            informer = SharedIndexInformer(pods, indexers={"node": by_node})
            began = time.perf_counter()
            informer.start()
            await informer.wait_for_sync()
            sync_s = time.perf_counter() - began
            extra = {"create_seconds": round(create_s, 1), "sync_seconds": round(sync_s, 2),
                     "rss_before_informer": before, "server_rss_mb": round(server.rss_mb(), 1),
                     "streaming_list": informer.reflector.watch_lists > 0}
            await informer.stop()
            return informer.indexer, 0, sync_s, extra
    finally:
        server.stop()


def dict_sample(n: int) -> dict[str, Any]:
    before = settled_rss()
    kept = [_decode(_encode(running_pod(i))) for i in range(n)]
    after = settled_rss()
    per = (after - before) / n
    del kept
    return {"pods": n, "bytes_per_pod": round(per), "projected_150k_mb": round(per * 150_000 / 2**20)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--via-server", action="store_true", help="create the pods in a real API server and LIST them")
    ap.add_argument("--dict-sample", type=int, default=0, help="also measure N pods kept as plain dicts")
    args = ap.parse_args(argv)
    doc: dict[str, Any] = {"benchmark": "informer_memory", "pods": args.pods,
                           "mode": "server" if args.via_server else "direct"}
    base = settled_rss()
    if args.via_server:
        ix, json_bytes, seconds, extra = asyncio.run(fill_via_server(args.pods))
        base = extra.pop("rss_before_informer")
        doc.update(extra)
    else:
        ix, json_bytes, seconds = fill_direct(args.pods)
    after = settled_rss()
    entries = [ix.entry(k) for k in ix.list_keys()]
    entry_total = sum(len(e) for e in entries if e is not None)
    delta = after - base
    doc.update({
        "cached": len(ix), "fill_seconds": round(seconds, 2),
        "rss_before": base, "rss_after": after, "rss_delta_mb": round(delta / 2**20, 1),
        "bytes_per_pod": round(delta / max(1, len(ix))),
        "entry_bytes_avg": round(entry_total / max(1, len(ix))),
        "json_bytes_avg": round(json_bytes / max(1, len(ix))) if json_bytes else None,
        "rss_after_mb": round(after / 2**20, 1),
        "target_rss_bytes": TARGET_BYTES, "meets_target": after < TARGET_BYTES,
    })
    node_keys = ix.index_keys("node", "hollow-node-0001")
    doc["check"] = {"node_index_hits": len(node_keys), "namespace_index": len(ix.index_keys("namespace", "default")),
                    "decoded_ok": ix.get_by_key(node_keys[0]) is not None if node_keys else False}
    if args.dict_sample:
        doc["plain_dicts"] = dict_sample(args.dict_sample)
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
