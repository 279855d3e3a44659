//! Field sets (kubecore-fieldpath) for Python: `FieldFacts` holds one kind's list/map facts and
//! walks objects given as JSON bytes. Paths come back as the tuples kubecore.api.managedfields
//! uses: `(("f", "spec"), ("k", '{"name":"main"}'), ("f", "image"))`, in Python sets.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Mutex, TryLockError};

use pyo3::exceptions::{PyRecursionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySet, PyString, PyTuple};

use kubecore_fieldpath as fp;

pyo3::create_exception!(
    kubecore._native,
    FieldPathError,
    PyValueError,
    "An object that cannot be turned into field paths (a keyed list item without its key)."
);

/// Objects at least this large are walked with the GIL released. Smaller ones (a pod is ~2 KB,
/// a few µs of work) keep it: giving it up and taking it back can cost more than the walk when
/// other threads run Python.
const DETACH_BYTES: usize = 32 * 1024;

fn to_py(e: fp::Error) -> PyErr {
    match e {
        fp::Error::FieldPath(m) => FieldPathError::new_err(m),
        e @ fp::Error::Json(_) => PyValueError::new_err(e.to_string()),
        e @ fp::Error::TooDeep => PyRecursionError::new_err(e.to_string()),
    }
}

/// The tuples handed out before: the same paths come back on every write of a kind, so a path
/// is looked up instead of built, and its strings come with their hashes already computed.
/// `paths` is keyed by the addresses of the parent path's tuple (0 for the root) and of the
/// element's tuple; both are kept alive by this cache, and the two maps are only ever cleared
/// together, so an address in a key cannot belong to a newer object.
#[derive(Default)]
struct TupleCache {
    /// By kind (f, k, v) and text.
    elements: [HashMap<String, Py<PyTuple>>; 3],
    /// Hashed with FNV: addresses are not chosen by clients (element texts are, so they keep SipHash).
    paths: HashMap<(usize, usize), Py<PyTuple>, BuildHasherDefault<fp::facts::Fnv>>,
}

/// Past this many cached paths the cache starts over.
const TUPLE_CACHE_SIZE: usize = 16_384;

/// Python tuples for the paths of one result (`nodes[i]`: the tuple of path i, once built).
struct Tuples<'py, 'r, 'c> {
    py: Python<'py>,
    paths: &'r fp::Paths<'r>,
    cache: &'c mut TupleCache,
    nodes: Vec<Option<Bound<'py, PyTuple>>>,
}

impl<'py, 'r, 'c> Tuples<'py, 'r, 'c> {
    fn new(py: Python<'py>, paths: &'r fp::Paths<'r>, cache: &'c mut TupleCache) -> Self {
        if cache.paths.len() > TUPLE_CACHE_SIZE {
            *cache = TupleCache::default();
        }
        Tuples { py, paths, cache, nodes: vec![None; paths.nodes.len()] }
    }

    fn element(&mut self, pe: &fp::Pe<'_>) -> PyResult<Bound<'py, PyTuple>> {
        let (slot, kind) = match pe {
            fp::Pe::Field(_) => (0, pyo3::intern!(self.py, "f")),
            fp::Pe::Key(_) => (1, pyo3::intern!(self.py, "k")),
            fp::Pe::Value(_) => (2, pyo3::intern!(self.py, "v")),
        };
        if let Some(t) = self.cache.elements[slot].get(pe.text()) {
            return Ok(t.bind(self.py).clone());
        }
        let t = PyTuple::new(self.py, [kind.clone(), PyString::new(self.py, pe.text())])?;
        self.cache.elements[slot].insert(pe.text().to_string(), t.clone().unbind());
        Ok(t)
    }

    /// The tuple of path `i` (recursion as deep as the object, which the parser bounds).
    fn path(&mut self, i: u32) -> PyResult<Bound<'py, PyTuple>> {
        if i == fp::ROOT {
            return Ok(PyTuple::empty(self.py));
        }
        if let Some(t) = &self.nodes[i as usize] {
            return Ok(t.clone());
        }
        let node = &self.paths.nodes[i as usize];
        let parent = self.path(node.parent)?;
        let pe = self.element(&node.pe)?;
        let key = (if node.parent == fp::ROOT { 0 } else { parent.as_ptr() as usize }, pe.as_ptr() as usize);
        let t = match self.cache.paths.get(&key) {
            Some(t) => t.bind(self.py).clone(),
            None => {
                let mut items: Vec<Bound<'py, PyAny>> = parent.iter().collect();
                items.push(pe.into_any());
                let t = PyTuple::new(self.py, items)?;
                self.cache.paths.insert(key, t.clone().unbind());
                t
            }
        };
        self.nodes[i as usize] = Some(t.clone());
        Ok(t)
    }

    fn set(&mut self, members: &[u32]) -> PyResult<Bound<'py, PySet>> {
        let out = PySet::empty(self.py)?;
        for &i in members {
            out.add(self.path(i)?)?;
        }
        Ok(out)
    }
}

/// One kind's list and map facts (kubecore.api.typefacts' rules and tables, or a custom
/// resource's structural schema), and the walkers over them.
#[pyclass(frozen, module = "kubecore._native")]
pub struct FieldFacts {
    facts: fp::Facts,
    tuples: Mutex<TupleCache>,
}

impl FieldFacts {
    /// Converts with the tuple cache, or with an empty one while another thread holds it: that
    /// thread may be inside a garbage collection run by our allocations and waiting for the GIL,
    /// so waiting for it here could deadlock.
    fn with_tuples<T>(&self, f: impl FnOnce(&mut TupleCache) -> T) -> T {
        match self.tuples.try_lock() {
            Ok(mut cache) => f(&mut cache),
            Err(TryLockError::Poisoned(p)) => f(&mut p.into_inner()),
            Err(TryLockError::WouldBlock) => f(&mut TupleCache::default()),
        }
    }
}

#[pymethods]
impl FieldFacts {
    /// `keyed`: field name -> (keys, atomic items); `key_defaults`: key field -> canonical JSON
    /// of its default; `schema`: a custom resource's structural schema as JSON (then `typed` is
    /// implied and list/map facts come from it).
    #[new]
    #[pyo3(signature = (group, kind, *, typed, keyed, container_ports, service_ports, container_fields, atomic_maps,
                        key_defaults, schema=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        group: &str,
        kind: &str,
        typed: bool,
        keyed: HashMap<String, (Vec<String>, bool)>,
        container_ports: Vec<String>,
        service_ports: Vec<String>,
        container_fields: Vec<String>,
        atomic_maps: Vec<String>,
        key_defaults: HashMap<String, String>,
        schema: Option<&[u8]>,
    ) -> PyResult<Self> {
        let tables = fp::Tables {
            keyed: keyed.into_iter().map(|(f, (keys, atomic_items))| (f, fp::Keyed { keys, atomic_items })).collect(),
            container_ports,
            service_ports,
            container_fields: container_fields.into_iter().collect(),
            atomic_maps: atomic_maps.into_iter().collect(),
            key_defaults: key_defaults.into_iter().collect(),
        };
        let facts = match schema {
            Some(s) => fp::Facts::with_schema(group, kind, tables, s).map_err(to_py)?,
            None => fp::Facts::builtin(group, kind, typed, tables),
        };
        Ok(FieldFacts { facts, tuples: Mutex::default() })
    }

    /// ToFieldSet of `obj` (JSON of a map), outside the top-level fields `skip`.
    #[pyo3(signature = (obj, skip))]
    fn field_set<'py>(&self, py: Python<'py>, obj: &Bound<'py, PyBytes>, skip: Vec<String>) -> PyResult<Bound<'py, PySet>> {
        let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
        let raw = obj.as_bytes();
        let fs = if raw.len() >= DETACH_BYTES {
            py.detach(|| fp::field_set(&self.facts, raw, &skip))
        } else {
            fp::field_set(&self.facts, raw, &skip)
        }
        .map_err(to_py)?;
        self.with_tuples(|cache| Tuples::new(py, &fs.paths, cache).set(&fs.members))
    }

    /// typed.Compare from `lhs` to `rhs` (JSON; None: absent): (added, modified, removed).
    #[pyo3(signature = (lhs, rhs, skip))]
    #[allow(clippy::type_complexity)]
    fn compare<'py>(
        &self,
        py: Python<'py>,
        lhs: Option<&Bound<'py, PyBytes>>,
        rhs: Option<&Bound<'py, PyBytes>>,
        skip: Vec<String>,
    ) -> PyResult<(Bound<'py, PySet>, Bound<'py, PySet>, Bound<'py, PySet>)> {
        let skip: Vec<&str> = skip.iter().map(String::as_str).collect();
        let (l, r) = (lhs.map(|b| b.as_bytes()), rhs.map(|b| b.as_bytes()));
        let size = l.map_or(0, <[u8]>::len) + r.map_or(0, <[u8]>::len);
        let c = if size >= DETACH_BYTES {
            py.detach(|| fp::compare(&self.facts, l, r, &skip))
        } else {
            fp::compare(&self.facts, l, r, &skip)
        }
        .map_err(to_py)?;
        self.with_tuples(|cache| {
            let mut t = Tuples::new(py, &c.paths, cache);
            Ok((t.set(&c.added)?, t.set(&c.modified)?, t.set(&c.removed)?))
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("FieldPathError", m.py().get_type::<FieldPathError>())?;
    m.add_class::<FieldFacts>()?;
    Ok(())
}
