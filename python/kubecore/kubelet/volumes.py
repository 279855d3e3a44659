"""A pod's volumes on this node and the CRI mounts of its containers (upstream's volume manager,
its emptyDir/hostPath/configMap/secret/downwardAPI/projected plugins, and kubelet_pods.go
makeMounts), over the kubelet's root directory laid out as upstream's /var/lib/kubelet:

    <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>/
    <root>/pods/<uid>/volumes/kubernetes.io~configmap/<volume>/    (atomic_writer layout)
    <root>/pods/<uid>/volumes/kubernetes.io~secret/<volume>/
    <root>/pods/<uid>/volumes/kubernetes.io~downward-api/<volume>/
    <root>/pods/<uid>/volumes/kubernetes.io~projected/<volume>/

`setup(pod)` (before the pod's sandbox and containers are created, on every sync):
- emptyDir: a directory, mode 0777. `medium: Memory` is a directory too (no tmpfs mount) and
  `sizeLimit` is not enforced.
- hostPath: the path itself, checked by `type` as upstream: DirectoryOrCreate (created 0755),
  Directory, FileOrCreate (created empty 0644), File, Socket, CharDevice, BlockDevice; "" checks
  nothing. "hostPath type check failed: /x is not a directory" etc.
- configMap, secret, downwardAPI, projected: the files of `volume_payloads`, written atomically
  and rewritten when the objects change (every sync reads them again, at most once a second).
- any other type (persistentVolumeClaim, csi, ...) fails: this kubelet cannot provide it.
Each failure is a "FailedMount" Warning event, `MountVolume.SetUp failed for volume "cfg" :
configmap "cfg" not found`, and keeps the pod from starting (it stays ContainerCreating) until a
retry succeeds; retries back off from 0.5 s to 2 min per pod. Once a pod's volumes were all set
up, later failures (a ConfigMap deleted under a running pod) are reported but leave the files
and the pod alone, as upstream.

A kubelet without a root directory (hollow nodes) writes nothing and checks no host path, but
still resolves configMap/secret/downwardAPI payloads, so a pod missing its ConfigMap waits here
as on a real node.

`container_mounts(pod, container, env, pod_ips=...)`: one `cri.Mount` per volumeMount: the
volume's host directory (or, with `subPath` / `subPathExpr` expanded over the container's env, a
path below it, created when missing), read-only when asked or when the volume is a configMap,
secret, downwardAPI or projected one; then, once the pod has IPs, the kubelet-managed
/etc/hosts (`etc_hosts.py`) unless the container mounts its own. A mount naming no volume, an
absolute subPath or one with `..` raise `MountError` (the container fails with
CreateContainerConfigError).

`cleanup(uid)` removes a pod's directory once the runtime has nothing of it; `cleanup_orphans`
removes the directories of pods the kubelet no longer knows (upstream cleanupOrphanedPodDirs).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kubecore.client.clock import Clock
from kubecore.kubelet import atomic_writer, cri, etc_hosts, expansion, podutil
from kubecore.kubelet.backoff import Backoff
from kubecore.kubelet.objects import ObjectSource
from kubecore.kubelet.volume_payloads import PayloadError, volume_payload

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Record = Callable[[Obj, str, str, str], None]
PLUGIN_DIRS = {"emptyDir": "kubernetes.io~empty-dir", "configMap": "kubernetes.io~configmap",
               "secret": "kubernetes.io~secret", "downwardAPI": "kubernetes.io~downward-api",
               "projected": "kubernetes.io~projected"}
FILE_TYPES = ("configMap", "secret", "downwardAPI", "projected")
"""Volumes whose files the kubelet writes; always mounted read-only."""
KNOWN_TYPES = ("hostPath", *PLUGIN_DIRS)
OTHER_TYPES = ("persistentVolumeClaim", "ephemeral", "image", "csi", "nfs", "iscsi", "rbd", "cephfs", "fc",
               "flexVolume", "gitRepo", "glusterfs", "awsElasticBlockStore", "gcePersistentDisk", "azureDisk",
               "azureFile", "cinder", "flocker", "vsphereVolume", "quobyte", "photonPersistentDisk",
               "portworxVolume", "scaleIO", "storageos")
FAILED_MOUNT = "FailedMount"
ETC_HOSTS = "/etc/hosts"
RETRY_INITIAL, RETRY_CAP = 0.5, 122.0


class VolumeError(Exception):
    """One volume could not be set up."""

    def __init__(self, volume: str, message: str) -> None:
        super().__init__(f'MountVolume.SetUp failed for volume "{volume}" : {message}')
        self.volume = volume


class MountError(Exception):
    """A container's volumeMounts cannot be made (CreateContainerConfigError)."""


def volume_type(volume: Obj) -> str:
    for kind in (*KNOWN_TYPES, *OTHER_TYPES):
        if volume.get(kind) is not None:
            return kind
    return "emptyDir" if len(volume) == 1 else next((k for k in volume if k != "name"), "")


HOST_PATH_CHECKS: dict[str, tuple[Callable[[int], bool], str]] = {
    "DirectoryOrCreate": (stat.S_ISDIR, "is not a directory"), "Directory": (stat.S_ISDIR, "is not a directory"),
    "FileOrCreate": (stat.S_ISREG, "is not a file"), "File": (stat.S_ISREG, "is not a file"),
    "Socket": (stat.S_ISSOCK, "is not a socket file"), "CharDevice": (stat.S_ISCHR, "is not a character device"),
    "BlockDevice": (stat.S_ISBLK, "is not a block device")}


def _check_host_path(path: str, kind: str) -> None:
    """upstream hostpath checkType (see the module docstring)."""
    try:
        st: os.stat_result | None = os.stat(path)
    except OSError:
        st = None
    if kind == "DirectoryOrCreate" and st is None:
        os.makedirs(path, mode=0o755, exist_ok=True)
        return
    if kind == "FileOrCreate" and st is None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)
        return
    if kind not in HOST_PATH_CHECKS:
        raise PayloadError(f"{kind} is an invalid volume type")
    test, what = HOST_PATH_CHECKS[kind]
    if st is None or not test(st.st_mode):
        raise PayloadError(f"hostPath type check failed: {path} {what}")


class VolumeManager:
    """One node's pod volumes (see the module docstring)."""

    def __init__(self, *, root_dir: str | None, objects: ObjectSource, clock: Clock, record: Record,
                 allocatable: Callable[[], dict[str, str]]) -> None:
        self.root = Path(root_dir).absolute() if root_dir else None
        self.objects = objects
        self.record = record
        self.allocatable = allocatable
        self.backoff = Backoff(clock=clock, initial=RETRY_INITIAL, cap=RETRY_CAP)
        self.clock = clock
        self._ready: set[str] = set()
        """Pods whose volumes were all set up once."""

    # -- layout ---------------------------------------------------------------------------------------
    def pod_dir(self, uid: str) -> Path | None:
        return self.root / "pods" / uid if self.root is not None else None

    def host_path(self, pod: Obj, volume: Obj) -> str | None:
        """Where `volume` lives on this node (None without a root directory, or for other types)."""
        kind = volume_type(volume)
        if self.root is None:
            return None
        if kind == "hostPath":
            return str((volume.get("hostPath") or {}).get("path") or "")
        plugin = PLUGIN_DIRS.get(kind)
        if plugin is None:
            return None
        return str(self.root / "pods" / podutil.uid_of(pod) / "volumes" / plugin / str(volume.get("name")))

    # -- set-up ---------------------------------------------------------------------------------------
    async def _setup_one(self, pod: Obj, volume: Obj) -> None:
        kind = volume_type(volume)
        path = self.host_path(pod, volume)
        if kind in FILE_TYPES:
            payload = await volume_payload(pod, volume, kind, objects=self.objects, allocatable=self.allocatable())
            if path is not None:
                try:
                    atomic_writer.write(path, payload)
                except (atomic_writer.PayloadError, OSError) as e:
                    raise PayloadError(str(e)) from None
        elif kind == "emptyDir":
            if path is not None and not os.path.isdir(path):
                os.makedirs(path, exist_ok=True)
                os.chmod(path, 0o777)
        elif kind == "hostPath":
            kind_ = str((volume.get("hostPath") or {}).get("type") or "")
            if path is not None and kind_:
                try:
                    _check_host_path(path, kind_)
                except OSError as e:
                    raise PayloadError(str(e)) from None
        else:
            raise PayloadError(f"volume type {kind or '(none)'} is not supported by this kubelet (it provides "
                               "emptyDir, hostPath, configMap, secret, downwardAPI and projected volumes)")

    async def setup(self, pod: Obj) -> list[VolumeError]:
        """Set up every volume of `pod`; the failures (each also a FailedMount event)."""
        failures: list[VolumeError] = []
        for volume in podutil.spec(pod).get("volumes") or []:
            try:
                await self._setup_one(pod, volume)
            except PayloadError as e:
                failures.append(VolumeError(str(volume.get("name") or ""), str(e)))
        for f in failures:
            self.record(podutil.pod_ref(pod), "Warning", FAILED_MOUNT, str(f))
        uid = podutil.uid_of(pod)
        if not failures:
            self._ready.add(uid)
            self.backoff.reset(uid)
        return failures

    async def wait_for_mount(self, pod: Obj) -> float | None:
        """WaitForAttachAndMount: None when the pod may start (its volumes are, or once were, set
        up), else the seconds until the next attempt."""
        failures = await self.setup(pod)
        uid = podutil.uid_of(pod)
        if not failures or uid in self._ready:
            return None
        return self.backoff.next(uid, self.clock.now())

    # -- container mounts ----------------------------------------------------------------------------
    @property
    def writes_files(self) -> bool:
        return self.root is not None

    def container_mounts(self, pod: Obj, container: Obj, env: dict[str, str], *,
                         pod_ips: list[str] | None = None) -> list[cri.Mount]:
        if self.root is None:
            return []
        volumes = {str(v.get("name")): v for v in podutil.spec(pod).get("volumes") or []}
        out: list[cri.Mount] = []
        for vm in container.get("volumeMounts") or []:
            name = str(vm.get("name") or "")
            volume = volumes.get(name)
            if volume is None:
                raise MountError(f'cannot find volume "{name}" to mount into container "{container.get("name")}"')
            host = self.host_path(pod, volume)
            if host is None:
                continue
            sub = _sub_path(vm, env)
            if sub:
                host = _provision_sub_path(host, sub, mount=name, container=str(container.get("name")))
            read_only = bool(vm.get("readOnly")) or volume_type(volume) in FILE_TYPES
            out.append(cri.Mount(container_path=str(vm.get("mountPath") or ""), host_path=host, readonly=read_only))
        if pod_ips and not any(m.container_path == ETC_HOSTS for m in out):
            path = self.root / "pods" / podutil.uid_of(pod) / "etc-hosts"
            etc_hosts.write(path, etc_hosts.content(pod, pod_ips))
            out.append(cri.Mount(container_path=ETC_HOSTS, host_path=str(path)))
        return out

    # -- clean-up ------------------------------------------------------------------------------------
    def cleanup(self, uid: str) -> None:
        self._ready.discard(uid)
        self.backoff.reset(uid)
        d = self.pod_dir(uid)
        if d is not None and d.exists():
            shutil.rmtree(d, ignore_errors=True)

    def cleanup_orphans(self, keep: Iterable[str]) -> list[str]:
        """Remove the pod directories of every uid not in `keep`; the uids removed."""
        if self.root is None or not (self.root / "pods").is_dir():
            return []
        known = set(keep)
        gone = [d.name for d in (self.root / "pods").iterdir() if d.is_dir() and d.name not in known]
        for uid in gone:
            log.info("removing the volumes of orphaned pod %s", uid)
            self.cleanup(uid)
        return gone


def _sub_path(vm: Obj, env: dict[str, str]) -> str:
    if vm.get("subPath"):
        return str(vm["subPath"])
    expr = str(vm.get("subPathExpr") or "")
    if not expr:
        return ""
    missing: set[str] = set()

    def lookup(name: str) -> str:
        value = env.get(name, "")
        if not value:
            missing.add(name)
        return value

    expanded = expansion.expand(expr, lookup)
    if missing:
        raise MountError(f"missing value for {', '.join(sorted(missing))}")
    return expanded


def _provision_sub_path(volume_path: str, sub: str, *, mount: str, container: str) -> str:
    if os.path.isabs(sub):
        raise MountError(f"error SubPath `{sub}` must not be an absolute path")
    if ".." in sub.split("/"):
        raise MountError(f"unable to provision SubPath `{sub}`: must not contain '..'")
    host = os.path.join(volume_path, sub)
    if not os.path.lexists(host):
        try:
            mode = stat.S_IMODE(os.stat(volume_path).st_mode)
            os.makedirs(host, exist_ok=True)
            os.chmod(host, mode)
        except OSError:
            raise MountError(f'failed to create subPath directory for volumeMount "{mount}" of container '
                             f'"{container}"') from None
    return host
