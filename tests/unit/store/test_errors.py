"""Bad input changes nothing; every expected failure is a typed error."""

from __future__ import annotations

import pytest

from kubecore.store import (
    CompactedError,
    Compare,
    CorruptionError,
    FutureRevisionError,
    LeaseNotFoundError,
    LockedError,
    Op,
    RequestTooLargeError,
    Store,
    StoreClosedError,
    StoreError,
)


@pytest.mark.parametrize(
    "cls",
    [
        CompactedError,
        FutureRevisionError,
        LeaseNotFoundError,
        StoreClosedError,
        CorruptionError,
        LockedError,
        RequestTooLargeError,
    ],
)
def test_error_hierarchy(cls: type) -> None:
    assert issubclass(cls, StoreError)
    assert issubclass(StoreError, Exception)
    assert not issubclass(cls, (TypeError, ValueError))


@pytest.mark.parametrize("bad", ["str", 1, None, 1.5, ["list"]])
def test_non_bytes_key_or_value_is_type_error(store: Store, bad) -> None:
    rev = store.put(b"k", b"v").revision
    with pytest.raises(TypeError):
        store.put(bad, b"v")
    with pytest.raises(TypeError):
        store.put(b"k", bad)
    with pytest.raises(TypeError):
        store.get(bad)
    with pytest.raises(TypeError):
        store.range(bad, b"z")
    with pytest.raises(TypeError):
        store.delete(bad)
    assert store.revision == rev
    assert store.get(b"k").value == b"v"  # type: ignore[union-attr]


def test_empty_key_is_value_error(store: Store) -> None:
    rev = store.revision
    with pytest.raises(ValueError):
        store.put(b"", b"v")
    with pytest.raises(ValueError):
        store.delete(b"")
    with pytest.raises(ValueError):
        store.get(b"")
    with pytest.raises(ValueError):
        store.txn(compare=[], success=[Op.put(b"", b"v")], failure=[])
    assert store.revision == rev
    assert store.range(b"\0", b"\0").count == 0


def test_bad_txn_input_changes_nothing(store: Store) -> None:
    rev = store.revision
    with pytest.raises(TypeError):
        store.txn(compare=[], success=[Op.put(b"ok", b"v"), "not an op"], failure=[])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        store.txn(compare=[], success=[Op.put(b"ok", b"v"), Op.put(b"", b"v")], failure=[])
    assert store.revision == rev
    assert store.get(b"ok") is None


def test_bad_compare_operator() -> None:
    with pytest.raises(ValueError):
        Compare.version(b"k", "<=", 1)
    with pytest.raises(ValueError):
        Compare.mod_revision(b"k", "", 1)


def test_compare_operator_is_one_of_the_four() -> None:
    """The spec's operators are exactly "=", "!=", "<", ">": no aliases such as "=="."""
    with pytest.raises(ValueError):
        Compare.value(b"k", "==", b"x")


def test_request_too_large(tmp_path) -> None:
    limit = 64 * 1024
    with Store.memory(max_request_bytes=limit) as s:
        rev = s.put(b"small", b"x" * 1000).revision
        with pytest.raises(RequestTooLargeError):
            s.put(b"big", b"x" * (limit + 1))
        with pytest.raises(RequestTooLargeError):
            # each op is small, the request is not
            s.txn(compare=[], success=[Op.put(b"t%d" % i, b"y" * 10_000) for i in range(10)], failure=[])
        assert s.revision == rev
        assert s.get(b"big") is None
        assert s.range(b"t", b"u").count == 0
        s.put(b"fits", b"z" * (limit // 2))
        assert s.revision == rev + 1


def test_default_request_limit_is_1_5_mib(store: Store) -> None:
    rev = store.put(b"k", b"x" * (1024 * 1024)).revision  # 1 MiB fits
    with pytest.raises(RequestTooLargeError):
        store.put(b"k", b"x" * (2 * 1024 * 1024))
    assert store.revision == rev


def test_disk_store_request_too_large(tmp_path) -> None:
    with Store.open(str(tmp_path / "d"), max_request_bytes=4096) as s:
        rev = s.revision
        with pytest.raises(RequestTooLargeError):
            s.put(b"k", b"x" * 5000)
        assert s.revision == rev
    with Store.open(str(tmp_path / "d")) as s:
        assert s.revision == rev and s.get(b"k") is None


def test_closed_store_raises(tmp_path) -> None:
    s = Store.memory()
    s.put(b"k", b"v")
    s.close()
    s.close()  # idempotent
    for call in (
        lambda: s.put(b"k", b"v"),
        lambda: s.get(b"k"),
        lambda: s.range(b"a", b"z"),
        lambda: s.delete(b"k"),
        lambda: s.txn(compare=[], success=[], failure=[]),
        lambda: s.compact(1),
        lambda: s.lease_grant(10),
        lambda: s.watch(b"k"),
        lambda: s.leases(),
    ):
        with pytest.raises(StoreClosedError):
            call()


def test_closed_store_revision_property_raises() -> None:
    s = Store.memory()
    s.close()
    with pytest.raises(StoreClosedError):
        s.revision  # noqa: B018 - the property read is the call under test


def test_context_manager_closes(tmp_path) -> None:
    with Store.open(str(tmp_path / "d")) as s:
        s.put(b"k", b"v")
    with pytest.raises(StoreClosedError):
        s.get(b"k")
    # the lock is released: it can be opened again
    with Store.open(str(tmp_path / "d")) as s2:
        assert s2.get(b"k").value == b"v"  # type: ignore[union-attr]


def test_close_ends_open_watches(store: Store, bounded) -> None:
    w = store.watch(b"k")
    store.close()
    with pytest.raises((StopIteration, StoreClosedError)):
        bounded(lambda: next(w), what="next() on a watch of a closed store")


def test_locked_in_same_process(tmp_path) -> None:
    path = str(tmp_path / "d")
    with Store.open(path) as s:
        rev = s.put(b"k", b"v").revision
        with pytest.raises(LockedError):
            Store.open(path)
        s.put(b"k2", b"v")  # the first store is unaffected
        assert s.revision == rev + 1
