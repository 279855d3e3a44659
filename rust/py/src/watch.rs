//! `NativeWatch`: a handle on one store watcher, polled from Python with the GIL released.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use kubecore_store::db::Db;
use kubecore_store::watch::{WatchEnd, Watcher};

use crate::errors::to_py;
use crate::types::Event;

/// Longest stretch spent waiting without the GIL before checking for KeyboardInterrupt.
const SLICE: Duration = Duration::from_millis(100);

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeWatch {
    pub db: Arc<Db>,
    pub w: Arc<Watcher>,
    pub prev_kv: bool,
}

#[pymethods]
impl NativeWatch {
    #[getter]
    fn id(&self) -> u64 {
        self.w.id
    }

    /// Up to `max_events` events; waits up to `timeout` seconds (None: until there are some).
    /// Returns [] on timeout and None once the watch is cancelled or its store closed; raises
    /// CompactedError when the events it still had to deliver were compacted away.
    #[pyo3(signature = (max_events=1024, timeout=None))]
    fn poll(&self, py: Python<'_>, max_events: usize, timeout: Option<f64>) -> PyResult<Option<Vec<Py<Event>>>> {
        let deadline = timeout.map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        loop {
            let slice = match deadline {
                None => SLICE,
                Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
            };
            let got = py.detach(|| self.db.poll(&self.w, max_events, slice));
            match got {
                Ok(events) if !events.is_empty() => {
                    let with_prev = self.prev_kv;
                    return events
                        .into_iter()
                        .map(|ev| Py::new(py, Event { ev, with_prev }))
                        .collect::<PyResult<Vec<_>>>()
                        .map(Some);
                }
                Ok(_) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(Some(Vec::new()));
                    }
                    py.check_signals()?;
                }
                Err(WatchEnd::Compacted(rev)) => {
                    return Err(to_py(kubecore_store::error::StoreError::Compacted { compact_revision: rev }))
                }
                Err(WatchEnd::Cancelled | WatchEnd::Closed) => return Ok(None),
            }
        }
    }

    fn cancel(&self) {
        self.db.cancel_watch(&self.w);
    }
}
