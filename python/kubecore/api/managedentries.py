"""The entries of metadata.managedFields: who manages which field set, decoded and encoded as
upstream does (k8s.io/apimachinery/pkg/util/managedfields/internal: managedfields.go, conflict.go).

An entry is identified by its manager, operation, subresource and (for Update) apiVersion; the
identifier is that entry's JSON without time and fields (BuildManagerIdentifier). Entries are
written Apply first, then by time, manager, apiVersion and subresource.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubecore.api.errors import encode_go_json, go_quote
from kubecore.api.managedfields import Path, from_fields_v1, path_string, to_fields_v1

__all__ = ["STRIP", "VersionedSet", "Managed", "manager_identifier", "decode_managed", "encode_managed",
           "print_manager", "unix_seconds"]

_decode = msgspec.json.decode


# Fields no manager owns (stripMetaManager): identity and bookkeeping.
STRIP: frozenset[Path] = frozenset({
    (("f", "apiVersion"),), (("f", "kind"),), (("f", "metadata"),),
    *((("f", "metadata"), ("f", name)) for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
        "managedFields", "resourceVersion")),
})


class VersionedSet:
    """One manager's fields at one apiVersion; ``applied`` for Apply entries. Sets decoded from
    managedFields keep their FieldsV1 object (``raw``) and are parsed only when their paths are
    needed: ``members_of`` answers from the raw object, and an unchanged set is written back as is."""

    __slots__ = ("_paths", "raw", "canonical", "api_version", "applied")

    def __init__(self, paths: Iterable[Path] | None, api_version: str, applied: bool, *,
                 raw: dict[str, Any] | None = None, canonical: bool = False) -> None:
        self._paths = frozenset(paths) if paths is not None else None
        self.raw = raw
        self.canonical = canonical and raw is not None  # raw is what to_fields_v1 would write
        self.api_version = api_version
        self.applied = applied

    @property
    def paths(self) -> frozenset[Path]:
        if self._paths is None:
            self._paths = frozenset(from_fields_v1(self.raw or {}))
        return self._paths

    def members_of(self, candidates: set[Path]) -> set[Path]:
        """The candidates that are members of this set."""
        if not candidates:
            return set()
        if self._paths is not None:
            return set(self._paths & candidates)
        return {p for p in candidates if _raw_has(self.raw or {}, p)}

    @property
    def empty(self) -> bool:
        return not self._paths if self._paths is not None else not self.raw

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, VersionedSet) and (self.api_version, self.applied, self.paths)
                == (other.api_version, other.applied, other.paths))

    def __repr__(self) -> str:
        return f"VersionedSet({sorted(map(path_string, self.paths))}, {self.api_version!r}, {self.applied})"


def _raw_has(raw: dict[str, Any], path: Path) -> bool:
    node: Any = raw
    for pe in path:
        node = node.get(f"{pe[0]}:{pe[1]}") if isinstance(node, dict) else None
        if node is None:
            return False
    return isinstance(node, dict) and (not node or "." in node)


@dataclass
class Managed:
    """Decoded managedFields: manager identifier -> fields, and -> time (RFC 3339 or None)."""

    fields: dict[str, VersionedSet] = field(default_factory=dict)
    times: dict[str, str | None] = field(default_factory=dict)

    def copy(self) -> Managed:
        return Managed(dict(self.fields), dict(self.times))


@functools.lru_cache(maxsize=1024)
def manager_identifier(manager: str, operation: str, api_version: str = "", subresource: str = "") -> str:
    """BuildManagerIdentifier: the entry's JSON without time and fields (and, for Apply, apiVersion)."""
    ident: dict[str, str] = {}
    if manager:
        ident["manager"] = manager
    ident["operation"] = operation
    if api_version and operation != "Apply":
        ident["apiVersion"] = api_version
    if subresource:
        ident["subresource"] = subresource
    return encode_go_json(ident).decode()


def decode_managed(entries: Any, *, canonical: bool = False) -> Managed:
    """DecodeManagedFields; raises ValueError for an entry upstream would not accept.
    ``canonical``: the entries were written by this server (unchanged sets are written back as
    they are, without parsing them)."""
    m = Managed()
    if entries is None:
        return m
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"managed fields entry {i} must be an object")
        op = e.get("operation")
        if op not in ("Apply", "Update"):
            raise ValueError("operation must be `Apply` or `Update`")
        if not e.get("apiVersion"):
            raise ValueError("apiVersion must not be empty")
        if not e.get("fieldsType"):
            raise ValueError(f"missing fieldsType in managed fields entry {i}")
        if e["fieldsType"] != "FieldsV1":
            raise ValueError(f"invalid fieldsType {go_quote(str(e['fieldsType']))} in managed fields entry {i}")
        ident = manager_identifier(str(e.get("manager") or ""), op, str(e["apiVersion"]),
                                   str(e.get("subresource") or ""))
        raw = e.get("fieldsV1") or {}
        if not isinstance(raw, dict):
            raise ValueError("FieldsV1 must be a JSON object")
        m.fields[ident] = VersionedSet(None, str(e["apiVersion"]), op == "Apply", raw=raw, canonical=canonical)
        t = e.get("time")
        m.times[ident] = t if isinstance(t, str) else None
    return m


def unix_seconds(t: str | None) -> int:
    return _unix_seconds(t) if t else 0


@functools.lru_cache(maxsize=1024)
def _unix_seconds(t: str) -> int:
    """Memoized: entries' times repeat (the server stamps whole seconds), and a parse is ~15 µs."""
    try:
        return int(datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def encode_managed(m: Managed) -> list[dict[str, Any]] | None:
    """The metadata.managedFields list (None when nothing is managed), in upstream's order:
    operation, then time, manager, apiVersion, subresource."""
    if not m.fields:
        return None
    out: list[dict[str, Any]] = []
    for ident, vs in m.fields.items():
        info = _ident_info(ident)
        entry: dict[str, Any] = {}
        if info.get("manager"):
            entry["manager"] = info["manager"]
        entry["operation"] = "Apply" if vs.applied else info.get("operation", "Update")
        entry["apiVersion"] = vs.api_version
        if m.times.get(ident):
            entry["time"] = m.times[ident]
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = vs.raw if vs.canonical and vs.raw is not None else to_fields_v1(vs.paths)
        if info.get("subresource"):
            entry["subresource"] = info["subresource"]
        out.append(entry)
    if len(out) > 1:
        out.sort(key=lambda e: (e["operation"], unix_seconds(e.get("time")), e.get("manager", ""), e["apiVersion"],
                                e.get("subresource", "")))
    return out


@functools.lru_cache(maxsize=1024)
def _ident_info(ident: str) -> Mapping[str, Any]:
    info: Mapping[str, Any] = _decode(ident)
    return info


def print_manager(ident: str) -> str:
    """How a conflict names a manager: ``"kubectl"``, ``"kubectl-edit" using v1``."""
    try:
        info = _decode(ident)
    except msgspec.DecodeError:
        return go_quote(ident)
    out = go_quote(str(info.get("manager", "")))
    if info.get("subresource"):
        out += f" with subresource {go_quote(info['subresource'])}"
    if info.get("operation") == "Update":
        return f"{out} using {info.get('apiVersion', '')}"
    return out
