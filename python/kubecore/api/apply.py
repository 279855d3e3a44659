"""Server-side apply: merging an applied configuration into the live object, and who owns what.

Mirrors structured-merge-diff's merge.Updater on kubecore's plain-dict objects (list and map
semantics from kubecore.api.typefacts):

- ``merge(live, config)``: maps merge key by key, associative and set lists item by item (items
  of the configuration in its order, live-only items kept where they were), atomic lists and
  scalars are replaced;
- ``update(...)`` (every write): what changed from the old to the new object is taken from every
  other manager (silently for an Update, as a conflict for an Apply unless forced) and, for an
  Update, given to the writing manager;
- ``apply(...)``: the manager's set becomes exactly what its configuration sets; fields it applied
  last time and omits now are removed from the object unless another manager still owns them.

Conflicts raise ``ApplyConflict`` (a 409 Status with upstream's message and causes).
"""

from __future__ import annotations

import copy
from typing import Any

from kubecore.api.errors import FieldError, StatusError
from kubecore.api.managedentries import VersionedSet, print_manager
from kubecore.api.managedfields import (
    ABSENT, PE, Comparison, FieldPathError, Path, compare, ensure_named_fields, field_set, filter_paths,
    item_element, iterate, path_string,
)
from kubecore.api.typefacts import ListType, TypeFacts

__all__ = ["merge", "remove_paths", "ApplyConflict", "Updater"]

Managers = dict[str, VersionedSet]
Ignore = frozenset[str]  # top-level fields a request cannot change (reset fields)


# ---- merge ------------------------------------------------------------------------------------------

def merge(lhs: Any, rhs: Any, facts: TypeFacts) -> Any:
    """The live object `lhs` with the configuration `rhs` merged in (typed.Merge)."""
    return _merge(lhs, rhs, (), (), facts)


def _maybe(v: Any, kind: type) -> bool:
    return v is ABSENT or v is None or isinstance(v, kind)


def _empty(v: Any) -> bool:
    return v is ABSENT or v is None or not v


def _merge(lhs: Any, rhs: Any, path: Path, names: tuple[str, ...], facts: TypeFacts) -> Any:
    if rhs is ABSENT:
        return copy.deepcopy(lhs)
    if (isinstance(lhs, dict) or isinstance(rhs, dict)) and _maybe(lhs, dict) and _maybe(rhs, dict):
        if facts.atomic_map(names) or (_empty(lhs) and _empty(rhs)):
            return copy.deepcopy(rhs)
        lm = lhs if isinstance(lhs, dict) else {}
        rm = rhs if isinstance(rhs, dict) else {}
        out = {k: _merge(v, rm.get(k, ABSENT), path + (("f", k),), names + (k,), facts) for k, v in lm.items()}
        for k, v in rm.items():
            if k not in lm:
                out[k] = _merge(ABSENT, v, path + (("f", k),), names + (k,), facts)
        return out
    if (isinstance(lhs, list) or isinstance(rhs, list)) and _maybe(lhs, list) and _maybe(rhs, list):
        lt = facts.list_type(names)
        if lt.atomic or (_empty(lhs) and _empty(rhs)):
            return copy.deepcopy(rhs)
        return _merge_list(lhs if isinstance(lhs, list) else [], rhs if isinstance(rhs, list) else [],
                           lt, path, names, facts)
    return copy.deepcopy(rhs)


def _index_rhs(rhs: list[Any], lt: ListType, path: Path, names: tuple[str, ...]) -> list[PE]:
    pes = [item_element(item, lt, names) for item in rhs]
    seen: set[PE] = set()
    for pe in pes:
        if pe in seen:
            raise FieldPathError(f"{path_string(path)}: duplicate entries for key {path_string((pe,))}")
        seen.add(pe)
    return pes


def _merge_list(lhs: list[Any], rhs: list[Any], lt: ListType, path: Path, names: tuple[str, ...],
                facts: TypeFacts) -> list[Any]:
    """Associative/set list merge with upstream's ordering: the configuration's order for the
    items it names, live-only items kept in place between them."""
    rpes = _index_rhs(rhs, lt, path, names)
    robs = dict(zip(rpes, rhs))
    lpes = [item_element(item, lt, names) for item in lhs]
    lobs: dict[PE, Any] = {}
    for pe, item in zip(lpes, lhs):
        lobs[pe] = None if pe in lobs else item  # a duplicated live item merges as null
    shared = [pe for pe in rpes if pe in lobs]
    next_shared = shared.pop(0) if shared else None
    done: set[PE] = set()
    out: list[Any] = []

    def emit(pe: PE, lv: Any, rv: Any) -> None:
        if lt.atomic_items or lt.relationship == "set":
            out.append(copy.deepcopy(rv if rv is not ABSENT else lv))
        else:
            out.append(_merge(lv, rv, path + (pe,), names, facts))

    li = ri = 0
    while li < len(lpes) or ri < len(rpes):
        if li < len(lpes) and ri < len(rpes):
            pe = lpes[li]
            if pe == rpes[ri]:
                done.add(pe)
                emit(pe, lobs[pe], robs[pe])
                li, ri = li + 1, ri + 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in robs and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lpes):
            pe = lpes[li]
            if pe not in robs:
                emit(pe, lhs[li], ABSENT)
                li += 1
                continue
            if pe in done:
                li += 1
        if ri < len(rpes):
            pe = rpes[ri]
            done.add(pe)
            emit(pe, lobs.get(pe, ABSENT), robs[pe])
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


# ---- removal ----------------------------------------------------------------------------------------

def remove_paths(obj: Any, paths: set[Path], facts: TypeFacts) -> Any:
    """The object without the given members (and everything under them). A map or list left
    empty by the removal is dropped, as upstream's typed object drops it."""
    if not paths:
        return obj
    out = _remove(obj, _subtree(paths), (), facts)
    return out if out is not None else {}


def _subtree(paths: set[Path]) -> dict[PE, Any]:
    """{element: (is_member, subtree)} for prefix matching."""
    tree: dict[PE, Any] = {}
    for p in paths:
        node = tree
        for i, pe in enumerate(p):
            entry = node.setdefault(pe, [False, {}])
            if i == len(p) - 1:
                entry[0] = True
            node = entry[1]
    return tree


def _remove(v: Any, tree: dict[PE, Any], names: tuple[str, ...], facts: TypeFacts) -> Any:
    if isinstance(v, dict):
        if not v or facts.atomic_map(names):
            return v
        out = {}
        for k, val in v.items():
            entry = tree.get(("f", k))
            if entry is not None and entry[0]:
                continue
            if entry is not None and entry[1]:
                val = _remove(val, entry[1], names + (k,), facts)
                if val is None:
                    continue
            out[k] = val
        return out or None
    if isinstance(v, list):
        lt = facts.list_type(names)
        if not v or lt.atomic:
            return v
        items = []
        for item in v:
            entry = tree.get(item_element(item, lt, names))
            if entry is not None and entry[0]:
                continue
            if entry is not None and entry[1]:
                item = _remove(item, entry[1], names, facts)
            items.append(item)
        return items or None
    return v


# ---- conflicts --------------------------------------------------------------------------------------

class ApplyConflict(StatusError):
    """merge.Conflicts as the API server reports them (NewConflictError)."""

    def __init__(self, conflicts: list[tuple[str, Path]]) -> None:
        self.conflicts = conflicts
        causes = [FieldError("FieldManagerConflict", path_string(p), f"conflict with {print_manager(m)}").cause()
                  for m, p in conflicts]
        super().__init__(409, "Conflict", _conflict_message(conflicts), {"causes": causes})


def _conflict_message(conflicts: list[tuple[str, Path]]) -> str:
    if len(conflicts) == 1:
        m, p = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {print_manager(m)}: {path_string(p)}"
    by_manager: dict[str, list[Path]] = {}
    for m, p in conflicts:
        by_manager.setdefault(m, []).append(p)
    lines: list[str] = []
    for m in sorted(by_manager):
        lines.append(f"conflicts with {print_manager(m)}:")
        lines.extend(f"- {path_string(p)}" for p in by_manager[m])
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


# ---- the updater ------------------------------------------------------------------------------------

class Updater:
    """merge.Updater for one kind and version. ``ignored`` filters reset fields (the parts of the
    object a request cannot change, e.g. status on the main resource)."""

    def __init__(self, facts: TypeFacts, version: str, *, ignored: Ignore = frozenset()) -> None:
        self.facts = facts
        self.version = version
        self.ignored = ignored

    def _take(self, old: Any, new: Any, managers: Managers, *, workflow: str, force: bool) -> Comparison:
        """Removes changed fields from every manager but `workflow` (raises when not `force`)."""
        c = compare(old, new, self.facts, skip=self.ignored)
        changed = c.modified | c.added
        conflicts: dict[str, set[Path]] = {}
        for ident in sorted(managers):
            if ident != workflow:
                hit = managers[ident].members_of(changed)
                if hit:
                    conflicts[ident] = hit
        if conflicts and not force:
            raise ApplyConflict([(m, p) for m in conflicts for p in iterate(conflicts[m])])
        for ident in list(managers):
            vs = managers[ident]
            drop = set() if ident == workflow else conflicts.get(ident, set()) | vs.members_of(c.removed)
            if drop:
                vs = managers[ident] = VersionedSet(vs.paths - drop, vs.api_version, vs.applied)
            if vs.empty:
                del managers[ident]
        return c

    def update(self, live: Any, new: Any, managers: Managers, manager: str) -> Managers:
        """An Update by `manager`: it owns what it added or modified (Updater.Update)."""
        managers = dict(managers)
        c = self._take(live, new, managers, workflow=manager, force=True)
        prev = managers[manager].paths if manager in managers else frozenset()
        owned = filter_paths((prev - c.removed) | c.modified | c.added, self.ignored)
        if owned:
            managers[manager] = VersionedSet(frozenset(owned), self.version, False)
        else:
            managers.pop(manager, None)
        return managers

    def apply(self, live: Any, config: Any, managers: Managers, manager: str, *,
              force: bool) -> tuple[Any, Managers]:
        """An Apply by `manager` (Updater.Apply); returns the new object (ABSENT when it equals
        `live`) and the managers."""
        managers = dict(managers)
        merged = merge(live, config, self.facts)
        last = managers.get(manager)
        applied = field_set(config, self.facts, skip=self.ignored)
        managers[manager] = VersionedSet(frozenset(applied), self.version, True)
        merged = self._prune(merged, managers, last)
        self._take(live, merged, managers, workflow=manager, force=force)
        return (ABSENT if merged == live else merged), managers

    def _prune(self, merged: Any, managers: Managers, last: VersionedSet | None) -> Any:
        """Removes what `last` owned and nobody owns now (prune + addBackOwnedItems +
        addBackDanglingItems): fields no manager ever owned stay."""
        if last is None or not last.paths:
            return merged
        facts = self.facts
        last_set = ensure_named_fields(last.paths)
        all_fields = ensure_named_fields(field_set(merged, facts))
        pruned = remove_paths(merged, last_set, facts)
        owned = ensure_named_fields(set().union(*(vs.paths for vs in managers.values())))
        kept = ensure_named_fields(field_set(pruned, facts))
        pruned = remove_paths(merged, all_fields - (kept | owned), facts)
        kept = ensure_named_fields(field_set(pruned, facts))
        return remove_paths(merged, (all_fields - kept) & last_set, facts)
