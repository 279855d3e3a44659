"""The former pure-Python walkers of kubecore.api.managedfields (ToFieldSet and typed.Compare),
kept as the oracle of the differential test test_fieldpath_native.py and of bench/micro_fieldpath.py.

The product walks objects natively (rust/fieldpath through kubecore._native.FieldFacts); these
functions are the specification it must reproduce exactly, node by node. They use the product's
item_element (which apply.py's merge also uses) and the same TypeFacts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubecore.api.managedfields import ABSENT, PE, Path, item_element
from kubecore.api.typefacts import ListType, TypeFacts

__all__ = ["field_set", "compare", "Comparison"]


def _without(obj: Any, skip: frozenset[str]) -> Any:
    if not skip or not isinstance(obj, dict):
        return obj
    return {k: v for k, v in obj.items() if k not in skip}


# ---- ToFieldSet ------------------------------------------------------------------------------------

def field_set(obj: Any, facts: TypeFacts, *, skip: frozenset[str] = frozenset()) -> set[Path]:
    """The fields an object (an applied configuration) sets: leaves, list items, empty maps,
    nulls; nothing under the top-level fields `skip`."""
    out: set[Path] = set()
    if isinstance(obj, dict):
        _fs_map(_without(obj, skip), (), (), facts, out)
    return out


def _fs_node(v: Any, path: Path, names: tuple[str, ...], facts: TypeFacts, out: set[Path]) -> None:
    if isinstance(v, dict):
        if facts.atomic_map(names):
            out.add(path)
        else:
            _fs_map(v, path, names, facts, out)
    elif isinstance(v, list):
        lt = facts.list_type(names)
        if lt.atomic:
            out.add(path)
        else:
            _fs_list(v, lt, path, names, facts, out)
    else:
        out.add(path)


def _fs_map(m: dict[str, Any], path: Path, names: tuple[str, ...], facts: TypeFacts, out: set[Path]) -> None:
    for k, v in m.items():
        p = path + (("f", k),)
        _fs_node(v, p, names + (k,), facts, out)
        if v is None or (isinstance(v, dict) and not v):
            out.add(p)


def _fs_list(items: list[Any], lt: ListType, path: Path, names: tuple[str, ...], facts: TypeFacts,
             out: set[Path]) -> None:
    pes = [item_element(item, lt, names) for item in items]
    seen: set[PE] = set()
    dups: set[PE] = set()
    for pe in pes:
        (dups if pe in seen else seen).add(pe)
    for pe in dups:
        out.add(path + (pe,))
    for pe, item in zip(pes, items):
        if pe in dups:
            continue
        p = path + (pe,)
        if not lt.atomic_items:
            _fs_node(item, p, names, facts, out)
        out.add(p)


# ---- Compare ---------------------------------------------------------------------------------------

@dataclass
class Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)



def compare(lhs: Any, rhs: Any, facts: TypeFacts, *, skip: frozenset[str] = frozenset()) -> Comparison:
    """What changed from `lhs` to `rhs` (typed.Compare): containers that appear or disappear as a
    whole are reported themselves, as well as every leaf under them. Top-level fields in `skip`
    are not compared (upstream's ExcludeFields of reset fields)."""
    c = Comparison()
    _cmp_value(_without(lhs, skip), _without(rhs, skip), (), (), facts, c)
    return c


def _is(v: Any, kind: type) -> bool:
    return v is ABSENT or v is None or isinstance(v, kind)


def _empty(v: Any) -> bool:
    return v is ABSENT or v is None or not v


def _equal(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _leaf(lhs: Any, rhs: Any, path: Path, c: Comparison) -> bool:
    if lhs is ABSENT:
        c.added.add(path)
    elif rhs is ABSENT:
        c.removed.add(path)
    elif not _equal(lhs, rhs):
        c.modified.add(path)
    return True


def _whole(v: Any, path: Path, names: tuple[str, ...], facts: TypeFacts, out: set[Path]) -> None:
    """A subtree that appeared (or disappeared) entirely: every node of it is in `out`."""
    out.add(path)
    if isinstance(v, dict) and v and not facts.atomic_map(names):
        for k, x in v.items():
            _whole(x, path + (("f", k),), names + (k,), facts, out)
    elif isinstance(v, list) and v:
        lt = facts.list_type(names)
        if lt.atomic:
            return
        counts: dict[PE, int] = {}
        pes = [item_element(item, lt, names) for item in v]
        for pe in pes:
            counts[pe] = counts.get(pe, 0) + 1
        for pe, item in zip(pes, v):
            if counts[pe] > 1 or lt.atomic_items:
                out.add(path + (pe,))
            else:
                _whole(item, path + (pe,), names, facts, out)


def _cmp(lhs: Any, rhs: Any, path: Path, names: tuple[str, ...], facts: TypeFacts, c: Comparison) -> None:
    if lhs is ABSENT:
        _whole(rhs, path, names, facts, c.added)
    elif rhs is ABSENT:
        _whole(lhs, path, names, facts, c.removed)
    elif not _cmp_value(lhs, rhs, path, names, facts, c):
        if lhs is ABSENT:
            c.added.add(path)
        elif rhs is ABSENT:
            c.removed.add(path)


def _cmp_value(lhs: Any, rhs: Any, path: Path, names: tuple[str, ...], facts: TypeFacts, c: Comparison) -> bool:
    """Compares one node; True when it was compared as a leaf."""
    if type(lhs) is type(rhs) and lhs is not ABSENT and lhs == rhs:
        return True  # equal subtrees (compared in C): nothing added, modified or removed
    if isinstance(lhs, dict) or isinstance(rhs, dict):
        if not (_is(lhs, dict) and _is(rhs, dict)) or facts.atomic_map(names) or (_empty(lhs) and _empty(rhs)):
            return _leaf(lhs, rhs, path, c)
        lm = lhs if isinstance(lhs, dict) else {}
        rm = rhs if isinstance(rhs, dict) else {}
        for k, v in lm.items():
            _cmp(v, rm.get(k, ABSENT), path + (("f", k),), names + (k,), facts, c)
        for k, v in rm.items():
            if k not in lm:
                _cmp(ABSENT, v, path + (("f", k),), names + (k,), facts, c)
        return False
    if isinstance(lhs, list) or isinstance(rhs, list):
        lt = facts.list_type(names)
        if not (_is(lhs, list) and _is(rhs, list)) or lt.atomic or (_empty(lhs) and _empty(rhs)):
            return _leaf(lhs, rhs, path, c)
        _cmp_list(lhs if isinstance(lhs, list) else [], rhs if isinstance(rhs, list) else [],
                  lt, path, names, facts, c)
        return False
    return _leaf(lhs, rhs, path, c)


def _index(items: list[Any], lt: ListType, names: tuple[str, ...], order: list[PE]) -> dict[PE, list[Any]]:
    out: dict[PE, list[Any]] = {}
    for item in items:
        pe = item_element(item, lt, names)
        if pe not in out:
            out[pe] = []
            order.append(pe)
        out[pe].append(item)
    return out


def _cmp_list(lhs: list[Any], rhs: list[Any], lt: ListType, path: Path, names: tuple[str, ...],
              facts: TypeFacts, c: Comparison) -> None:
    order: list[PE] = []
    lv = _index(lhs, lt, names, order)
    rv = _index(rhs, lt, names, order)
    item = (lambda a, b, p: _leaf(a, b, p, c)) if lt.atomic_items else (
        lambda a, b, p: _cmp(a, b, p, names, facts, c))
    for pe in dict.fromkeys(order):
        ll, rl, p = lv.get(pe, []), rv.get(pe, []), path + (pe,)
        if len(ll) <= 1 and len(rl) <= 1:
            item(ll[0] if ll else ABSENT, rl[0] if rl else ABSENT, p)
        elif len(ll) >= 2 and len(rl) >= 2:
            if ll != rl:
                c.modified.add(p)
        elif len(ll) >= 2:
            if rl:
                item(ABSENT, rl[0], p)
            c.removed.add(p)
        else:
            if ll:
                item(ll[0], ABSENT, p)
            c.added.add(p)
