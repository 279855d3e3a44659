//! Result and event classes handed to Python. Each wraps the store's own value and builds the
//! Python objects (bytes, lists) when an attribute is read.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use kubecore_store::kv::{self, EventType, OpResult, RangeResult as RsRange, TxnResult as RsTxn};

#[pyclass(frozen, eq, hash, name = "KeyValue", module = "kubecore.store")]
#[derive(PartialEq, Eq, Hash)]
pub struct KeyValue(pub kv::KeyValue);

#[pymethods]
impl KeyValue {
    #[new]
    #[pyo3(signature = (key, value, create_revision, mod_revision, version, lease=0))]
    fn new(key: &[u8], value: &[u8], create_revision: i64, mod_revision: i64, version: i64, lease: i64) -> Self {
        Self(kv::KeyValue { key: key.into(), value: value.into(), create_revision, mod_revision, version, lease })
    }
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.key)
    }
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.0.value)
    }
    #[getter]
    fn create_revision(&self) -> i64 {
        self.0.create_revision
    }
    #[getter]
    fn mod_revision(&self) -> i64 {
        self.0.mod_revision
    }
    #[getter]
    fn version(&self) -> i64 {
        self.0.version
    }
    #[getter]
    fn lease(&self) -> i64 {
        self.0.lease
    }
    fn __repr__(&self) -> String {
        let kv = &self.0;
        format!(
            "KeyValue(key={}, value={}, create_revision={}, mod_revision={}, version={}, lease={})",
            bytes_repr(&kv.key), bytes_repr(&kv.value), kv.create_revision, kv.mod_revision, kv.version, kv.lease
        )
    }
}

fn bytes_repr(b: &[u8]) -> String {
    const SHOWN: usize = 64;
    let mut s = String::from("b'");
    for &c in b.iter().take(SHOWN) {
        match c {
            b'\'' => s.push_str("\\'"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('\'');
    if b.len() > SHOWN {
        s.push_str(&format!("...({} bytes)", b.len()));
    }
    s
}

pub fn kv_obj(py: Python<'_>, kv: &kv::KeyValue) -> PyResult<Py<KeyValue>> {
    Py::new(py, KeyValue(kv.clone()))
}

fn opt_kv(py: Python<'_>, kv: Option<&kv::KeyValue>) -> PyResult<Option<Py<KeyValue>>> {
    kv.map(|kv| kv_obj(py, kv)).transpose()
}

fn kv_list<'py>(py: Python<'py>, kvs: &[kv::KeyValue]) -> PyResult<Py<PyList>> {
    let items = kvs.iter().map(|kv| kv_obj(py, kv)).collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.unbind())
}

#[pyclass(frozen, get_all, name = "PutResult", module = "kubecore.store")]
pub struct PutResult {
    pub revision: i64,
    pub prev_kv: Option<Py<KeyValue>>,
}

#[pymethods]
impl PutResult {
    #[new]
    #[pyo3(signature = (revision, prev_kv=None))]
    fn new(revision: i64, prev_kv: Option<Py<KeyValue>>) -> Self {
        Self { revision, prev_kv }
    }
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("PutResult(revision={}, prev_kv={})", self.revision, repr_opt(py, &self.prev_kv)?))
    }
}

#[pyclass(frozen, get_all, name = "RangeResult", module = "kubecore.store")]
pub struct RangeResult {
    pub kvs: Py<PyList>,
    pub more: bool,
    pub count: i64,
    pub revision: i64,
}

#[pymethods]
impl RangeResult {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "RangeResult(kvs=<{} items>, more={}, count={}, revision={})",
            self.kvs.bind(py).len(), if self.more { "True" } else { "False" }, self.count, self.revision
        ))
    }
}

#[pyclass(frozen, get_all, name = "DeleteResult", module = "kubecore.store")]
pub struct DeleteResult {
    pub deleted: i64,
    pub revision: i64,
    pub prev_kvs: Py<PyList>,
}

#[pymethods]
impl DeleteResult {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("DeleteResult(deleted={}, revision={}, prev_kvs=<{} items>)", self.deleted, self.revision, self.prev_kvs.bind(py).len()))
    }
}

#[pyclass(frozen, get_all, name = "TxnResult", module = "kubecore.store")]
pub struct TxnResult {
    pub succeeded: bool,
    pub revision: i64,
    pub responses: Py<PyList>,
}

#[pymethods]
impl TxnResult {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TxnResult(succeeded={}, revision={}, responses={})",
            if self.succeeded { "True" } else { "False" }, self.revision, self.responses.bind(py).repr()?
        ))
    }
}

#[pyclass(frozen, get_all, name = "LeaseTTL", module = "kubecore.store")]
pub struct LeaseTTL {
    pub id: i64,
    pub ttl: i64,
    pub granted_ttl: i64,
    pub keys: Py<PyList>,
}

#[pymethods]
impl LeaseTTL {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("LeaseTTL(id={}, ttl={}, granted_ttl={}, keys={})", self.id, self.ttl, self.granted_ttl, self.keys.bind(py).repr()?))
    }
}

fn repr_opt<T>(py: Python<'_>, o: &Option<Py<T>>) -> PyResult<String> {
    match o {
        None => Ok("None".into()),
        Some(v) => Ok(v.bind(py).as_any().repr()?.to_string()),
    }
}

/// One change seen by a watch. `prev_kv` is filled only for watches that asked for it.
#[pyclass(frozen, name = "Event", module = "kubecore.store")]
pub struct Event {
    pub ev: Arc<kv::Event>,
    pub with_prev: bool,
}

#[pymethods]
impl Event {
    #[getter(r#type)]
    fn kind(&self) -> &'static str {
        match self.ev.kind {
            EventType::Put => "PUT",
            EventType::Delete => "DELETE",
        }
    }
    #[getter]
    fn kv(&self, py: Python<'_>) -> PyResult<Py<KeyValue>> {
        kv_obj(py, &self.ev.kv)
    }
    #[getter]
    fn prev_kv(&self, py: Python<'_>) -> PyResult<Option<Py<KeyValue>>> {
        opt_kv(py, self.ev.prev_kv.as_ref().filter(|_| self.with_prev))
    }
    /// The revision of the change (kv.mod_revision), without building the key-value.
    #[getter]
    fn revision(&self) -> i64 {
        self.ev.kv.mod_revision
    }
    fn __repr__(&self) -> String {
        format!("Event(type={:?}, key={}, revision={})", self.kind(), bytes_repr(&self.ev.kv.key), self.ev.kv.mod_revision)
    }
}

pub fn range_obj(py: Python<'_>, r: &RsRange) -> PyResult<Py<RangeResult>> {
    Py::new(py, RangeResult { kvs: kv_list(py, &r.kvs)?, more: r.more, count: r.count, revision: r.revision })
}

pub fn op_obj(py: Python<'_>, r: &OpResult) -> PyResult<Py<PyAny>> {
    Ok(match r {
        OpResult::Put { revision, prev_kv } => {
            Py::new(py, PutResult { revision: *revision, prev_kv: opt_kv(py, prev_kv.as_ref())? })?.into_any()
        }
        OpResult::Range(rr) => range_obj(py, rr)?.into_any(),
        OpResult::Delete { revision, deleted, prev_kvs } => Py::new(
            py,
            DeleteResult { deleted: *deleted, revision: *revision, prev_kvs: kv_list(py, prev_kvs)? },
        )?
        .into_any(),
    })
}

pub fn txn_obj(py: Python<'_>, t: &RsTxn) -> PyResult<Py<TxnResult>> {
    let responses = t.responses.iter().map(|r| op_obj(py, r)).collect::<PyResult<Vec<_>>>()?;
    Py::new(py, TxnResult { succeeded: t.succeeded, revision: t.revision, responses: PyList::new(py, responses)?.unbind() })
}

pub fn lease_obj(py: Python<'_>, l: &kubecore_store::db::LeaseInfo) -> PyResult<Py<LeaseTTL>> {
    let keys = l.keys.iter().map(|k| PyBytes::new(py, k)).collect::<Vec<_>>();
    Py::new(py, LeaseTTL { id: l.id, ttl: l.ttl, granted_ttl: l.granted_ttl, keys: PyList::new(py, keys)?.unbind() })
}
