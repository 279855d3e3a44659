"""The images a kubecore node needs, built locally from the machine's static busybox (no registry
is needed or reached): `busybox` for workloads and the sandbox ("pause") image.

    ensure_local_images(socket)      # build both and import them into containerd's k8s.io namespace

Guarantees:
- The builds are deterministic: the same busybox binary gives byte-identical OCI image tarballs,
  so the same image ids on every node and every run.
- Both images share one layer: /bin/busybox, a symlink for each of its applets where busybox
  installs it (`busybox --list-full`), a root-only /etc/passwd and /etc/group, /tmp, /root.
- `BUSYBOX_IMAGE` is `docker.io/library/busybox:latest`, so a pod's `image: busybox` resolves to
  it (CRI normalises short names the same way).
- The pause image's process waits without work and exits 0 on SIGTERM or SIGINT (a shell trap,
  as PID 1 of the pod); its name is `daemon.SANDBOX_IMAGE`.
- `ensure_local_images` is idempotent: an image already present with the same manifest digest is
  not imported again.

Images are OCI image layouts in a tar (oci-layout, index.json, blobs/sha256), one manifest each,
named by the `io.containerd.image.name` annotation that `ctr images import` reads; the layer is
an uncompressed tar (its digest is its diff id).
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kubecore.kubelet.containerd.daemon import SANDBOX_IMAGE, ContainerdError

BUSYBOX_IMAGE = "docker.io/library/busybox:latest"
PAUSE_IMAGE = SANDBOX_IMAGE
CRI_NAMESPACE = "k8s.io"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PAUSE_SCRIPT = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar"
PT_INTERP = 3
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


@dataclass(frozen=True, slots=True)
class ImageTar:
    """One built image: its name, the manifest digest containerd will show, and the tar bytes."""

    name: str
    digest: str
    data: bytes


def find_busybox() -> str:
    """The machine's busybox, which must be statically linked (the images hold no libc)."""
    path = shutil.which("busybox") or ("/bin/busybox" if os.access("/bin/busybox", os.X_OK) else None)
    if path is None:
        raise ContainerdError("busybox is missing: kubecore builds its images from a static busybox "
                              "(Debian: apt-get install busybox-static)")
    if not is_static_elf(path):
        raise ContainerdError(f"{path} is dynamically linked: kubecore's images need a static busybox "
                              "(Debian: apt-get install busybox-static)")
    return path


def is_static_elf(path: str) -> bool:
    """Whether `path` is a 64-bit little-endian ELF without a program interpreter (PT_INTERP)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return False
        phoff = int.from_bytes(head[0x20:0x28], "little")
        phentsize = int.from_bytes(head[0x36:0x38], "little")
        phnum = int.from_bytes(head[0x38:0x3A], "little")
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(int.from_bytes(table[i:i + 4], "little") != PT_INTERP for i in range(0, len(table), phentsize))


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _add(tar: tarfile.TarFile, name: str, *, kind: bytes = tarfile.DIRTYPE, mode: int = 0o755,
         data: bytes = b"", link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.linkname = kind, mode, 0, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def busybox_layer(busybox: str) -> bytes:
    """The shared layer (see the module docstring) as an uncompressed tar."""
    applets = subprocess.run([busybox, "--list-full"], check=True, capture_output=True, text=True).stdout.split()
    links = sorted(a for a in applets if "/" in a and a != "bin/busybox")
    dirs = {"bin", "etc", "root", "tmp", "proc", "sys", "dev", "var"}
    for link in links:
        parts = link.split("/")[:-1]
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            _add(tar, d, mode=0o1777 if d == "tmp" else (0o700 if d == "root" else 0o755))
        _add(tar, "bin/busybox", kind=tarfile.REGTYPE, data=Path(busybox).read_bytes())
        _add(tar, "etc/passwd", kind=tarfile.REGTYPE, mode=0o644,
             data=b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
        _add(tar, "etc/group", kind=tarfile.REGTYPE, mode=0o644, data=b"root:x:0:\nnogroup:x:65534:\n")
        for link in links:
            _add(tar, link, kind=tarfile.SYMTYPE, mode=0o777, link="/bin/busybox")
    return buf.getvalue()


def _json(obj: object) -> bytes:
    return msgspec.json.encode(obj)


def image_tar(name: str, layer: bytes, *, entrypoint: list[str], cmd: list[str]) -> ImageTar:
    """An OCI layout tar holding one image `name` with `layer` as its only layer."""
    arch = _ARCH.get(platform.machine(), platform.machine())
    layer_digest = _sha(layer)
    config = _json({
        "architecture": arch, "os": "linux",
        "config": {"Env": [PATH_ENV], "Entrypoint": entrypoint or None, "Cmd": cmd or None, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "kubecore images build-local (busybox)"}],
    })
    manifest = _json({
        "schemaVersion": 2, "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": _sha(config), "size": len(config)},
        "layers": [{"mediaType": MT_LAYER, "digest": layer_digest, "size": len(layer)}],
    })
    digest = _sha(manifest)
    index = _json({"schemaVersion": 2, "manifests": [{
        "mediaType": MT_MANIFEST, "digest": digest, "size": len(manifest),
        "platform": {"architecture": arch, "os": "linux"},
        "annotations": {"io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]},
    }]})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "blobs")
        _add(tar, "blobs/sha256")
        for blob in (layer, config, manifest):
            _add(tar, "blobs/sha256/" + _sha(blob).split(":", 1)[1], kind=tarfile.REGTYPE, mode=0o644, data=blob)
        _add(tar, "oci-layout", kind=tarfile.REGTYPE, mode=0o644, data=b'{"imageLayoutVersion":"1.0.0"}')
        _add(tar, "index.json", kind=tarfile.REGTYPE, mode=0o644, data=index)
    return ImageTar(name, digest, buf.getvalue())


def build_local_images(busybox: str | None = None) -> list[ImageTar]:
    """The busybox image and the pause image, built from `busybox` (default: the machine's)."""
    layer = busybox_layer(busybox or find_busybox())
    return [image_tar(BUSYBOX_IMAGE, layer, entrypoint=[], cmd=["sh"]),
            image_tar(PAUSE_IMAGE, layer, entrypoint=["/bin/sh", "-c", PAUSE_SCRIPT], cmd=[])]


def write_image_tars(out_dir: str | os.PathLike[str], images: list[ImageTar]) -> list[Path]:
    """Write each image as `<out_dir>/<short name>.tar` (for `ctr images import` by hand)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for image in images:
        short = image.name.rsplit("/", 1)[-1].split(":", 1)[0]
        path = out / f"{short}.tar"
        path.write_bytes(image.data)
        paths.append(path)
    return paths


def _ctr(socket: str, *args: str, stdin: bytes | None = None) -> str:
    if not os.path.exists(socket):
        raise ContainerdError(f"no containerd socket at {socket} (is containerd running?)")
    if shutil.which("ctr") is None:
        raise ContainerdError("ctr is missing (it ships with containerd: apt-get install containerd)")
    proc = subprocess.run(["ctr", "-a", socket, "-n", CRI_NAMESPACE, *args], input=stdin, capture_output=True,
                          timeout=300)
    if proc.returncode != 0:
        raise ContainerdError(f"ctr {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode(errors="replace")


def present_images(socket: str) -> dict[str, str]:
    """Image name -> manifest digest, as containerd's k8s.io namespace holds them."""
    found: dict[str, str] = {}
    for line in _ctr(socket, "images", "ls").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 3:
            found[cols[0]] = cols[2]
    return found


def import_image(socket: str, image: ImageTar) -> None:
    _ctr(socket, "images", "import", "-", stdin=image.data)


def ensure_local_images(socket: str, *, busybox: str | None = None, built: list[ImageTar] | None = None) -> list[str]:
    """Build the local images (or take `built`) and import the ones containerd lacks; returns the
    names imported."""
    present = present_images(socket)
    imported = []
    for image in built if built is not None else build_local_images(busybox):
        if present.get(image.name) != image.digest:
            import_image(socket, image)
            imported.append(image.name)
    return imported
