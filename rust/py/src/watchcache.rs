//! The watch cache (kubecore-watchcache) for Python: `NativeWatchCache` (the caches of one
//! store, fed by one Rust thread), `NativeResourceCache` (one resource) and `NativeCacheWatcher`
//! (one WATCH). A LIST answers with one bytes object (the whole body), a poll with every pending
//! frame joined; watchers with news are announced through an eventfd (completions.rs), so
//! waiting costs no thread per watcher.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use kubecore_store::error::StoreError;
use kubecore_watchcache::{End, Feed, Feeder, FieldSpec, Fmt, ListBody, ListError, ListRequest, Options, Polled, Seg, Spec, Start, WatchError, Watcher};

use crate::completions::Completions;
use crate::errors::to_py;
use crate::store::NativeStore;

/// One step of a field path from Python: an object member (str) or a list index (int).
#[derive(FromPyObject)]
enum PySeg {
    Index(usize),
    Key(String),
}

type PyFieldSpec = (String, String, Vec<Vec<PySeg>>);
type PyLabelReq = (String, String, Vec<String>);
type PyFieldTerm = (String, String, String);

fn field_spec((label, fmt, paths): PyFieldSpec) -> PyResult<FieldSpec> {
    let fmt = match fmt.as_str() {
        "s" => Fmt::Str,
        "i" => Fmt::Int,
        "b" => Fmt::Bool,
        "s*" => Fmt::FirstStr,
        other => return Err(PyValueError::new_err(format!("unknown field format {other:?}: use \"s\", \"s*\", \"i\" or \"b\""))),
    };
    let conv = |s: PySeg| match s {
        PySeg::Index(i) => Seg::Index(i),
        PySeg::Key(k) => Seg::Key(k),
    };
    let paths = paths.into_iter().map(|p| p.into_iter().map(conv).collect()).collect();
    Ok(FieldSpec { label, fmt, paths })
}

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeWatchCache {
    feeder: Arc<Feeder>,
    completions: Arc<Completions>,
    opts: Options,
}

#[pymethods]
impl NativeWatchCache {
    #[new]
    #[pyo3(signature = (store, *, ring_capacity=8192, watcher_buffer=10_000, max_snapshots=16))]
    fn new(store: PyRef<'_, NativeStore>, ring_capacity: usize, watcher_buffer: usize, max_snapshots: usize) -> PyResult<Self> {
        let completions = Completions::new().map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cannot create an eventfd: {e}")))?;
        let opts = Options { ring_capacity, watcher_buffer, max_snapshots };
        Ok(Self { feeder: Arc::new(Feeder::new(store.db.clone())), completions: Arc::new(completions), opts })
    }

    /// Lists `prefix` from the store and starts caching it. `fields`: the kind's selectable
    /// fields as (label, "s" | "i" | "b", [path, ...]), a path being a list of str | int.
    #[pyo3(signature = (prefix, *, kind, api_version, fields))]
    fn resource(&self, py: Python<'_>, prefix: Vec<u8>, kind: String, api_version: String, fields: Vec<PyFieldSpec>) -> PyResult<NativeResourceCache> {
        let fields = fields.into_iter().map(field_spec).collect::<PyResult<Vec<_>>>()?;
        let spec = Spec { prefix, kind, api_version, fields };
        let opts = self.opts.clone();
        let feed = py.detach(|| self.feeder.cache(spec, opts)).map_err(to_py)?;
        Ok(NativeResourceCache { feed, feeder: self.feeder.clone(), completions: self.completions.clone() })
    }

    /// The eventfd that becomes readable when drain() has something.
    fn completion_fd(&self) -> i32 {
        self.completions.fd()
    }

    /// Ids of the watchers with news (or that ended) since the last call.
    fn drain(&self) -> Vec<u64> {
        self.completions.drain().1
    }

    /// Stops the feeding thread; every watcher ends. Idempotent.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.feeder.close());
    }
}

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeResourceCache {
    feed: Arc<Feed>,
    feeder: Arc<Feeder>,
    completions: Arc<Completions>,
}

fn selector(feed: &Feed, prefix: &[u8], labels: &[PyLabelReq], fields: &[PyFieldTerm]) -> PyResult<kubecore_watchcache::Selector> {
    feed.cache.selector(prefix, labels, fields).map_err(PyValueError::new_err)
}

#[pymethods]
impl NativeResourceCache {
    /// Every change under the prefix up to this revision has been applied.
    #[getter]
    fn revision(&self) -> i64 {
        self.feed.cache.revision()
    }

    /// The oldest start revision a watch can be served from.
    #[getter]
    fn oldest_revision(&self) -> i64 {
        self.feed.cache.floor()
    }

    fn __len__(&self) -> usize {
        self.feed.cache.len()
    }

    /// Catches up with the store's current revision (a consistent read); returns the revision.
    fn sync(&self, py: Python<'_>) -> PyResult<i64> {
        py.detach(|| self.feed.sync()).map_err(to_py)
    }

    /// One LIST page as the whole response body (`head` + list metadata + items), and its
    /// revision; None when the continue token's snapshot is no longer kept.
    #[pyo3(signature = (prefix, *, head, labels=Vec::new(), fields=Vec::new(), limit=0, continue_revision=0, continue_key=None))]
    #[allow(clippy::too_many_arguments)]
    fn list<'py>(
        &self,
        py: Python<'py>,
        prefix: &[u8],
        head: &[u8],
        labels: Vec<PyLabelReq>,
        fields: Vec<PyFieldTerm>,
        limit: usize,
        continue_revision: i64,
        continue_key: Option<Vec<u8>>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, i64)>> {
        let sel = selector(&self.feed, prefix, &labels, &fields)?;
        let continue_from = continue_key.map(|k| (continue_revision, k));
        let req = ListRequest { selector: &sel, limit, continue_from, head };
        match py.detach(|| self.feed.cache.list(&req)) {
            Ok(page) => Ok(Some((PyBytes::new(py, &page.body), page.revision))),
            Err(ListError::SnapshotGone) => Ok(None),
        }
    }

    /// The same page as `list`, as a body to be taken in chunks (a big LIST goes to the socket
    /// while the rest is assembled); None when the continue token's snapshot is no longer kept.
    #[pyo3(signature = (prefix, *, head, labels=Vec::new(), fields=Vec::new(), limit=0, continue_revision=0, continue_key=None))]
    #[allow(clippy::too_many_arguments)]
    fn list_body(
        &self,
        py: Python<'_>,
        prefix: &[u8],
        head: &[u8],
        labels: Vec<PyLabelReq>,
        fields: Vec<PyFieldTerm>,
        limit: usize,
        continue_revision: i64,
        continue_key: Option<Vec<u8>>,
    ) -> PyResult<Option<NativeListBody>> {
        let sel = selector(&self.feed, prefix, &labels, &fields)?;
        let continue_from = continue_key.map(|k| (continue_revision, k));
        let req = ListRequest { selector: &sel, limit, continue_from, head };
        match py.detach(|| self.feed.cache.list_body(&req)) {
            Ok(body) => Ok(Some(NativeListBody { body: Mutex::new(body) })),
            Err(ListError::SnapshotGone) => Ok(None),
        }
    }

    /// A watcher: after `start_revision`, or (initial=True) the current objects as ADDED first,
    /// then an initial-events-end BOOKMARK if asked. None when `start_revision` is older than
    /// the ring (`oldest_revision`).
    #[pyo3(signature = (prefix, *, labels=Vec::new(), fields=Vec::new(), start_revision=0, initial=false, initial_end_bookmark=false))]
    #[allow(clippy::too_many_arguments)]
    fn watch(
        &self,
        prefix: &[u8],
        labels: Vec<PyLabelReq>,
        fields: Vec<PyFieldTerm>,
        start_revision: i64,
        initial: bool,
        initial_end_bookmark: bool,
    ) -> PyResult<Option<NativeCacheWatcher>> {
        let sel = selector(&self.feed, prefix, &labels, &fields)?;
        let start = if initial { Start::Current { end_bookmark: initial_end_bookmark } } else { Start::After(start_revision) };
        let c = self.completions.clone();
        let notify: kubecore_watchcache::Notify = Arc::new(move |id| c.watch_ready(id));
        match self.feed.cache.watch(self.feeder.next_id(), sel, start, Some(notify)) {
            Ok(w) => Ok(Some(NativeCacheWatcher { w, feed: self.feed.clone() })),
            Err(WatchError::TooOld { .. }) => Ok(None),
            Err(WatchError::Closed) => Err(to_py(StoreError::Closed)),
        }
    }
}

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeCacheWatcher {
    w: Arc<Watcher>,
    feed: Arc<Feed>,
}

#[pymethods]
impl NativeCacheWatcher {
    #[getter]
    fn id(&self) -> u64 {
        self.w.id
    }

    /// Pending frames joined (about `max_bytes`), b"" when there are none (wait for the id to
    /// come out of drain()), None once the watcher has ended (see `end_reason`).
    #[pyo3(signature = (max_bytes=1_048_576))]
    fn poll<'py>(&self, py: Python<'py>, max_bytes: usize) -> Option<Bound<'py, PyBytes>> {
        match py.detach(|| self.w.poll(max_bytes)) {
            Polled::Frames(b) => Some(PyBytes::new(py, &b)),
            Polled::Empty => Some(PyBytes::new(py, b"")),
            Polled::Ended(_) => None,
        }
    }

    /// Why the watcher ended ("cancelled", "too_slow", "closed", "reset"), or None.
    #[getter]
    fn end_reason(&self) -> Option<&'static str> {
        self.w.ended().map(|e| match e {
            End::Cancelled => "cancelled",
            End::TooSlow => "too_slow",
            End::Closed => "closed",
            End::Reset => "reset",
        })
    }

    /// The revision a BOOKMARK may carry now (None while something is pending).
    fn progress(&self) -> Option<i64> {
        self.feed.cache.progress(&self.w)
    }

    fn cancel(&self) {
        self.feed.cache.cancel(&self.w);
    }
}


/// One LIST body handed out in chunks (`next_chunk`); `len(body)` is the whole length.
#[pyclass(module = "kubecore._native")]
pub struct NativeListBody {
    body: Mutex<ListBody>,
}

#[pymethods]
impl NativeListBody {
    #[getter]
    fn revision(&self) -> i64 {
        self.body.lock().map(|b| b.revision).unwrap_or(0)
    }

    fn __len__(&self) -> usize {
        self.body.lock().map(|b| b.len).unwrap_or(0)
    }

    /// The next part of the body (about `max_bytes`, at least one object); None at the end.
    fn next_chunk<'py>(&self, py: Python<'py>, max_bytes: usize) -> Option<Bound<'py, PyBytes>> {
        let chunk = py.detach(|| self.body.lock().ok().and_then(|mut b| b.next_chunk(max_bytes)));
        chunk.map(|c| PyBytes::new(py, &c))
    }
}
