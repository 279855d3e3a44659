"""PersistentVolumes, PersistentVolumeClaims (core/v1) and StorageClasses (storage.k8s.io/v1).

ValidatePersistentVolume(Spec), ValidatePersistentVolumeClaim(Spec|Update) and
ValidateStorageClass(Update), the commonly hit rules (volume source details are not checked
beyond "exactly one source").
"""

from __future__ import annotations

from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import (
    Errs, Obj, dns_subdomain, enum, immutable, invalid_raw, label_selector, lst, m, qty, qualified_name, s,
)
from kubecore.api.kinds.containers import quantity_value

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
VOLUME_MODES = ("Block", "Filesystem")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
PV_SOURCES = (
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd", "quobyte",
    "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume", "azureDisk",
    "photonPersistentDisk", "portworxVolume", "scaleIO", "local", "storageos", "csi",
)
PVC_IMMUTABLE = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"


def _access_modes(modes: list[object], path: str, *, required_detail: str) -> Errs:
    errs: Errs = []
    if not modes:
        errs.append(FieldError.required(path, required_detail))
    for mode in modes:
        if mode not in ACCESS_MODES:
            errs.append(FieldError.not_supported(path, mode, ACCESS_MODES))
    if "ReadWriteOncePod" in modes and any(x in ACCESS_MODES and x != "ReadWriteOncePod" for x in modes):
        errs.append(FieldError.forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return errs


def persistent_volume(obj: Obj) -> Errs:
    """ValidatePersistentVolumeSpec (not inline)."""
    spec = m(obj, "spec")
    errs = _access_modes(lst(spec, "accessModes"), "spec.accessModes", required_detail="")
    capacity = m(spec, "capacity")
    if not capacity:
        errs.append(FieldError.required("spec.capacity"))
    if "storage" not in capacity or len(capacity) > 1:
        rendered = "core.ResourceList{" + ", ".join(f'"{k}":resource.Quantity{{...}}' for k in capacity) + "}"
        errs.append(FieldError("FieldValueNotSupported", "spec.capacity",
                               f'Unsupported value: {rendered}: supported values: "storage"'))
    for name, raw in capacity.items():
        q = qty(raw)
        if q.sign() <= 0:
            errs.append(FieldError.invalid(f"spec.capacity[{name}]", q.canonical(), "must be greater than zero"))
    if s(spec, "persistentVolumeReclaimPolicy"):
        errs.extend(enum(s(spec, "persistentVolumeReclaimPolicy"), RECLAIM_POLICIES,
                         "spec.persistentVolumeReclaimPolicy"))
    if s(spec, "storageClassName"):
        errs.extend(dns_subdomain(s(spec, "storageClassName"), "spec.storageClassName"))
    if spec.get("volumeMode") is not None:
        errs.extend(enum(s(spec, "volumeMode"), VOLUME_MODES, "spec.volumeMode"))
    errs.extend(_one_source(spec))
    return errs


def _one_source(spec: Obj) -> Errs:
    present = [k for k in PV_SOURCES if isinstance(spec.get(k), dict)]
    errs = [FieldError.forbidden(f"spec.{k}", "may not specify more than 1 volume type") for k in present[1:]]
    if not present:
        errs.append(FieldError.required("spec", "must specify a volume type"))
    for k in present[:1]:
        src = m(spec, k)
        if k in ("hostPath", "local") and not s(src, "path"):
            errs.append(FieldError.required(f"spec.{k}.path"))
        if k == "csi":
            if not s(src, "driver"):
                errs.append(FieldError.required("spec.csi.driver"))
            if not s(src, "volumeHandle"):
                errs.append(FieldError.required("spec.csi.volumeHandle"))
        if k == "nfs":
            errs.extend(FieldError.required(f"spec.nfs.{x}") for x in ("server", "path") if not s(src, x))
    return errs


def persistent_volume_update(new: Obj, old: Obj) -> Errs:
    errs = persistent_volume(new)
    spec, old_spec = m(new, "spec"), m(old, "spec")
    errs.extend(immutable(spec.get("volumeMode"), old_spec.get("volumeMode"), "volumeMode"))
    return errs


def pvc_spec(spec: Obj, path: str) -> Errs:
    """ValidatePersistentVolumeClaimSpec."""
    errs = _access_modes(lst(spec, "accessModes"), f"{path}.accessModes",
                         required_detail="at least 1 access mode is required")
    if spec.get("selector") is not None:
        errs.extend(label_selector(spec.get("selector"), f"{path}.selector"))
    requests = m(m(spec, "resources"), "requests")
    storage_path = f"{path}.resources[storage]"
    if "storage" not in requests:
        errs.append(FieldError.required(storage_path))
    else:
        q = qty(requests["storage"])
        if q.sign() <= 0:
            errs.append(FieldError.invalid(storage_path, q.canonical(), "must be greater than zero"))
        else:
            errs.extend(quantity_value("storage", q, storage_path))
    if s(spec, "storageClassName"):
        errs.extend(dns_subdomain(s(spec, "storageClassName"), f"{path}.storageClassName"))
    if spec.get("volumeMode") is not None:
        errs.extend(enum(s(spec, "volumeMode"), VOLUME_MODES, f"{path}.volumeMode"))
    source = spec.get("dataSource")
    if isinstance(source, dict):
        errs.extend(FieldError.required(f"{path}.dataSource.{k}") for k in ("name", "kind") if not s(source, k))
        if not s(source, "apiGroup") and s(source, "kind") != "PersistentVolumeClaim":
            errs.append(FieldError.invalid(f"{path}.dataSource", s(source, "kind"),
                                           "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
    return errs


def persistent_volume_claim(obj: Obj) -> Errs:
    return pvc_spec(m(obj, "spec"), "spec")


def persistent_volume_claim_update(new: Obj, old: Obj) -> Errs:
    """ValidatePersistentVolumeClaimUpdate: spec immutable but volumeName (once) and bound resizes."""
    errs = persistent_volume_claim(new)
    spec, old_spec = dict(m(new, "spec")), dict(m(old, "spec"))
    if not s(old_spec, "volumeName"):
        old_spec["volumeName"] = spec.get("volumeName")
        if spec.get("volumeName") is None:
            old_spec.pop("volumeName")
    if old_spec.get("storageClassName") is None and spec.get("storageClassName") is not None:
        old_spec["storageClassName"] = spec["storageClassName"]
    bound = s(m(new, "status"), "phase") == "Bound"
    new_requests = m(m(spec, "resources"), "requests")
    old_requests = m(m(old_spec, "resources"), "requests")
    if bound and "storage" in old_requests:
        spec["resources"] = {**m(spec, "resources"), "requests": {**new_requests, "storage": old_requests["storage"]}}
    if spec != old_spec:
        errs.append(FieldError.forbidden("spec", PVC_IMMUTABLE + "\n"))
    if "storage" in new_requests and "storage" in old_requests:
        if qty(new_requests["storage"]).cmp(qty(old_requests["storage"])) < 0:
            errs.append(FieldError.forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"))
    errs.extend(immutable(m(new, "spec").get("volumeMode"), m(old, "spec").get("volumeMode"), "volumeMode"))
    return errs


def storage_class(obj: Obj) -> Errs:
    """ValidateStorageClass."""
    provisioner = s(obj, "provisioner")
    errs: Errs = []
    if not provisioner:
        errs.append(FieldError.required("provisioner"))
    else:
        errs.extend(qualified_name(provisioner.lower(), "provisioner"))
        if len(provisioner) > 63:
            errs.append(FieldError.too_long("provisioner", 63))
    params = m(obj, "parameters")
    total = 0
    for k, v in params.items():
        if not k:
            errs.append(invalid_raw("parameters", f'"{k}"', "must not be empty"))
        total += len(k) + len(v if isinstance(v, str) else "")
    if len(params) > 512:
        errs.append(FieldError("FieldValueTooMany", "parameters", f"Too many: {len(params)}: must have at most 512 items"))
    if total > 256 * 1024:
        errs.append(FieldError.too_long("parameters", 256 * 1024))
    if obj.get("reclaimPolicy") is not None:
        errs.extend(enum(s(obj, "reclaimPolicy"), ("Delete", "Retain"), "reclaimPolicy"))
    if obj.get("volumeBindingMode") is not None:
        errs.extend(enum(s(obj, "volumeBindingMode"), BINDING_MODES, "volumeBindingMode"))
    return errs


def storage_class_update(new: Obj, old: Obj) -> Errs:
    errs: Errs = []
    if m(new, "parameters") != m(old, "parameters"):
        errs.append(FieldError.forbidden("parameters", "updates to parameters are forbidden."))
    if s(new, "provisioner") != s(old, "provisioner"):
        errs.append(FieldError.forbidden("provisioner", "updates to provisioner are forbidden."))
    if new.get("reclaimPolicy") != old.get("reclaimPolicy"):
        errs.append(FieldError.forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
    errs.extend(immutable(new.get("volumeBindingMode"), old.get("volumeBindingMode"), "volumeBindingMode"))
    return errs + storage_class(new)
