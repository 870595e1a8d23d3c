//! The Python module `xfrbench_rrsum` (harness/xfr/rrsum_native.py wraps it). Sums come back
//! as (records, 32-byte big-endian total); malformed data raises ValueError with the same
//! kind of text as the Python reference; errors raised by a fallback pass through as they are.
//! The GIL is released while the digest runs, and taken again only to call a fallback.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::sum::Sum;
use crate::text;
use crate::wire::{Error, Fallback, Walker};

/// Hands the types the Rust walk does not canonicalise to a Python callable:
/// fallback(message: bytes, rtype, rclass, rdata_offset, rdlength) -> canonical rdata.
struct PyFallback {
    func: Option<PyObject>,
    message: Option<(usize, usize, PyObject)>, // (address, length, bytes) of the current one
}

impl Fallback for PyFallback {
    type Error = PyErr;

    fn canonical_rdata(
        &mut self,
        msg: &[u8],
        rtype: u16,
        rclass: u16,
        off: usize,
        rdlen: usize,
    ) -> Result<Vec<u8>, PyErr> {
        Python::with_gil(|py| {
            let Some(func) = &self.func else {
                return Err(PyValueError::new_err(format!(
                    "type {rtype} rdata at offset {off}: no fallback for this type"
                )));
            };
            let key = (msg.as_ptr() as usize, msg.len());
            let obj = match &self.message {
                Some((a, l, obj)) if (*a, *l) == key => obj.clone_ref(py),
                _ => {
                    let obj: PyObject = PyBytes::new(py, msg).into_any().unbind();
                    self.message = Some((key.0, key.1, obj.clone_ref(py)));
                    obj
                }
            };
            let out = func.call1(py, (obj, rtype, rclass, off, rdlen))?;
            let bytes = out.downcast_bound::<PyBytes>(py)?;
            Ok(bytes.as_bytes().to_vec())
        })
    }

    fn message_done(&mut self) {
        if self.message.is_some() {
            Python::with_gil(|_| self.message = None);
        }
    }
}

fn to_py(err: Error<PyErr>) -> PyErr {
    match err {
        Error::Wire(e) => PyValueError::new_err(e.0),
        Error::Fallback(e) => e,
    }
}

fn result<'py>(py: Python<'py>, sum: &Sum) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(
        py,
        [
            sum.records.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &sum.total_bytes()).into_any(),
        ],
    )
}

/// Sums answer records of transfer messages, message by message or chunk by chunk, with
/// its name tables kept between calls.
#[pyclass(module = "xfrbench_rrsum")]
struct StreamSum {
    walker: Option<Walker>,
    fallback: PyFallback,
}

#[pymethods]
impl StreamSum {
    #[new]
    #[pyo3(signature = (fallback=None))]
    fn new(fallback: Option<PyObject>) -> Self {
        StreamSum {
            walker: Some(Walker::new()),
            fallback: PyFallback {
                func: fallback,
                message: None,
            },
        }
    }

    /// Add one message (no length prefix); `drop_last`: leave out its last answer record.
    #[pyo3(signature = (msg, drop_last=false))]
    fn message(&mut self, py: Python<'_>, msg: &[u8], drop_last: bool) -> PyResult<()> {
        let walker = self
            .walker
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("finished"))?;
        let fallback = &mut self.fallback;
        py.allow_threads(|| walker.message(msg, drop_last, fallback))
            .map_err(to_py)
    }

    /// Add a run of whole 2-byte-length-prefixed messages; `drop_last`: leave out the last
    /// answer record of the last one.
    #[pyo3(signature = (data, drop_last=false))]
    fn stream(&mut self, py: Python<'_>, data: &[u8], drop_last: bool) -> PyResult<()> {
        let walker = self
            .walker
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("finished"))?;
        let fallback = &mut self.fallback;
        py.allow_threads(|| walker.stream(data, drop_last, fallback))
            .map_err(to_py)
    }

    /// (records, 32-byte big-endian total) of everything added so far.
    fn result<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let walker = self
            .walker
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("finished"))?;
        walker.hasher.flush();
        let sum = walker.hasher.sum.clone();
        result(py, &sum)
    }
}

/// (records, total, deferred) of the zone-file lines in `data`: `deferred` holds the
/// (start, end) byte ranges of the lines left to the Python summer.
#[pyfunction]
fn sum_text<'py>(
    py: Python<'py>,
    data: &[u8],
    origin_wire: &[u8],
    origin_text: &[u8],
) -> PyResult<Bound<'py, PyTuple>> {
    let got = py.allow_threads(|| text::sum_text(data, origin_wire, origin_text));
    let deferred = PyList::new(py, got.deferred)?;
    PyTuple::new(
        py,
        [
            got.sum.records.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &got.sum.total_bytes()).into_any(),
            deferred.into_any(),
        ],
    )
}

#[pymodule]
fn xfrbench_rrsum(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StreamSum>()?;
    m.add_function(wrap_pyfunction!(sum_text, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
