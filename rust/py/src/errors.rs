//! The one map from the store's typed errors to Python exceptions.

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use kubecore_store::error::StoreError as E;

pyo3::create_exception!(kubecore._native, StoreError, PyException, "Base class of every store error.");
pyo3::create_exception!(kubecore._native, CompactedError, StoreError, "The requested revision has been compacted; see `compact_revision`.");
pyo3::create_exception!(kubecore._native, FutureRevisionError, StoreError, "The requested revision is newer than the store's; see `current_revision`.");
pyo3::create_exception!(kubecore._native, LeaseNotFoundError, StoreError, "No lease with this id exists (never granted, revoked or expired).");
pyo3::create_exception!(kubecore._native, LeaseExistsError, StoreError, "A lease with this id already exists.");
pyo3::create_exception!(kubecore._native, StoreClosedError, StoreError, "The store (or the watch) has been closed.");
pyo3::create_exception!(kubecore._native, CorruptionError, StoreError, "The data directory is damaged; the message names the file and offset.");
pyo3::create_exception!(kubecore._native, LockedError, StoreError, "The data directory is held by another open store.");
pyo3::create_exception!(kubecore._native, RequestTooLargeError, StoreError, "The request is larger than max_request_bytes.");
pyo3::create_exception!(kubecore._native, StoreIOError, StoreError, "An I/O error in the data directory.");

/// Converts a store error into the matching Python exception (with its attributes set).
pub fn to_py(e: E) -> PyErr {
    let msg = e.to_string();
    match e {
        E::Compacted { compact_revision } => with_attr(CompactedError::new_err(msg), "compact_revision", compact_revision),
        E::FutureRevision { current_revision } => {
            with_attr(FutureRevisionError::new_err(msg), "current_revision", current_revision)
        }
        E::LeaseNotFound(id) => with_attr(LeaseNotFoundError::new_err(msg), "lease_id", id),
        E::LeaseExists(id) => with_attr(LeaseExistsError::new_err(msg), "lease_id", id),
        E::Closed => StoreClosedError::new_err(msg),
        E::Corruption(_) => CorruptionError::new_err(msg),
        E::Locked(_) => LockedError::new_err(msg),
        E::RequestTooLarge { size, limit } => {
            with_attr(with_attr(RequestTooLargeError::new_err(msg), "size", size as i64), "limit", limit as i64)
        }
        E::InvalidArgument(_) => PyValueError::new_err(msg),
        E::Io(_) => StoreIOError::new_err(msg),
    }
}

fn with_attr(err: PyErr, name: &str, value: i64) -> PyErr {
    Python::attach(|py| {
        let _ = err.value(py).setattr(name, value);
    });
    err
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("CompactedError", py.get_type::<CompactedError>())?;
    m.add("FutureRevisionError", py.get_type::<FutureRevisionError>())?;
    m.add("LeaseNotFoundError", py.get_type::<LeaseNotFoundError>())?;
    m.add("LeaseExistsError", py.get_type::<LeaseExistsError>())?;
    m.add("StoreClosedError", py.get_type::<StoreClosedError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("RequestTooLargeError", py.get_type::<RequestTooLargeError>())?;
    m.add("StoreIOError", py.get_type::<StoreIOError>())?;
    Ok(())
}
