"""The node agent: a kubelet above the CRI runtime interface, and a simulated runtime for hollow nodes.

Layers, bottom up (each module is one idea; its docstring says what upstream code it follows):

    cri.py              the runtime interface: CRI's services and messages (asyncio + msgspec)
    sim/                a runtime without processes (hollow nodes): runtime + IPAM, annotations + probe answers,
                        log files for pods that ask
    containerd/         a real runtime: containerd's CRI v1 over gRPC, its daemon and CNI config, local images
    runtime_status.py   the runtime's view of a pod, and the PLEG's cache of it
    actions.py          computePodActions: what a sync must do (pure)
    runtime_config.py   PodSandboxConfig / ContainerConfig from a pod
    expansion.py        $(VAR) expansion in env values, command, args, subPathExpr
    downward.py         the downward API: pod fields and container resources as strings
    objects.py          ConfigMaps and Secrets read through the API (short TTL cache)
    envvars.py          a container's environment: envFrom, valueFrom, expansion
    atomic_writer.py    volume files swapped in atomically (the ..data symlink)
    volume_payloads.py  the files of configMap/secret/downwardAPI/projected volumes
    volumes.py          pod volume directories under the root dir, CRI mounts, clean-up
    handlers.py         running exec/httpGet/tcpSocket probes and lifecycle hooks for real
    runtime_manager.py  SyncPod / KillPod / killContainer over CRI, image pulls, crash-loop back-off
    backoff.py          per-key exponential back-off, the reason cache
    status_gen.py       the pod status: phase, conditions, container statuses (pure)
    status_manager.py   writing statuses (strategic merge patch), the final delete
    pod_workers.py      one serial worker per pod: syncing, terminating, terminated
    pleg.py             relisting and runtime events -> pod changes
    probes.py           liveness/readiness/startup workers on timers
    crilog.py           CRI log files read back for `kubectl logs` (partial lines, tail, since, follow)
    server.py           the kubelet's HTTP server: /containerLogs, /exec, /attach, /portForward, /pods
    node_status.py      the Node object and its status setters (pure)
    node_agent.py       registration (create or adopt), status updates, the node Lease
    stats.py            /stats/summary from CRI stats and the node's /proc + statvfs (or simulated figures)
    gc.py               dead-container, sandbox and unused-image garbage collection
    eviction.py         node-pressure eviction, pure: thresholds, signals, ranking, messages, admission
    eviction_manager.py the eviction loop: node conditions, reclaim, one eviction per pass
    node_resources.py   stats + GC + eviction wired to one kubelet (off on hollow nodes)
    timers.py           one timer heap for all periodic work, tracked background jobs
    config.py           KubeletConfig and the machine's facts
    kubelet.py          one node's kubelet, wiring the above
    host.py             what kubelets in one process share: client, watches, timers, writer
    hollow.py           building N hollow (simulated) nodes in one host
    containerd_node.py  a kubelet for this machine over a private containerd (containerd/)

Run one with `kubecore kubelet --runtime sim|containerd`, many simulated ones with
`kubecore hollow-nodes --count N`.
"""
