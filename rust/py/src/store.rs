//! `NativeStore`: the store's operations for Python. Blocking calls release the GIL while they
//! wait; `submit_*` calls return at once and report through `Completions` (see completions.rs).
//!
//! Submitted writes wait in an outbox until `flush()` hands them to the Raft thread as one batch:
//! one channel message and one wake-up for all the writes an event-loop iteration produced, where
//! a wake-up per write cost the API server about a tenth of its time under write load. The asyncio
//! bridge flushes once per loop iteration; blocking writes and `close()` flush first, so writes
//! are proposed in the order they were submitted.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use kubecore_store::db::{Db, Done, Options};
use kubecore_store::error::Result as StoreResult;
use kubecore_store::kv::{KeyRange, OpResult};
use kubecore_store::mvcc::Applied;
use kubecore_store::request::{Command, RequestOp, TxnRequest};

use crate::completions::{Completions, Finished, Kind};
use crate::errors::to_py;
use crate::requests::{delete_req, key_arg, put_req, range_req, Compare, Op};
use crate::types::{kv_obj, lease_obj, op_obj, range_obj, txn_obj};
use crate::watch::NativeWatch;

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeStore {
    /// Shared with the watch cache (watchcache.rs), which feeds from this store's watches.
    pub(crate) db: Arc<Db>,
    completions: Arc<Completions>,
    outbox: Mutex<Vec<(Command, Done)>>,
}

fn txn_request(compare: Vec<PyRef<'_, Compare>>, success: Vec<PyRef<'_, Op>>, failure: Vec<PyRef<'_, Op>>) -> TxnRequest {
    TxnRequest {
        compare: compare.iter().map(|c| c.0.clone()).collect(),
        success: success.iter().map(|o| o.0.clone()).collect(),
        failure: failure.iter().map(|o| o.0.clone()).collect(),
    }
}

/// Turns a finished write into the Python value its caller expects.
fn result_obj(py: Python<'_>, kind: Kind, applied: Applied) -> PyResult<Py<PyAny>> {
    match (kind, applied) {
        (Kind::Put | Kind::Delete, Applied::Txn(mut t)) => match t.responses.pop() {
            Some(r @ (OpResult::Put { .. } | OpResult::Delete { .. })) => op_obj(py, &r),
            other => unreachable!("a single-op write answers with its op, got {other:?}"),
        },
        (Kind::Txn, Applied::Txn(t)) => Ok(txn_obj(py, &t)?.into_any()),
        (Kind::LeaseGrant, Applied::LeaseGranted { id, .. }) => Ok(id.into_pyobject(py)?.into_any().unbind()),
        (Kind::Compact | Kind::LeaseRevoke, _) => Ok(py.None()),
        (kind, other) => unreachable!("{kind:?} applied as {other:?}"),
    }
}

impl NativeStore {
    fn open_db(&self) -> PyResult<&Db> {
        if self.db.is_closed() {
            return Err(to_py(kubecore_store::error::StoreError::Closed));
        }
        Ok(&self.db)
    }

    /// Proposes and waits without the GIL (after the outbox, which is older).
    fn run(&self, py: Python<'_>, kind: Kind, cmd: Command) -> PyResult<Py<PyAny>> {
        self.send_outbox();
        let applied = py.detach(|| self.db.execute(cmd)).map_err(to_py)?;
        result_obj(py, kind, applied)
    }

    fn submit(&self, token: u64, (kind, cmd): (Kind, Command)) {
        let completions = self.completions.clone();
        let done: Done = Box::new(move |result: StoreResult<Applied>| completions.push(Finished { token, kind, result }));
        self.outbox.lock().unwrap_or_else(|p| p.into_inner()).push((cmd, done));
    }

    fn send_outbox(&self) -> usize {
        let items = std::mem::take(&mut *self.outbox.lock().unwrap_or_else(|p| p.into_inner()));
        let n = items.len();
        if n > 0 {
            self.db.submit_many(items);
        }
        n
    }
}

fn put_cmd(key: &Bound<'_, PyBytes>, value: &Bound<'_, PyBytes>, lease: i64, prev_kv: bool) -> PyResult<(Kind, Command)> {
    let op = RequestOp::Put(put_req(key, value, lease, prev_kv)?);
    Ok((Kind::Put, Command::Txn(TxnRequest::single(op))))
}

fn delete_cmd(key: &Bound<'_, PyBytes>, end: Option<&Bound<'_, PyBytes>>, prev_kv: bool) -> PyResult<(Kind, Command)> {
    let op = RequestOp::Delete(delete_req(key, end, prev_kv)?);
    Ok((Kind::Delete, Command::Txn(TxnRequest::single(op))))
}

#[pymethods]
impl NativeStore {
    /// Opens the store in `path` (None: in memory only).
    #[staticmethod]
    #[pyo3(signature = (path, *, fsync=true, max_request_bytes=1_572_864, snapshot_every=100_000, watch_buffer=8192))]
    fn open(py: Python<'_>, path: Option<PathBuf>, fsync: bool, max_request_bytes: usize, snapshot_every: u64, watch_buffer: usize) -> PyResult<Self> {
        let opts = Options { dir: path, fsync, max_request_bytes, snapshot_every, watch_buffer };
        let db = py.detach(|| Db::open(opts)).map_err(to_py)?;
        let completions = Completions::new().map_err(|e| PyOSError::new_err(format!("cannot create an eventfd: {e}")))?;
        Ok(Self { db: Arc::new(db), completions: Arc::new(completions), outbox: Mutex::new(Vec::new()) })
    }

    #[pyo3(signature = (key, *, revision=0))]
    fn get(&self, py: Python<'_>, key: &Bound<'_, PyBytes>, revision: i64) -> PyResult<Option<Py<crate::types::KeyValue>>> {
        let key = key_arg(key)?;
        let kv = self.db.get(&key, revision).map_err(to_py)?;
        kv.map(|kv| kv_obj(py, &kv)).transpose()
    }

    /// The key's current mod_revision, None when it does not exist (nothing else is copied).
    fn mod_revision(&self, key: &Bound<'_, PyBytes>) -> PyResult<Option<i64>> {
        self.db.mod_revision(key.as_bytes()).map_err(to_py)
    }

    /// (count, highest mod_revision) of the live keys in [start, end): equal signatures mean
    /// the same keys at the same versions.
    #[pyo3(signature = (start, end=None))]
    fn signature(&self, start: &Bound<'_, PyBytes>, end: Option<&Bound<'_, PyBytes>>) -> PyResult<(i64, i64)> {
        let range = KeyRange::new(key_arg(start)?, end.map(|e| e.as_bytes().to_vec()));
        self.db.signature(&range).map_err(to_py)
    }

    #[allow(clippy::too_many_arguments)] // the Python keyword arguments of one call
    #[pyo3(signature = (start, end=None, *, revision=0, limit=0, keys_only=false, count_only=false))]
    fn range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyBytes>,
        end: Option<&Bound<'_, PyBytes>>,
        revision: i64,
        limit: i64,
        keys_only: bool,
        count_only: bool,
    ) -> PyResult<Py<crate::types::RangeResult>> {
        let req = range_req(start, end, revision, limit, keys_only, count_only)?;
        let r = py.detach(|| self.db.range(&req)).map_err(to_py)?;
        range_obj(py, &r)
    }

    #[pyo3(signature = (key, value, *, lease=0, prev_kv=false))]
    fn put(&self, py: Python<'_>, key: &Bound<'_, PyBytes>, value: &Bound<'_, PyBytes>, lease: i64, prev_kv: bool) -> PyResult<Py<PyAny>> {
        let (kind, cmd) = put_cmd(key, value, lease, prev_kv)?;
        self.run(py, kind, cmd)
    }

    #[pyo3(signature = (key, end=None, *, prev_kv=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyBytes>, end: Option<&Bound<'_, PyBytes>>, prev_kv: bool) -> PyResult<Py<PyAny>> {
        let (kind, cmd) = delete_cmd(key, end, prev_kv)?;
        self.run(py, kind, cmd)
    }

    #[pyo3(signature = (compare, success, failure))]
    fn txn(&self, py: Python<'_>, compare: Vec<PyRef<'_, Compare>>, success: Vec<PyRef<'_, Op>>, failure: Vec<PyRef<'_, Op>>) -> PyResult<Py<PyAny>> {
        let t = txn_request(compare, success, failure);
        if t.is_read_only() {
            let r = py.detach(|| self.db.txn(t)).map_err(to_py)?;
            return Ok(txn_obj(py, &r)?.into_any());
        }
        self.run(py, Kind::Txn, Command::Txn(t))
    }

    fn compact(&self, py: Python<'_>, revision: i64) -> PyResult<()> {
        self.run(py, Kind::Compact, Command::Compact(revision)).map(drop)
    }

    #[pyo3(signature = (ttl, *, id=0))]
    fn lease_grant(&self, py: Python<'_>, ttl: i64, id: i64) -> PyResult<Py<PyAny>> {
        self.run(py, Kind::LeaseGrant, Command::LeaseGrant { id, ttl })
    }

    fn lease_revoke(&self, py: Python<'_>, id: i64) -> PyResult<()> {
        self.run(py, Kind::LeaseRevoke, Command::LeaseRevoke(id)).map(drop)
    }

    fn lease_keepalive(&self, id: i64) -> PyResult<i64> {
        self.db.lease_keepalive(id).map_err(to_py)
    }

    #[pyo3(signature = (id, *, keys=false))]
    fn lease_time_to_live(&self, py: Python<'_>, id: i64, keys: bool) -> PyResult<Py<crate::types::LeaseTTL>> {
        let info = self.db.lease_info(id, keys).map_err(to_py)?;
        lease_obj(py, &info)
    }

    fn leases(&self) -> PyResult<Vec<i64>> {
        self.db.leases().map_err(to_py)
    }

    // ---- asynchronous writes: results arrive through drain() --------------------------------

    #[pyo3(signature = (token, key, value, lease=0, prev_kv=false))]
    fn submit_put(&self, token: u64, key: &Bound<'_, PyBytes>, value: &Bound<'_, PyBytes>, lease: i64, prev_kv: bool) -> PyResult<()> {
        self.submit(token, put_cmd(key, value, lease, prev_kv)?);
        Ok(())
    }

    #[pyo3(signature = (token, key, end=None, prev_kv=false))]
    fn submit_delete(&self, token: u64, key: &Bound<'_, PyBytes>, end: Option<&Bound<'_, PyBytes>>, prev_kv: bool) -> PyResult<()> {
        self.submit(token, delete_cmd(key, end, prev_kv)?);
        Ok(())
    }

    /// Submits a transaction that writes (returns None; the result comes through drain()); a
    /// read-only one is answered at once and its TxnResult returned.
    fn submit_txn(&self, py: Python<'_>, token: u64, compare: Vec<PyRef<'_, Compare>>, success: Vec<PyRef<'_, Op>>, failure: Vec<PyRef<'_, Op>>) -> PyResult<Option<Py<PyAny>>> {
        let t = txn_request(compare, success, failure);
        if t.is_read_only() {
            let r = self.db.txn(t).map_err(to_py)?;
            return Ok(Some(txn_obj(py, &r)?.into_any()));
        }
        self.submit(token, (Kind::Txn, Command::Txn(t)));
        Ok(None)
    }

    fn submit_compact(&self, token: u64, revision: i64) {
        self.submit(token, (Kind::Compact, Command::Compact(revision)));
    }

    #[pyo3(signature = (token, ttl, id=0))]
    fn submit_lease_grant(&self, token: u64, ttl: i64, id: i64) {
        self.submit(token, (Kind::LeaseGrant, Command::LeaseGrant { id, ttl }));
    }

    fn submit_lease_revoke(&self, token: u64, id: i64) {
        self.submit(token, (Kind::LeaseRevoke, Command::LeaseRevoke(id)));
    }

    /// Proposes every submitted write not yet proposed, as one batch; returns how many.
    fn flush(&self) -> usize {
        self.send_outbox()
    }

    /// The eventfd that becomes readable when drain() has something.
    fn completion_fd(&self) -> i32 {
        self.completions.fd()
    }

    /// ([(token, ok, result_or_exception)], [watch ids with news]) since the last call.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Vec<u64>)> {
        let (done, watches) = self.completions.drain();
        let out = PyList::empty(py);
        for f in done {
            let item = match f.result {
                Ok(applied) => (f.token, true, result_obj(py, f.kind, applied)?),
                Err(e) => (f.token, false, to_py(e).into_value(py).into_any()),
            };
            out.append(PyTuple::new(py, [item.0.into_pyobject(py)?.into_any(), pyo3::types::PyBool::new(py, item.1).to_owned().into_any(), item.2.into_bound(py)])?)?;
        }
        Ok((out, watches))
    }

    // ---- watches ----------------------------------------------------------------------------

    /// A watch on [key, end) from `start_revision`; with `notify`, its news is announced through
    /// completion_fd()/drain() (for asyncio).
    #[pyo3(signature = (key, end=None, *, start_revision=0, prev_kv=false, notify=false))]
    fn watch(&self, key: &Bound<'_, PyBytes>, end: Option<&Bound<'_, PyBytes>>, start_revision: i64, prev_kv: bool, notify: bool) -> PyResult<NativeWatch> {
        let range = KeyRange::new(key_arg(key)?, end.map(|e| e.as_bytes().to_vec()));
        let notifier: Option<kubecore_store::watch::Notify> = notify.then(|| {
            let c = self.completions.clone();
            Arc::new(move |id| c.watch_ready(id)) as kubecore_store::watch::Notify
        });
        let w = self.db.watch(range, start_revision, notifier).map_err(to_py)?;
        Ok(NativeWatch { db: self.db.clone(), w, prev_kv })
    }

    #[getter]
    fn revision(&self) -> PyResult<i64> {
        self.open_db().map(Db::revision)
    }

    #[getter]
    fn compact_revision(&self) -> PyResult<i64> {
        self.open_db().map(Db::compact_revision)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.open_db()?.stats();
        let d = PyDict::new(py);
        d.set_item("revision", s.revision)?;
        d.set_item("compact_revision", s.compact_revision)?;
        d.set_item("keys", s.keys)?;
        d.set_item("versions", s.versions)?;
        d.set_item("leases", s.leases)?;
        d.set_item("fsyncs", s.fsyncs)?;
        d.set_item("applied_index", s.applied_index)?;
        d.set_item("snapshot_index", s.snapshot_index)?;
        d.set_item("proposals", s.proposals)?;
        Ok(d)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.send_outbox();
        py.detach(|| self.db.close()).map_err(to_py)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.db.is_closed()
    }
}
