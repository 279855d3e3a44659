//! Walks over decoded JSON objects (exact dicts, lists, str, int, float, bool, None) for the API
//! server's create path: `shape_key`, the memo key of kubecore.api.fieldmanager's creates, and
//! `NativeFieldModel.count`, kubecore.api.fieldvalidation's `fast_count` over a compiled model.
//!
//! Both give up (None) on anything a JSON decoder does not make (a subclass, a tuple, a key that
//! is not a str, a lone surrogate where its text is needed) and on objects nested deeper than
//! `MAX_DEPTH`: the Python versions then decide, with their own semantics for such values.
//!
//! The walks look at objects through borrowed pointers (`Obj`), without reference counting (a
//! pod is a few hundred objects; counting references was a fifth of the time). That is sound
//! because, between taking a borrowed pointer and its last use, a walk holds the GIL and calls
//! only CPython functions that run no Python code and free nothing on the exact types it checked
//! first: PyDict_Next, PyDict_Size, PyList_Size, PyList_GetItem, PyUnicode_AsUTF8AndSize,
//! PyLong_AsLongLongAndOverflow, PyFloat_AsDouble, PyObject_Str of an int. The only Python code
//! that can run is a failed conversion's exception (its allocation may start a garbage
//! collection): a walk stops there and uses no borrowed pointer afterwards.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::marker::PhantomData;
use std::ptr;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFrozenSet, PyString};

/// Deeper objects are left to the Python versions (a pod is about 8 levels deep).
const MAX_DEPTH: usize = 200;

// ---- borrowed objects ----------------------------------------------------------------------------

/// What a value is, by its exact type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Str,
    Dict,
    List,
    Int,
    Bool,
    Float,
    None,
    Other,
}

/// An object borrowed for `'a` from the root the walk started at (see the module's rules).
#[derive(Clone, Copy)]
struct Obj<'a>(*mut ffi::PyObject, PhantomData<&'a ()>);

impl<'a> Obj<'a> {
    fn new(o: &'a Bound<'_, PyAny>) -> Self {
        Obj(o.as_ptr(), PhantomData)
    }

    fn ty(self) -> Type {
        // SAFETY: the object is alive (module rules); the type objects are static.
        unsafe {
            let t = ffi::Py_TYPE(self.0);
            if t == &raw mut ffi::PyUnicode_Type {
                Type::Str
            } else if t == &raw mut ffi::PyDict_Type {
                Type::Dict
            } else if t == &raw mut ffi::PyList_Type {
                Type::List
            } else if t == &raw mut ffi::PyLong_Type {
                Type::Int
            } else if t == &raw mut ffi::PyBool_Type {
                Type::Bool
            } else if t == &raw mut ffi::PyFloat_Type {
                Type::Float
            } else if self.0 == ffi::Py_None() {
                Type::None
            } else {
                Type::Other
            }
        }
    }

    /// Each (key, value) of a dict, in order.
    fn items<E>(self, mut f: impl FnMut(Obj<'a>, Obj<'a>) -> Result<(), E>) -> Result<(), E> {
        debug_assert!(self.ty() == Type::Dict);
        let (mut pos, mut k, mut v) = (0, ptr::null_mut(), ptr::null_mut());
        // SAFETY: an exact dict; PyDict_Next hands out borrowed pointers, alive while it holds them.
        while unsafe { ffi::PyDict_Next(self.0, &mut pos, &mut k, &mut v) } != 0 {
            f(Obj(k, PhantomData), Obj(v, PhantomData))?;
        }
        Ok(())
    }

    /// A dict's length.
    fn len(self) -> i64 {
        debug_assert!(self.ty() == Type::Dict);
        // SAFETY: an exact dict.
        unsafe { ffi::PyDict_Size(self.0) as i64 }
    }

    /// Each item of a list, in order.
    fn each<E>(self, mut f: impl FnMut(Obj<'a>) -> Result<(), E>) -> Result<(), E> {
        debug_assert!(self.ty() == Type::List);
        // SAFETY: an exact list, and the index is in range: it cannot shrink meanwhile.
        for i in 0..unsafe { ffi::PyList_Size(self.0) } {
            f(Obj(unsafe { ffi::PyList_GetItem(self.0, i) }, PhantomData))?;
        }
        Ok(())
    }

    /// A str's UTF-8 text (kept by the str), or None for a lone surrogate (the error is
    /// cleared: the walk stops).
    fn utf8(self) -> Option<&'a [u8]> {
        debug_assert!(self.ty() == Type::Str);
        let mut size = 0;
        // SAFETY: an exact str; the text lives as long as the str.
        unsafe {
            let p = ffi::PyUnicode_AsUTF8AndSize(self.0, &mut size);
            if p.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            Some(std::slice::from_raw_parts(p.cast::<u8>(), size as usize))
        }
    }
}

// ---- shape_key -----------------------------------------------------------------------------------

/// A walk's reason to give up: the Python version decides.
struct Declined;

/// The key's encoding. Every value starts with a tag byte, and what follows a tag has a fixed
/// length or a length prefix, so two keys are equal only when the walks saw the same thing:
///
/// * shape (outside lists): `{` (key shape)* `}`, `[` value* `]`, and the bare tags `s` str,
///   `i` int, `b` bool, `f` float, `n` None (scalars outside lists are their type's zero value);
/// * value (inside lists): `{` (key value)* `}`, `[` value* `]`, `s` len text, `i` 8 bytes,
///   `I` len decimal text (an int beyond 64 bits), `b` 0|1, `f` 8 bytes, `n` None;
/// * key: len text. Lengths are 4 bytes, little-endian; numbers are little-endian.
///
/// A float that is not finite is `n`: the Python key is msgspec's JSON, which writes it `null`.
/// Keys start with a 0 byte, which the Python key (a JSON text) never does.
struct ShapeKey<'py> {
    py: Python<'py>,
    out: Vec<u8>,
}

impl ShapeKey<'_> {
    fn text(&mut self, s: &[u8]) -> Result<(), Declined> {
        let len = u32::try_from(s.len()).map_err(|_| Declined)?;
        self.out.extend_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(s);
        Ok(())
    }

    fn key(&mut self, k: Obj<'_>) -> Result<(), Declined> {
        if k.ty() != Type::Str {
            return Err(Declined);
        }
        self.text(k.utf8().ok_or(Declined)?)
    }

    /// A value outside lists.
    fn shape(&mut self, v: Obj<'_>, depth: usize) -> Result<(), Declined> {
        let tag = match v.ty() {
            Type::Str => b's',
            Type::Dict => return self.dict(v, depth, Self::shape),
            Type::List => return self.list(v, depth),
            Type::Int => b'i',
            Type::Bool => b'b',
            Type::Float => b'f',
            Type::None => b'n',
            Type::Other => return Err(Declined),
        };
        self.out.push(tag);
        Ok(())
    }

    /// A value inside a list: all of it.
    fn value(&mut self, v: Obj<'_>, depth: usize) -> Result<(), Declined> {
        match v.ty() {
            Type::Str => {
                self.out.push(b's');
                self.text(v.utf8().ok_or(Declined)?)?;
            }
            Type::Dict => self.dict(v, depth, Self::value)?,
            Type::List => self.list(v, depth)?,
            Type::Int => {
                let mut overflow = 0;
                // SAFETY: an exact int (no __index__ to call); no error but the overflow flag.
                let i = unsafe { ffi::PyLong_AsLongLongAndOverflow(v.0, &mut overflow) };
                if overflow == 0 {
                    self.out.push(b'i');
                    self.out.extend_from_slice(&i.to_le_bytes());
                } else {
                    self.out.push(b'I');
                    self.big_int(v)?;
                }
            }
            // SAFETY: Py_True is static.
            Type::Bool => self.out.extend_from_slice(if v.0 == unsafe { ffi::Py_True() } { b"b1" } else { b"b0" }),
            Type::Float => {
                // SAFETY: an exact float.
                let f = unsafe { ffi::PyFloat_AsDouble(v.0) };
                if f.is_finite() {
                    self.out.push(b'f');
                    self.out.extend_from_slice(&f.to_bits().to_le_bytes());
                } else {
                    self.out.push(b'n');
                }
            }
            Type::None => self.out.push(b'n'),
            Type::Other => return Err(Declined),
        }
        Ok(())
    }

    /// An int beyond 64 bits: its decimal text.
    fn big_int(&mut self, v: Obj<'_>) -> Result<(), Declined> {
        // SAFETY: an exact int: str() runs no Python code; the new reference is owned.
        let text = unsafe { Bound::from_owned_ptr_or_opt(self.py, ffi::PyObject_Str(v.0)) };
        let Some(text) = text else {
            // SAFETY: the GIL is held.
            unsafe { ffi::PyErr_Clear() };
            return Err(Declined);
        };
        self.text(Obj::new(&text).utf8().ok_or(Declined)?)
    }

    fn dict<'a>(
        &mut self,
        d: Obj<'a>,
        depth: usize,
        item: fn(&mut Self, Obj<'a>, usize) -> Result<(), Declined>,
    ) -> Result<(), Declined> {
        if depth >= MAX_DEPTH {
            return Err(Declined);
        }
        self.out.push(b'{');
        d.items(|k, v| {
            self.key(k)?;
            item(self, v, depth + 1)
        })?;
        self.out.push(b'}');
        Ok(())
    }

    fn list(&mut self, l: Obj<'_>, depth: usize) -> Result<(), Declined> {
        if depth >= MAX_DEPTH {
            return Err(Declined);
        }
        self.out.push(b'[');
        l.each(|v| self.value(v, depth + 1))?;
        self.out.push(b']');
        Ok(())
    }
}

/// kubecore.api.fieldmanager's create memo key for `obj`: its structure, scalars outside lists
/// replaced by their type, lists whole, `metadata` last and without the keys in `skip_meta`. Two
/// objects get equal keys exactly when `_shape_key_py` gives them equal keys. None when `obj` or
/// its metadata is not an exact dict, or some value is not what a JSON decoder makes.
#[pyfunction]
pub fn shape_key<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    skip_meta: &Bound<'py, PyFrozenSet>,
) -> Option<Bound<'py, PyBytes>> {
    let root = Obj::new(obj);
    if root.ty() != Type::Dict {
        return None;
    }
    let mut w = ShapeKey { py, out: Vec::with_capacity(1024) };
    w.out.extend_from_slice(b"\0{");
    let mut meta = None;
    root.items(|k, v| {
        if k.ty() != Type::Str {
            return Err(Declined);
        }
        let k = k.utf8().ok_or(Declined)?;
        if k == b"metadata" {
            meta = Some(v);
            return Ok(());
        }
        w.text(k)?;
        w.shape(v, 1)
    })
    .ok()?;
    let meta = meta?;
    if meta.ty() != Type::Dict {
        return None;
    }
    // `contains` runs Python code if `skip_meta` holds something other than strs (its __eq__):
    // the metadata, and each key and value, are held while it may.
    // SAFETY: alive (in `obj`, which the caller holds).
    let meta = unsafe { Bound::from_borrowed_ptr(py, meta.0) };
    w.text(b"metadata").ok()?;
    w.out.push(b'{');
    Obj::new(&meta)
        .items(|k, v| {
            if k.ty() != Type::Str {
                return Err(Declined);
            }
            // SAFETY: alive (handed out by PyDict_Next just now).
            let (k, v) = unsafe { (Bound::from_borrowed_ptr(py, k.0), Bound::from_borrowed_ptr(py, v.0)) };
            if skip_meta.contains(&k).map_err(|_| Declined)? {
                return Ok(());
            }
            w.key(Obj::new(&k))?;
            w.shape(Obj::new(&v), 2)
        })
        .ok()?;
    w.out.extend_from_slice(b"}}");
    Some(PyBytes::new(py, &w.out))
}

// ---- NativeFieldModel ----------------------------------------------------------------------------

/// kubecore.api.fieldvalidation's node kinds.
const LEAF: u8 = 0;
const MSG: u8 = 1;
const LIST: u8 = 2;
const MAP: u8 = 3;
const FREE: u8 = 4;
const SMAP: u8 = 5;

/// One message: field name (UTF-8) -> (kind, child message index; 0 for kinds without one).
type Fields = HashMap<Box<[u8]>, (u8, u32), BuildHasherDefault<NameHash>>;

/// A hash of a field name from its length and its first and last 8 bytes: a few instructions
/// where hashing every byte (FNV) was a third of a count. Names come from the schema, and
/// clients' keys are only looked up, so a name that hashes like another costs one comparison.
#[derive(Default)]
struct NameHash(u64);

impl Hasher for NameHash {
    fn write(&mut self, b: &[u8]) {
        let n = b.len();
        let (head, tail) = if n >= 8 {
            (
                u64::from_le_bytes(b[..8].try_into().unwrap_or_default()),
                u64::from_le_bytes(b[n - 8..].try_into().unwrap_or_default()),
            )
        } else {
            let mut buf = [0u8; 8];
            buf[..n].copy_from_slice(b);
            (u64::from_le_bytes(buf), 0)
        };
        let h = (self.0 ^ head).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ tail.rotate_left(29) ^ n as u64;
        self.0 = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    }

    fn write_usize(&mut self, n: usize) {
        self.0 ^= n as u64;
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// Why a count stopped: an unknown field (the count is -1), or a value the Python version has to
/// look at (a key that is not an exact str or has a lone surrogate, an object deeper than `MAX_DEPTH`).
enum Stop {
    Unknown,
    Python,
}

/// A fieldvalidation `Node` tree compiled once: messages by index (the tree shares nodes and
/// refers to itself, so it is a graph); the root is message 0.
#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeFieldModel {
    messages: Vec<Fields>,
}

impl NativeFieldModel {
    /// `fast_count` of a dict against message `node`.
    fn message(&self, d: Obj<'_>, node: u32, depth: usize) -> Result<i64, Stop> {
        if depth >= MAX_DEPTH {
            return Err(Stop::Python);
        }
        let fields = &self.messages[node as usize];
        let mut n = d.len();
        d.items(|k, v| {
            if k.ty() != Type::Str {
                return Err(Stop::Python);
            }
            let &(kind, child) = fields.get(k.utf8().ok_or(Stop::Python)?).ok_or(Stop::Unknown)?;
            match (kind, v.ty()) {
                (MSG, Type::Dict) => n += self.message(v, child, depth + 1)?,
                (LIST, Type::List) => v.each(|item| {
                    if item.ty() == Type::Dict {
                        n += self.message(item, child, depth + 1)?;
                    }
                    Ok(())
                })?,
                (SMAP, Type::Dict) => n += v.len(),
                (FREE, _) => n += free(v, depth + 1)?,
                (MAP, Type::Dict) => v.items(|_, item| {
                    if item.ty() == Type::Dict {
                        n += self.message(item, child, depth + 1)?;
                    }
                    Ok(())
                })?,
                _ => {} // a leaf, or a value of another type: counted as one key
            }
            Ok(())
        })?;
        Ok(n)
    }
}

/// fieldvalidation `_count`: the keys of the dicts in `v`, at any depth.
fn free(v: Obj<'_>, depth: usize) -> Result<i64, Stop> {
    let ty = v.ty();
    if ty != Type::Dict && ty != Type::List {
        return Ok(0);
    }
    if depth >= MAX_DEPTH {
        return Err(Stop::Python);
    }
    let mut n = 0;
    if ty == Type::Dict {
        n = v.len();
        v.items(|_, x| {
            n += free(x, depth + 1)?;
            Ok(())
        })?;
    } else {
        v.each(|x| {
            n += free(x, depth + 1)?;
            Ok(())
        })?;
    }
    Ok(n)
}

#[pymethods]
impl NativeFieldModel {
    /// Compiles `node` (a kubecore.api.fieldvalidation.Node) and every node it reaches. As
    /// `fast_count` reads a node: its fields are `known`; those in `inner` are looked into, as
    /// `spec` says ((kind, child Node or None)); the others are leaves.
    #[new]
    fn new(node: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = node.py();
        let (spec, known, inner) = (pyo3::intern!(py, "spec"), pyo3::intern!(py, "known"), pyo3::intern!(py, "inner"));
        // Nodes by id() while compiling; `seen` keeps them alive, so no id is reused meanwhile.
        let mut index: HashMap<usize, u32> = HashMap::from([(node.as_ptr() as usize, 0)]);
        let mut seen = vec![node.clone()];
        let mut messages = Vec::new();
        while let Some(node) = seen.get(messages.len()).cloned() {
            let (spec, inner) = (node.getattr(spec)?, node.getattr(inner)?);
            let mut fields = Fields::default();
            for name in node.getattr(known)?.try_iter()? {
                let name = name?;
                let mut entry = (LEAF, 0);
                if inner.contains(&name)? {
                    let (kind, child): (u8, Bound<'_, PyAny>) = spec.get_item(&name)?.extract()?;
                    if !(MSG..=SMAP).contains(&kind) {
                        return Err(PyValueError::new_err(format!("field {name}: unexpected node kind {kind}")));
                    }
                    entry.0 = kind;
                    if matches!(kind, MSG | LIST | MAP) {
                        if child.is_none() {
                            return Err(PyTypeError::new_err(format!("field {name}: no child node")));
                        }
                        let next = u32::try_from(seen.len()).map_err(|_| PyValueError::new_err("too many nodes"))?;
                        entry.1 = *index.entry(child.as_ptr() as usize).or_insert_with(|| {
                            seen.push(child.clone());
                            next
                        });
                    }
                }
                let name = name.cast_into::<PyString>()?;
                fields.insert(name.to_str()?.as_bytes().into(), entry);
            }
            messages.push(fields);
        }
        Ok(NativeFieldModel { messages })
    }

    /// fieldvalidation `fast_count(obj, node)`: the keys of `obj` when it has no unknown field,
    /// else -1. None when `obj` is not an exact dict or holds a value only the Python version
    /// decides on (a key that is not an exact str or has a lone surrogate, an object nested too deep).
    fn count(&self, obj: &Bound<'_, PyAny>) -> Option<i64> {
        let root = Obj::new(obj);
        if root.ty() != Type::Dict {
            return None;
        }
        match self.message(root, 0, 0) {
            Ok(n) => Some(n),
            Err(Stop::Unknown) => Some(-1),
            Err(Stop::Python) => None,
        }
    }

    /// How many messages the model holds.
    fn __len__(&self) -> usize {
        self.messages.len()
    }
}
