"""A container's effective security context as CRI's LinuxContainerSecurityContext (upstream
kuberuntime's determineEffectiveSecurityContext + convertToRuntimeSecurityContext).

Effective values: the container's `securityContext` wins over the pod's for runAsUser,
runAsGroup and runAsNonRoot; privileged, readOnlyRootFilesystem, capabilities and
allowPrivilegeEscalation are the container's only.

- namespaces: network and IPC are the pod's (the node's with hostNetwork / hostIPC); PID is the
  container's own, the pod's with `shareProcessNamespace`, the node's with hostPID;
- capabilities: `add` / `drop` names as written (containerd adds the `CAP_` prefix);
- `allowPrivilegeEscalation: false` sets no_new_privs;
- supplemental groups are not passed yet (the pod's fsGroup / supplementalGroups).

`runAsNonRoot: true` with an effective runAsUser of 0, or with none (the images kubecore builds
run as root), refuses the container with upstream's message (CreateContainerConfigError).
"""

from __future__ import annotations

from typing import Any

from kubecore.kubelet import cri, podutil

__all__ = ["SecurityContextError", "linux_security_context"]

Obj = dict[str, Any]


class SecurityContextError(Exception):
    """The container cannot run as its security context asks (CreateContainerConfigError)."""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def namespace_options(spec: Obj) -> cri.NamespaceOption:
    if spec.get("hostPID"):
        pid = cri.NamespaceMode.NODE
    elif spec.get("shareProcessNamespace"):
        pid = cri.NamespaceMode.POD
    else:
        pid = cri.NamespaceMode.CONTAINER
    return cri.NamespaceOption(
        network=cri.NamespaceMode.NODE if spec.get("hostNetwork") else cri.NamespaceMode.POD,
        pid=pid, ipc=cri.NamespaceMode.NODE if spec.get("hostIPC") else cri.NamespaceMode.POD)


def linux_security_context(pod: Obj, container: Obj) -> cri.LinuxContainerSecurityContext:
    spec = podutil.spec(pod)
    pod_sc: Obj = spec.get("securityContext") or {}
    sc: Obj = container.get("securityContext") or {}
    run_as_user = _int(sc.get("runAsUser")) if "runAsUser" in sc else _int(pod_sc.get("runAsUser"))
    run_as_group = _int(sc.get("runAsGroup")) if "runAsGroup" in sc else _int(pod_sc.get("runAsGroup"))
    non_root = sc.get("runAsNonRoot") if "runAsNonRoot" in sc else pod_sc.get("runAsNonRoot")
    if non_root is True:
        name = container.get("name")
        if run_as_user == 0:
            raise SecurityContextError(f"container's runAsUser breaks non-root policy "
                                       f"(pod: \"{podutil.meta(pod).get('name')}\", container: {name})")
        if run_as_user is None:
            raise SecurityContextError(f"container has runAsNonRoot and image will run as root "
                                       f"(pod: \"{podutil.meta(pod).get('name')}\", container: {name})")
    caps: Obj = sc.get("capabilities") or {}
    capabilities = None
    if caps.get("add") or caps.get("drop"):
        capabilities = cri.Capability(add_capabilities=[str(c) for c in caps.get("add") or []],
                                      drop_capabilities=[str(c) for c in caps.get("drop") or []])
    return cri.LinuxContainerSecurityContext(
        namespace_options=namespace_options(spec), privileged=bool(sc.get("privileged")),
        run_as_user=run_as_user, run_as_group=run_as_group,
        readonly_rootfs=bool(sc.get("readOnlyRootFilesystem")), capabilities=capabilities,
        no_new_privs=sc.get("allowPrivilegeEscalation") is False)
