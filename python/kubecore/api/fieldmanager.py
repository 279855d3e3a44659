"""metadata.managedFields bookkeeping for every write, and server-side apply (upstream's FieldManager).

Upstream stacks small managers around the structured-merge updater; their effects, in the order a
request meets them, are:

1. version check (apply): the configuration's apiVersion/kind must be the endpoint's (400);
2. last-applied updater/manager (apply by the manager named ``kubectl``): conflicts only with
   fields that the client-side-apply annotation still describes are forgiven, and the annotation
   is kept in step with the applied configuration;
3. skip-non-applied: an update of an existing object nobody manages records nothing; the first
   apply first gives the object's current fields to ``before-first-apply``;
4. cap: at most 10 Update entries; the oldest merge into ``ancient-changes``;
5. build manager info: the identifier is (manager, operation, apiVersion for updates, subresource);
6. managed-fields updater: an update's new fields join the manager's existing entry and stamp its
   time; an apply stamps the time only when the object changed;
7. strip meta: nobody owns apiVersion, kind, metadata.name/namespace/uid/... (``STRIP``).

Clocks are injected: ``now`` is the RFC 3339 time written into touched entries.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubecore._native import shape_key as _native_shape_key
from kubecore.api.jsoncopy import json_copy
from kubecore.api import errors
from kubecore.api.apply import ApplyConflict, Ignore, Managers, Updater
from kubecore.api.managedentries import (
    STRIP, Managed, VersionedSet, decode_managed, encode_managed, manager_identifier, unix_seconds,
)
from kubecore.api.managedfields import ABSENT, FieldPathError, Path, compare, field_set
from kubecore.api.typefacts import TypeFacts, facts_for, skeleton

__all__ = ["FieldManager", "LAST_APPLIED", "MAX_UPDATE_MANAGERS"]

Obj = dict[str, Any]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MAX_UPDATE_MANAGERS = 10
_CURRENT = "current-operation"
_BEFORE_FIRST_APPLY = "before-first-apply"
_ANCIENT = "ancient-changes"
_MAX_ANNOTATIONS_BYTES = 256 * 1024


def _reset_fields(*, has_status: bool, subresource: str) -> Ignore:
    """The strategies' GetResetFields: the main resource cannot change status, status cannot change spec."""
    if subresource == "status":
        return frozenset({"spec"})
    if has_status and not subresource:
        return frozenset({"status"})
    return frozenset()


CREATE_MEMO_SIZE = 1024
# metadata fields a managedFields entry never covers (managedentries.STRIP): not part of a shape
_UNOWNED_META = frozenset({"name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
                           "generation", "resourceVersion"})


_decode_entries = msgspec.json.Decoder(list[dict[str, Any]]).decode


def _structure(value: Any) -> Any:
    """`value` with every scalar outside a list replaced by its type's zero value: what a create's
    field set depends on. Field paths name fields and map keys; only list items are identified by
    their values (associative keys, set members), so lists are kept whole. Types are kept: a value
    of the wrong type fails the field set's typing where a right one does not."""
    t = type(value)
    if t is dict:
        return {k: _structure(v) for k, v in value.items()}
    if t is str:
        return ""
    if t is int:
        return 0
    if t is bool:
        return False
    if t is float:
        return 0.0
    return value  # lists, None


def _shape_key(obj: Obj, meta: Obj) -> bytes:
    """The memo key of a create: its structure without the metadata nobody owns (`meta` is
    `obj["metadata"]`). Pods from one template share it, and so do a controller's Events (they
    differ only in values). The native walk gives keys equal exactly when `_shape_key_py`'s are;
    it declines (None) what a JSON decoder does not make, and its keys never equal the fallback's."""
    key = _native_shape_key(obj, _UNOWNED_META)
    return key if key is not None else _shape_key_py(obj, meta)


def _shape_key_py(obj: Obj, meta: Obj) -> bytes:
    """`_shape_key` in Python (the reference, and the fallback)."""
    owned = {k: _structure(v) for k, v in meta.items() if k not in _UNOWNED_META}
    shape = {k: _structure(v) for k, v in obj.items() if k != "metadata"}
    shape["metadata"] = owned
    return msgspec.json.encode(shape)


def _without_managed(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _set_managed(obj: Obj, managed: Managed) -> None:
    meta = obj.setdefault("metadata", {})
    encoded = encode_managed(managed)
    if encoded is None:
        meta.pop("managedFields", None)
    else:
        meta["managedFields"] = encoded


def _strip(fields: Managers, ident: str) -> None:
    vs = fields.get(ident)
    if vs is None:
        return
    left = vs.paths - STRIP
    if left:
        fields[ident] = VersionedSet(left, vs.api_version, vs.applied)
    else:
        del fields[ident]


class FieldManager:
    """Field ownership for one endpoint: a kind at one version, optionally a subresource."""

    def __init__(self, *, group: str, version: str, kind: str, subresource: str = "", has_status: bool = False,
                 typed: bool = True, facts: TypeFacts | None = None) -> None:
        self.group = group
        self.kind = kind
        self.api_version = f"{group}/{version}" if group else version
        self.subresource = subresource
        self.facts = facts if facts is not None else facts_for(group, kind, typed=typed)
        self.updater = Updater(self.facts, self.api_version,
                               ignored=_reset_fields(has_status=has_status, subresource=subresource))
        self._empty = skeleton(group, kind)  # read only
        self._create_memo: dict[tuple[str, bytes], bytes] = {}  # see create(): entries as JSON
        self._create_raw: dict[tuple[str, bytes], tuple[str, msgspec.Raw]] = {}  # create(raw=True): this second's
        self.facts_source: Any = None  # what the facts were read from (a CRD schema), kept alive by the owner

    # ---- updates (create, update, non-apply patch) ----------------------------------------------

    def create(self, obj: Obj, manager: str, *, now: str, raw: bool = False) -> Obj:
        """Records a create: the body's fields against the kind's empty object.

        The entry depends only on the manager and on the object without the fields nobody owns
        (name, uid, timestamps ...), so creates of one shape (a controller's pods from one
        template, a client's repeated body) reuse the fieldsV1 computed the first time.

        With `raw`, a reused entry is set as `msgspec.Raw` (the entries' JSON, shared by the
        creates of one shape within one second): for a caller that only encodes the object
        afterwards (the API server's create path), which then never decodes the entries."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or "managedFields" in meta:
            return self.update(self._empty, obj, manager, now=now)
        key = (manager, _shape_key(obj, meta))
        if raw:
            hit = self._create_raw.get(key)
            if hit is not None and hit[0] == now:
                meta["managedFields"] = hit[1]
                return obj
        encoded = self._create_memo.get(key)
        if encoded is not None:
            entries = _decode_entries(encoded)
            for e in entries:
                if "time" in e:
                    e["time"] = now
            if not raw:
                meta["managedFields"] = entries
                return obj
            if len(self._create_raw) >= CREATE_MEMO_SIZE:
                self._create_raw.clear()
            value = msgspec.Raw(msgspec.json.encode(entries))
            self._create_raw[key] = (now, value)
            meta["managedFields"] = value
            return obj
        self.update(self._empty, obj, manager, now=now)
        made = (obj.get("metadata") or {}).get("managedFields")
        if isinstance(made, list):
            if len(self._create_memo) >= CREATE_MEMO_SIZE:
                self._create_memo.clear()
            self._create_memo[key] = msgspec.json.encode(made)
        return obj

    def update(self, live: Obj, new: Obj, manager: str, *, now: str) -> Obj:
        """Sets new.metadata.managedFields for an Update by `manager` (UpdateNoErrors: an object
        that cannot be tracked keeps the live object's entries). Mutates and returns `new`."""
        managed = self._live_or_new(live, new)
        new.setdefault("metadata", {}).pop("managedFields", None)
        try:
            managed = self._update(live, new, managed, manager, now=now)
        except FieldPathError:
            old = (live.get("metadata") or {}).get("managedFields")
            if old is not None:
                new["metadata"]["managedFields"] = json_copy(old)
            return new
        _set_managed(new, managed)
        return new

    def _live_or_new(self, live: Obj, new: Obj) -> Managed:
        """decodeLiveOrNew: a subresource never sets managedFields; ``[]`` (or one empty entry)
        resets them; entries that do not decode, or none, mean the live object's."""
        live_entries = (live.get("metadata") or {}).get("managedFields")
        new_entries = (new.get("metadata") or {}).get("managedFields")
        if not self.subresource and new_entries != live_entries:
            if isinstance(new_entries, list) and (new_entries == [] or new_entries == [{}]):
                return Managed()
            try:
                managed = decode_managed(new_entries)
                if managed.fields:
                    return managed
            except ValueError:
                pass
        try:
            return decode_managed(live_entries, canonical=True)
        except ValueError:
            return Managed()

    def _update(self, live: Obj, new: Obj, managed: Managed, manager: str, *, now: str) -> Managed:
        if not managed.fields and (live.get("metadata") or {}).get("uid"):
            return managed  # skip-non-applied: nobody manages this object yet
        return self._record_update(live, new, managed, manager or "unknown", now=now)

    def _record_update(self, live: Obj, new: Obj, managed: Managed, manager: str, *, now: str) -> Managed:
        ident = manager_identifier(manager, "Update", self.api_version, self.subresource)
        fields = self.updater.update(_without_managed(live), _without_managed(new), managed.fields, _CURRENT)
        times = dict(managed.times)
        _strip(fields, _CURRENT)
        current = fields.pop(_CURRENT, None)
        if current is not None:
            prev = fields.get(ident)
            paths = current.paths | prev.paths if prev is not None else current.paths
            fields[ident] = VersionedSet(paths, current.api_version, current.applied)
            times[ident] = now
        return _cap(Managed(fields, times))

    # ---- apply ----------------------------------------------------------------------------------

    def apply(self, live: Obj | None, config: Obj, manager: str, *, force: bool, now: str) -> Obj:
        """The object after `manager` applies `config` to `live` (None: the object does not exist
        yet), with managedFields set. Raises StatusError: 400 for a configuration of another kind
        or with managedFields, 409 ApplyConflict, 500 for objects that have no field paths."""
        self._check_config(config)
        current: Obj = live if live is not None else {}
        try:
            managed = decode_managed((current.get("metadata") or {}).get("managedFields"), canonical=True)
        except ValueError as e:
            raise errors.StatusError(500, "", f"failed to decode managed fields: {e}") from None
        try:
            try:
                out, managed = self._apply(current, config, managed, manager, force=force, now=now)
            except ApplyConflict as conflict:
                allowed = self._forgiven(current, manager)
                left = [(m, p) for m, p in conflict.conflicts if allowed is None or p not in allowed]
                if left:
                    raise (conflict if len(left) == len(conflict.conflicts) else ApplyConflict(left)) from None
                out, managed = self._apply(current, config, managed, manager, force=True, now=now)
        except FieldPathError as e:
            name = (config.get("metadata") or {}).get("name", "")
            ns = (config.get("metadata") or {}).get("namespace", "")
            raise errors.StatusError(500, "", f"failed to create typed patch object ({ns}/{name}; "
                                     f"{self._gvk_string(config)}): {e}") from None
        if manager == "kubectl" and _has_last_applied(out):
            _set_last_applied(out, _build_last_applied(config))
        _set_managed(out, managed)
        return out

    def _gvk_string(self, obj: Obj) -> str:
        av, kind = obj.get("apiVersion"), obj.get("kind")
        av = av if isinstance(av, str) else ""
        group, _, version = av.rpartition("/")
        if av.count("/") > 1:
            group, version, kind = "", "", ""
        return f"{group}/{version}, Kind={kind if isinstance(kind, str) else ''}"

    def _check_config(self, config: Obj) -> None:
        if config.get("apiVersion") != self.api_version or config.get("kind") != self.kind:
            raise errors.bad_request(f"invalid object type: {self._gvk_string(config)}")
        meta = config.get("metadata")
        if isinstance(meta, dict) and meta.get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")

    def _apply(self, live: Obj, config: Obj, managed: Managed, manager: str, *, force: bool,
               now: str) -> tuple[Obj, Managed]:
        if not managed.fields:
            managed = self._record_update(self._empty, live, managed, _BEFORE_FIRST_APPLY, now=now)
        ident = manager_identifier(manager, "Apply", self.api_version, self.subresource)
        base = _without_managed(live)
        new, fields = self.updater.apply(base, config, managed.fields, ident, force=force)
        _strip(fields, ident)
        times = dict(managed.times)
        if new is ABSENT:
            return json_copy(base), Managed(fields, times)
        times[ident] = now
        return new, Managed(fields, times)

    def _forgiven(self, live: Obj, manager: str) -> set[Path] | None:
        """lastAppliedManager: for ``kubectl``, the fields of the client-side-apply annotation
        whose values the live object still has (None when there is no usable annotation)."""
        if manager != "kubectl":
            return None
        raw = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
        if not raw or not isinstance(raw, str):
            return None
        try:
            last = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return None
        if not isinstance(last, dict) or last.get("apiVersion") != self.api_version:
            return None
        try:
            last_set = field_set(last, self.facts)
            c = compare(last, _without_managed(live), self.facts)
        except FieldPathError:
            return None
        return last_set - c.modified - c.added - c.removed


def _cap(managed: Managed, limit: int = MAX_UPDATE_MANAGERS) -> Managed:
    """capManagersManager: folds the oldest Update entries into one ``ancient-changes`` entry per version."""
    updaters = [m for m, vs in managed.fields.items() if not vs.applied]
    if len(updaters) <= limit:
        return managed
    updaters.sort(key=lambda m: (unix_seconds(managed.times.get(m)), m))
    first_by_version: dict[str, str] = {}
    length = len(updaters)
    for ident in updaters:
        if length <= limit:
            break
        vs, t = managed.fields[ident], managed.times.get(ident)
        bucket = manager_identifier(_ANCIENT, "Update", vs.api_version)
        if vs.api_version not in first_by_version:
            first_by_version[vs.api_version] = ident
            continue
        if bucket not in managed.fields:
            managed.fields[bucket] = managed.fields.pop(first_by_version[vs.api_version])
        managed.fields[bucket] = VersionedSet(vs.paths | managed.fields[bucket].paths, vs.api_version, vs.applied)
        del managed.fields[ident]
        managed.times[bucket] = t
        length -= 1
    return managed


def _has_last_applied(obj: Obj) -> bool:
    return bool(((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED))


def _sorted(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _sorted(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_sorted(x) for x in v]
    return v


def _build_last_applied(config: Obj) -> str:
    """The configuration as the annotation stores it: without the annotation itself, keys
    sorted, Go's escaping, a trailing newline (unstructured JSON encoding)."""
    cfg = json_copy(config)
    ann = (cfg.get("metadata") or {}).get("annotations")
    if isinstance(ann, dict):
        ann.pop(LAST_APPLIED, None)
        if not ann:
            del cfg["metadata"]["annotations"]
    return errors.encode_go_json(_sorted(cfg)).decode() + "\n"


def _set_last_applied(obj: Obj, value: str) -> None:
    ann = obj.setdefault("metadata", {}).setdefault("annotations", {})
    ann[LAST_APPLIED] = value
    if sum(len(k) + len(v) for k, v in ann.items() if isinstance(v, str)) > _MAX_ANNOTATIONS_BYTES:
        del ann[LAST_APPLIED]
