//! `Compare` and `Op`: transaction parts built in Python, held as the store's request values.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use kubecore_store::request::{Compare as RsCompare, CompareOp, CompareTarget, DeleteRequest, PutRequest, RangeRequest, RequestOp};

use crate::errors::to_py;

/// A key argument: bytes, not empty.
pub fn key_arg(key: &Bound<'_, PyBytes>) -> PyResult<Vec<u8>> {
    let k = key.as_bytes();
    if k.is_empty() {
        return Err(PyValueError::new_err("key must not be empty"));
    }
    Ok(k.to_vec())
}

pub fn end_arg(end: Option<&Bound<'_, PyBytes>>) -> Option<serde_bytes::ByteBuf> {
    end.map(|e| serde_bytes::ByteBuf::from(e.as_bytes().to_vec()))
}

pub fn put_req(key: &Bound<'_, PyBytes>, value: &Bound<'_, PyBytes>, lease: i64, prev_kv: bool) -> PyResult<PutRequest> {
    Ok(PutRequest { key: key_arg(key)?, value: value.as_bytes().to_vec(), lease, prev_kv })
}

pub fn delete_req(key: &Bound<'_, PyBytes>, end: Option<&Bound<'_, PyBytes>>, prev_kv: bool) -> PyResult<DeleteRequest> {
    Ok(DeleteRequest { key: key_arg(key)?, end: end_arg(end), prev_kv })
}

/// A range request; `limit <= 0` means no limit, as in etcd.
pub fn range_req(
    key: &Bound<'_, PyBytes>,
    end: Option<&Bound<'_, PyBytes>>,
    revision: i64,
    limit: i64,
    keys_only: bool,
    count_only: bool,
) -> PyResult<RangeRequest> {
    Ok(RangeRequest { key: key_arg(key)?, end: end_arg(end), revision, limit, keys_only, count_only })
}

#[pyclass(frozen, name = "Compare", module = "kubecore.store")]
pub struct Compare(pub RsCompare);

fn compare(key: &Bound<'_, PyBytes>, op: &str, target: CompareTarget) -> PyResult<Compare> {
    Ok(Compare(RsCompare { key: key_arg(key)?, op: CompareOp::parse(op).map_err(to_py)?, target }))
}

#[pymethods]
impl Compare {
    #[staticmethod]
    fn value(key: &Bound<'_, PyBytes>, op: &str, target: &Bound<'_, PyBytes>) -> PyResult<Self> {
        compare(key, op, CompareTarget::Value(target.as_bytes().to_vec()))
    }
    #[staticmethod]
    fn version(key: &Bound<'_, PyBytes>, op: &str, target: i64) -> PyResult<Self> {
        compare(key, op, CompareTarget::Version(target))
    }
    #[staticmethod]
    fn create_revision(key: &Bound<'_, PyBytes>, op: &str, target: i64) -> PyResult<Self> {
        compare(key, op, CompareTarget::CreateRevision(target))
    }
    #[staticmethod]
    fn mod_revision(key: &Bound<'_, PyBytes>, op: &str, target: i64) -> PyResult<Self> {
        compare(key, op, CompareTarget::ModRevision(target))
    }
    #[staticmethod]
    fn lease(key: &Bound<'_, PyBytes>, op: &str, target: i64) -> PyResult<Self> {
        compare(key, op, CompareTarget::Lease(target))
    }
    fn __repr__(&self) -> String {
        format!("Compare({:?})", self.0)
    }
}

#[pyclass(frozen, name = "Op", module = "kubecore.store")]
pub struct Op(pub RequestOp);

#[pymethods]
impl Op {
    #[staticmethod]
    #[pyo3(signature = (key, value, *, lease=0, prev_kv=false))]
    fn put(key: &Bound<'_, PyBytes>, value: &Bound<'_, PyBytes>, lease: i64, prev_kv: bool) -> PyResult<Self> {
        Ok(Self(RequestOp::Put(put_req(key, value, lease, prev_kv)?)))
    }
    #[staticmethod]
    #[pyo3(signature = (key, *, revision=0))]
    fn get(key: &Bound<'_, PyBytes>, revision: i64) -> PyResult<Self> {
        Ok(Self(RequestOp::Range(range_req(key, None, revision, 0, false, false)?)))
    }
    #[staticmethod]
    #[pyo3(signature = (start, end=None, *, revision=0, limit=0, keys_only=false, count_only=false))]
    fn range(
        start: &Bound<'_, PyBytes>,
        end: Option<&Bound<'_, PyBytes>>,
        revision: i64,
        limit: i64,
        keys_only: bool,
        count_only: bool,
    ) -> PyResult<Self> {
        Ok(Self(RequestOp::Range(range_req(start, end, revision, limit, keys_only, count_only)?)))
    }
    #[staticmethod]
    #[pyo3(signature = (key, end=None, *, prev_kv=false))]
    fn delete(key: &Bound<'_, PyBytes>, end: Option<&Bound<'_, PyBytes>>, prev_kv: bool) -> PyResult<Self> {
        Ok(Self(RequestOp::Delete(delete_req(key, end, prev_kv)?)))
    }
    fn __repr__(&self) -> String {
        format!("Op({:?})", self.0)
    }
}
