"""The CRI configs the kubelet builds from a pod: PodSandboxConfig and ContainerConfig (upstream
kuberuntime_sandbox.go generatePodSandboxConfig and kuberuntime_container.go
generateContainerConfig), reduced to what this kubelet reads back or a runtime needs to run it.

Sandbox: metadata (name, namespace, uid, attempt), hostname (spec.hostname, else the pod name,
cut to 63 characters), log directory /var/log/pods/<ns>_<name>_<uid>, labels = the pod's labels
plus io.kubernetes.pod.{name,namespace,uid}, annotations = the pod's plus kubecore.io/pod-restart-policy
(upstream's kubelet does not pass the restart policy; a simulated runtime needs it), port mappings of container
ports with a hostPort, DNS servers/searches/options from spec.dnsConfig, and Linux namespaces
(NODE network/PID/IPC for hostNetwork/hostPID/hostIPC).

Container: metadata (name, attempt = restart count), image (the resolved ref, with the user's
name), command/args with `$(VAR)` expanded over the environment, workingDir, the environment and
mounts the caller resolved (`envvars.make_env`, `VolumeManager.container_mounts`: they need the
API and the node's disk), labels io.kubernetes.pod.* + io.kubernetes.container.name, annotations
the kubelet reads back (hash, restartCount, termination message path/policy, pod grace period) and
kubecore.io/container-type (init, sidecar or container), log path
<name>/<restartCount>.log, stdin/tty, and Linux resources from requests/limits (cpu shares =
milliCPU * 1024 / 1000 with a minimum of 2, CFS quota = milliCPU * 100000 / 1000 per 100 ms
period, memory limit in bytes).
"""

from __future__ import annotations

from typing import Any

from kubecore.kubelet import cri, downward, envvars, podutil, securitycontext

Obj = dict[str, Any]

LOG_ROOT = "/var/log/pods"
MIN_SHARES = 2
SHARES_PER_CPU = 1024
CFS_PERIOD_US = 100_000


def pod_log_dir(pod: Obj) -> str:
    m = podutil.meta(pod)
    return f"{LOG_ROOT}/{m.get('namespace')}_{m.get('name')}_{m.get('uid')}"


def pod_labels(pod: Obj) -> dict[str, str]:
    m = podutil.meta(pod)
    return {cri.POD_NAME_LABEL: str(m.get("name") or ""), cri.POD_NAMESPACE_LABEL: str(m.get("namespace") or ""),
            cri.POD_UID_LABEL: str(m.get("uid") or "")}


def sandbox_config(pod: Obj, attempt: int) -> cri.PodSandboxConfig:
    m, spec = podutil.meta(pod), podutil.spec(pod)
    hostname = str(spec.get("hostname") or m.get("name") or "")[:63].rstrip("-.")
    labels = {**(m.get("labels") or {}), **pod_labels(pod)}
    ports: list[cri.PortMapping] = []
    for c in podutil.containers(pod):
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                proto = cri.Protocol_[str(p.get("protocol") or "TCP")] if p.get("protocol") in ("TCP", "UDP", "SCTP") \
                    else cri.Protocol_.TCP
                ports.append(cri.PortMapping(protocol=proto, container_port=int(p.get("containerPort") or 0),
                                             host_port=int(p["hostPort"]), host_ip=str(p.get("hostIP") or "")))
    dns = spec.get("dnsConfig") or {}
    dns_config = cri.DNSConfig(servers=list(dns.get("nameservers") or []), searches=list(dns.get("searches") or []),
                               options=[_dns_option(o) for o in dns.get("options") or []]) if dns else None
    ns = cri.NamespaceOption(
        network=cri.NamespaceMode.NODE if spec.get("hostNetwork") else cri.NamespaceMode.POD,
        pid=cri.NamespaceMode.NODE if spec.get("hostPID") else cri.NamespaceMode.CONTAINER,
        ipc=cri.NamespaceMode.NODE if spec.get("hostIPC") else cri.NamespaceMode.POD)
    privileged = any(((c.get("securityContext") or {}).get("privileged")) for c in
                     [*podutil.containers(pod), *podutil.init_containers(pod)])
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=str(m.get("name") or ""), uid=str(m.get("uid") or ""),
                                        namespace=str(m.get("namespace") or ""), attempt=attempt),
        hostname=hostname, log_directory=pod_log_dir(pod), dns_config=dns_config, port_mappings=ports,
        labels=labels, annotations={**(m.get("annotations") or {}),
                                    cri.POD_RESTART_POLICY_ANNOTATION: podutil.restart_policy(pod)},
        linux=cri.LinuxPodSandboxConfig(security_context=cri.LinuxSandboxSecurityContext(
            namespace_options=ns, privileged=bool(privileged))))


def _dns_option(option: Obj) -> str:
    name = str(option.get("name") or "")
    value = option.get("value")
    return f"{name}:{value}" if value is not None else name


GUARANTEED_OOM_SCORE_ADJ, BESTEFFORT_OOM_SCORE_ADJ = -997, 1000


def oom_score_adj(pod: Obj, container: Obj, memory_capacity: int) -> int:
    """Upstream's qos.GetContainerOOMScoreAdjust: node-critical and Guaranteed pods -997,
    BestEffort 1000, Burstable 1000 - 1000 * memory request / node memory, kept within 3..999 so
    it stays between the two. 0 when the node's memory is unknown (the runtime's default)."""
    if podutil.spec(pod).get("priorityClassName") == "system-node-critical":
        return GUARANTEED_OOM_SCORE_ADJ
    qos = podutil.qos_class(pod)
    if qos == "Guaranteed":
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == "BestEffort":
        return BESTEFFORT_OOM_SCORE_ADJ
    if memory_capacity <= 0:
        return 0
    request = downward.amount((container.get("resources") or {}).get("requests") or {}, "memory")
    adj = 1000 - (1000 * (request.value() if request is not None else 0)) // memory_capacity
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    return adj - 1 if adj == BESTEFFORT_OOM_SCORE_ADJ else adj


def linux_resources(container: Obj, *, oom_score: int = 0) -> cri.LinuxContainerResources:
    res = container.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    req_cpu = downward.amount(requests, "cpu") or downward.amount(limits, "cpu")
    milli = req_cpu.milli_value() if req_cpu is not None else 0
    shares = max(MIN_SHARES, milli * SHARES_PER_CPU // 1000) if milli else MIN_SHARES
    lim_cpu = downward.amount(limits, "cpu")
    quota = lim_cpu.milli_value() * CFS_PERIOD_US // 1000 if lim_cpu is not None else 0
    memory = downward.amount(limits, "memory")
    return cri.LinuxContainerResources(cpu_period=CFS_PERIOD_US if quota else 0, cpu_quota=quota, cpu_shares=shares,
                                       memory_limit_in_bytes=memory.value() if memory is not None else 0,
                                       oom_score_adj=oom_score)


def container_type(pod: Obj, container: Obj) -> str:
    name = container.get("name")
    if any(c.get("name") == name for c in podutil.init_containers(pod)):
        return cri.CONTAINER_TYPE_SIDECAR if podutil.is_restartable_init_container(container) else cri.CONTAINER_TYPE_INIT
    return cri.CONTAINER_TYPE_CONTAINER


def container_config(pod: Obj, container: Obj, *, restart_count: int, image_ref: str,
                     env: dict[str, str] | None = None, mounts: list[cri.Mount] | None = None,
                     memory_capacity: int = 0) -> cri.ContainerConfig:
    env = env or {}
    command, args = envvars.expand_command(container, env)
    name = str(container.get("name") or "")
    labels = {**pod_labels(pod), cri.CONTAINER_NAME_LABEL: name}
    annotations = {
        cri.CONTAINER_HASH_ANNOTATION: podutil.container_hash(container),
        cri.CONTAINER_RESTART_COUNT_ANNOTATION: str(restart_count),
        cri.CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: str(container.get("terminationMessagePath")
                                                                or "/dev/termination-log"),
        cri.CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: str(container.get("terminationMessagePolicy") or "File"),
        cri.POD_TERMINATION_GRACE_PERIOD_ANNOTATION: str(podutil.spec(pod).get("terminationGracePeriodSeconds")
                                                         or podutil.DEFAULT_TERMINATION_GRACE),
        cri.CONTAINER_TYPE_ANNOTATION: container_type(pod, container),
    }
    return cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name=name, attempt=restart_count),
        image=cri.ImageSpec(image=image_ref, user_specified_image=str(container.get("image") or "")),
        command=command, args=args, working_dir=str(container.get("workingDir") or ""),
        envs=[cri.KeyValue(key=k, value=v) for k, v in env.items()], mounts=list(mounts or []),
        labels=labels, annotations=annotations, log_path=f"{name}/{restart_count}.log",
        stdin=bool(container.get("stdin")), stdin_once=bool(container.get("stdinOnce")), tty=bool(container.get("tty")),
        linux=cri.LinuxContainerConfig(resources=linux_resources(
                                           container, oom_score=oom_score_adj(pod, container, memory_capacity)),
                                       security_context=securitycontext.linux_security_context(pod, container)))
