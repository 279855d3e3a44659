//! kubecore._native: the only crate that depends on pyo3. It converts and delegates; the store's
//! logic lives in kubecore-store, kubecore-raft, kubecore-watchcache and kubecore-fieldpath.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

mod completions;
mod errors;
mod fieldpath;
mod objwalk;
mod requests;
mod sched;
mod store;
mod types;
mod watch;
mod watchcache;

/// The smallest key greater than every key that starts with `prefix` (b"\0" when none is).
#[pyfunction]
fn prefix_end<'py>(py: Python<'py>, prefix: &Bound<'py, PyBytes>) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &kubecore_store::kv::prefix_end(prefix.as_bytes()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    fieldpath::register(m)?;
    sched::register(m)?;
    m.add_class::<store::NativeStore>()?;
    m.add_class::<watch::NativeWatch>()?;
    m.add_class::<watchcache::NativeWatchCache>()?;
    m.add_class::<watchcache::NativeResourceCache>()?;
    m.add_class::<watchcache::NativeCacheWatcher>()?;
    m.add_class::<watchcache::NativeListBody>()?;
    m.add_class::<types::KeyValue>()?;
    m.add_class::<types::PutResult>()?;
    m.add_class::<types::RangeResult>()?;
    m.add_class::<types::DeleteResult>()?;
    m.add_class::<types::TxnResult>()?;
    m.add_class::<types::LeaseTTL>()?;
    m.add_class::<types::Event>()?;
    m.add_class::<requests::Compare>()?;
    m.add_class::<requests::Op>()?;
    m.add_function(wrap_pyfunction!(prefix_end, m)?)?;
    m.add_function(wrap_pyfunction!(objwalk::shape_key, m)?)?;
    m.add_class::<objwalk::NativeFieldModel>()?;
    Ok(())
}
