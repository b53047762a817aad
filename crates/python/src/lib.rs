//! `tcsparse._tcsparse`: the Rust half of the `tcsparse` Python package.
//!
//! The pure-Python layer (`python/tcsparse/__init__.py`) turns SciPy, PyTorch and NumPy inputs into
//! the few shapes this module takes — CSR arrays, C-contiguous NumPy arrays, and raw CUDA device
//! pointers with a stream handle — checks devices, dtypes and shapes with messages that name the
//! argument, and wires autograd. This module owns the prepared matrices ([`PyMatrix`]) and runs
//! the facade's products; every entry point converts errors to Python exceptions
//! (`ValueError` for bad arguments, `RuntimeError` for the runtime) and catches Rust panics
//! ([`guard`]), so no panic ever crosses into Python.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tcsparse::formats::Csr;
use tcsparse::formats::sddmm::{pattern_spmm_f64, sddmm, transpose_with_map};
use tcsparse::{Engine, Error, Precision, PrepareOptions, Prepared, RowOrder};

mod cuda;

/// A C-contiguous 2-D operand in float32 or float64 (the one entry point of both element types).
#[derive(FromPyObject)]
enum Dense2<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

/// Runs `f`, turning a Rust panic into a `RuntimeError` (the panic message kept).
pub(crate) fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!(
                "tcsparse internal error (a bug; please report it): {msg}"
            )))
        }
    }
}

/// The facade's error as a Python exception: argument errors are `ValueError`, runtime failures
/// `RuntimeError`.
pub(crate) fn to_py(e: Error) -> PyErr {
    match e {
        Error::InvalidArgs(_) | Error::ValueCount { .. } | Error::Csr(_) | Error::Reorder(_) => {
            PyValueError::new_err(e.to_string())
        }
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

fn value_err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// `PrecisionName` → [`Precision`].
fn parse_precision(s: &str) -> PyResult<Precision> {
    match s.to_ascii_lowercase().as_str() {
        "tf32" => Ok(Precision::Tf32),
        "f32" | "fp32" | "float32" => Ok(Precision::F32),
        _ => Err(PyValueError::new_err(format!(
            "precision: {s:?} is not one of 'tf32', 'f32'"
        ))),
    }
}

/// A C-contiguous array's values, or a `ValueError` naming `what`.
fn slice_of<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    a: &'a numpy::PyReadonlyArray<'_, T, D>,
    what: &str,
) -> PyResult<&'a [T]> {
    a.as_slice()
        .map_err(|_| PyValueError::new_err(format!("{what} must be C-contiguous")))
}

/// An index array as u32, each entry checked (`what[i] = v` named when out of range).
fn indices_u32(a: &PyReadonlyArray1<'_, i64>, what: &str) -> PyResult<Vec<u32>> {
    slice_of(a, what)?
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            u32::try_from(v).map_err(|_| {
                PyValueError::new_err(format!("{what}[{i}] = {v} is not a valid index"))
            })
        })
        .collect()
}

/// A prepared matrix's state; `None` in [`PyMatrix::inner`] once freed.
struct Inner {
    engine: Engine,
    /// The matrix in the caller's (original) order with its current values.
    a: Csr,
    opts: PrepareOptions,
    prepared: Prepared,
    /// Aᵀ and, per stored position of Aᵀ, the position of the same entry in A: made on the
    /// first product with Aᵀ (a gradient), kept.
    t_pattern: Option<(Csr, Vec<u32>)>,
    /// Aᵀ prepared through the same engine, on first use.
    t_prepared: Option<Prepared>,
    /// The pattern on the GPU for SDDMMs, on first use.
    sddmm: Option<tcsparse::gpu::sddmm::SddmmPattern>,
}

impl Inner {
    fn transpose_pattern(&mut self) -> &(Csr, Vec<u32>) {
        self.t_pattern
            .get_or_insert_with(|| transpose_with_map(&self.a))
    }

    fn transposed(&mut self) -> Result<&mut Prepared, Error> {
        if self.t_prepared.is_none() {
            let (t, _) = self
                .t_pattern
                .get_or_insert_with(|| transpose_with_map(&self.a));
            let p = self.engine.prepare_spmm(t, &self.opts)?;
            self.t_prepared = Some(p);
        }
        self.t_prepared
            .as_mut()
            .ok_or_else(|| Error::Unavailable("the transpose was not prepared".into()))
    }

    /// The preparation of A, or with `transpose` of Aᵀ ([`Inner::transposed`]).
    fn prepared(&mut self, transpose: bool) -> PyResult<&mut Prepared> {
        if transpose {
            self.transposed().map_err(to_py)
        } else {
            Ok(&mut self.prepared)
        }
    }
}

/// A sparse matrix prepared once for many products (the Python class `SparseMatrix` wraps it).
#[pyclass(module = "tcsparse._tcsparse", name = "_Matrix")]
pub struct PyMatrix {
    inner: Mutex<Option<Inner>>,
    rows: usize,
    cols: usize,
    nnz: usize,
    /// CUDA device ordinal, `None` on the CPU path.
    device: Option<usize>,
    precision: Precision,
}

impl PyMatrix {
    /// Runs `f` on the live state (releasing the GIL), or `RuntimeError` when freed.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            guard(|| {
                let mut g = self.inner.lock().map_err(|_| {
                    PyRuntimeError::new_err("the matrix is poisoned by an earlier failure")
                })?;
                let inner = g.as_mut().ok_or_else(|| {
                    PyRuntimeError::new_err("the matrix was freed (SparseMatrix.free())")
                })?;
                f(inner)
            })
        })
    }

    /// `ValueError` unless `len` values (one per stored position) fit the matrix.
    fn check_values(&self, len: usize) -> PyResult<()> {
        if len != self.nnz {
            return Err(PyValueError::new_err(format!(
                "values has {len} entries, the matrix {} stored nonzeros",
                self.nnz
            )));
        }
        Ok(())
    }

    fn check_dense(&self, what: &str, shape: &[usize], rows: usize) -> PyResult<usize> {
        match shape {
            [r, n] if *r == rows => Ok(*n),
            _ => Err(PyValueError::new_err(format!(
                "{what} has shape {shape:?}, expected ({rows}, n)"
            ))),
        }
    }

    /// A host product's dense operands: `b` (`b_rows × n`, named `b_name`) and `out`
    /// (`out_rows × n`), both float32 and C-contiguous, with their common width `n`.
    fn host_operands<'a>(
        &self,
        (b_name, b, b_rows): (&str, &'a PyReadonlyArray2<'_, f32>, usize),
        (c, c_rows): (&'a mut PyReadwriteArray2<'_, f32>, usize),
    ) -> PyResult<(usize, &'a [f32], &'a mut [f32])> {
        let n = self.check_dense(b_name, b.shape(), b_rows)?;
        let nc = self.check_dense("out", c.shape(), c_rows)?;
        if nc != n {
            return Err(PyValueError::new_err(format!(
                "out has {nc} columns, {b_name} has {n}"
            )));
        }
        let bs = slice_of(b, b_name)?;
        let cs = c
            .as_slice_mut()
            .map_err(|_| PyValueError::new_err("out must be C-contiguous"))?;
        Ok((n, bs, cs))
    }

    /// An SDDMM's factors: `left` (`rows × k`, named `grad`) and `right` (`cols × k`, named
    /// `X`), C-contiguous, with their common width `k`.
    fn sddmm_operands<'a, T: numpy::Element>(
        &self,
        left: &'a PyReadonlyArray2<'_, T>,
        right: &'a PyReadonlyArray2<'_, T>,
    ) -> PyResult<(usize, &'a [T], &'a [T])> {
        let k = self.check_dense("grad", left.shape(), self.rows)?;
        let kr = self.check_dense("X", right.shape(), self.cols)?;
        if k != kr {
            return Err(PyValueError::new_err(format!(
                "grad has {k} columns, X has {kr}"
            )));
        }
        Ok((k, slice_of(left, "grad")?, slice_of(right, "X")?))
    }
}

#[pymethods]
impl PyMatrix {
    /// Prepares the `rows × cols` CSR matrix (`indptr`, `indices` as int64, `data` as float32) on
    /// CUDA device `device` (`None`: the CPU reference path), for products with `n_hint` columns,
    /// at `precision` (`'tf32'` or `'f32'`).
    #[new]
    #[pyo3(signature = (rows, cols, indptr, indices, data, device, n_hint, precision, tune))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rows: usize,
        cols: usize,
        indptr: PyReadonlyArray1<'_, i64>,
        indices: PyReadonlyArray1<'_, i64>,
        data: PyReadonlyArray1<'_, f32>,
        device: Option<usize>,
        n_hint: usize,
        precision: &str,
        tune: bool,
    ) -> PyResult<Self> {
        let precision = parse_precision(precision)?;
        if n_hint == 0 {
            return Err(PyValueError::new_err("n_hint must be at least 1"));
        }
        if indptr.len() != rows.saturating_add(1) {
            return Err(PyValueError::new_err(format!(
                "indptr has {} entries, expected rows + 1 = {}",
                indptr.len(),
                rows.saturating_add(1)
            )));
        }
        if indices.len() != data.len() {
            return Err(PyValueError::new_err(format!(
                "indices has {} entries but data has {}",
                indices.len(),
                data.len()
            )));
        }
        let ip = indices_u32(&indptr, "indptr")?;
        let ix = indices_u32(&indices, "indices")?;
        let values = slice_of(&data, "data")?.to_vec();
        let a = Csr::try_new((rows, cols), ip, ix, values)
            .map_err(|e| PyValueError::new_err(format!("invalid CSR matrix: {e}")))?;
        let nnz = a.nnz();
        let mut opts = PrepareOptions::default();
        opts.n = n_hint;
        opts.precision = precision;
        opts.tune = tune;
        opts.device_order = RowOrder::Original;
        let inner = py.detach(|| {
            guard(|| {
                let engine = match device {
                    None => Engine::cpu("device='cpu'"),
                    Some(d) => Engine::on_device(d)
                        .map_err(|e| PyRuntimeError::new_err(format!("device='cuda:{d}': {e}")))?,
                };
                let prepared = engine.prepare_spmm(&a, &opts).map_err(to_py)?;
                Ok(Inner {
                    engine,
                    a,
                    opts,
                    prepared,
                    t_pattern: None,
                    t_prepared: None,
                    sddmm: None,
                })
            })
        })?;
        Ok(Self {
            inner: Mutex::new(Some(inner)),
            rows,
            cols,
            nnz,
            device,
            precision,
        })
    }

    /// `(rows, cols)`.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Stored nonzeros.
    #[getter]
    fn nnz(&self) -> usize {
        self.nnz
    }

    /// CUDA device ordinal, or `None` on the CPU path.
    #[getter]
    fn device(&self) -> Option<usize> {
        self.device
    }

    /// `'tf32'` or `'f32'`.
    #[getter]
    fn precision(&self) -> &'static str {
        match self.precision {
            Precision::F32 => "f32",
            _ => "tf32",
        }
    }

    /// The kernel products run (e.g. `acc-spmm`, `csr`, `cusparse`, `cpu`).
    #[getter]
    fn kernel(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |i| Ok(i.prepared.kernel().to_string()))
    }

    /// The engine's one-line description (the GPU found, or why the CPU path runs).
    #[getter]
    fn message(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |i| Ok(i.engine.message().to_string()))
    }

    /// Whether the matrix was freed.
    #[getter]
    fn freed(&self) -> bool {
        self.inner.lock().map(|g| g.is_none()).unwrap_or(true)
    }

    /// Row offsets (int64, `rows + 1`).
    fn indptr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let v = self.with(py, |i| {
            Ok(i.a
                .row_offsets()
                .iter()
                .map(|&x| x as i64)
                .collect::<Vec<_>>())
        })?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// Column indices (int64, `nnz`).
    fn indices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let v = self.with(py, |i| {
            Ok(i.a.indices().iter().map(|&x| x as i64).collect::<Vec<_>>())
        })?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// Current values (float32, `nnz`, CSR order).
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let v = self.with(py, |i| Ok(i.a.data().to_vec()))?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// Releases the prepared matrix (host and device memory); later calls raise `RuntimeError`.
    fn free(&self) -> PyResult<()> {
        let mut g = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the matrix is poisoned by an earlier failure"))?;
        *g = None;
        Ok(())
    }

    /// `c = alpha·A·b + beta·c` on host arrays (`b`: `cols × n`, `c`: `rows × n`, float32,
    /// C-contiguous); `c` is not read when `beta == 0`. With `transpose`, `c = alpha·Aᵀ·b +
    /// beta·c` (`b`: `rows × n`, `c`: `cols × n`); Aᵀ is prepared through the same engine on the
    /// first call and kept.
    #[pyo3(signature = (alpha, b, beta, c, transpose=false))]
    fn spmm(
        &self,
        py: Python<'_>,
        alpha: f32,
        b: PyReadonlyArray2<'_, f32>,
        beta: f32,
        mut c: PyReadwriteArray2<'_, f32>,
        transpose: bool,
    ) -> PyResult<()> {
        let (b_name, inner, outer) = if transpose {
            ("grad", self.rows, self.cols)
        } else {
            ("X", self.cols, self.rows)
        };
        let (n, bs, cs) = self.host_operands((b_name, &b, inner), (&mut c, outer))?;
        self.with(py, |i| {
            let p = i.prepared(transpose)?;
            p.set_n(n);
            p.spmm(alpha, bs, beta, cs).map_err(to_py)
        })
    }

    /// The SDDMM `out_k = ⟨left_i, right_j⟩` on A's pattern (CSR order; `left`: `rows × k`,
    /// `right`: `cols × k`, both float32 or both float64, sums in f64, the result in their type):
    /// the gradient of `A·right` with respect to A's values for an output gradient `left`.
    fn sddmm<'py>(
        &self,
        py: Python<'py>,
        left: Dense2<'py>,
        right: Dense2<'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match (&left, &right) {
            (Dense2::F32(left), Dense2::F32(right)) => {
                let (k, l, r) = self.sddmm_operands(left, right)?;
                let v = self.with(py, |i| {
                    let g = sddmm(&i.a, l, r, k).map_err(value_err)?;
                    Ok(g.into_iter().map(|x| x as f32).collect::<Vec<_>>())
                })?;
                Ok(PyArray1::from_vec(py, v).into_any())
            }
            (Dense2::F64(left), Dense2::F64(right)) => {
                let (k, l, r) = self.sddmm_operands(left, right)?;
                let v = self.with(py, |i| sddmm(&i.a, l, r, k).map_err(value_err))?;
                Ok(PyArray1::from_vec(py, v).into_any())
            }
            _ => Err(PyTypeError::new_err(
                "left, right: need both float32 or both float64",
            )),
        }
    }

    /// The float64 reference path: `values` (one per stored position, CSR order) times `b`
    /// (`cols × n`, float64), or `Aᵀ·b` with `transpose` (`b`: `rows × n`); sums in f64.
    #[pyo3(signature = (values, b, transpose=false))]
    fn spmm_f64<'py>(
        &self,
        py: Python<'py>,
        values: PyReadonlyArray1<'py, f64>,
        b: PyReadonlyArray2<'py, f64>,
        transpose: bool,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (inner_rows, out_rows) = if transpose {
            (self.rows, self.cols)
        } else {
            (self.cols, self.rows)
        };
        let n = self.check_dense(if transpose { "grad" } else { "X" }, b.shape(), inner_rows)?;
        let (vs, bs) = (slice_of(&values, "values")?, slice_of(&b, "X")?);
        self.check_values(vs.len())?;
        let c = self.with(py, |i| {
            if transpose {
                let (t, map) = i.transpose_pattern();
                let vt: Vec<f64> = map.iter().map(|&p| vs[p as usize]).collect();
                pattern_spmm_f64(t, &vt, bs, n).map_err(value_err)
            } else {
                pattern_spmm_f64(&i.a, vs, bs, n).map_err(value_err)
            }
        })?;
        let arr = PyArray1::from_vec(py, c);
        arr.reshape([out_rows, n])
    }

    /// Replaces the values (float32, one per stored nonzero in CSR order), keeping the pattern
    /// and the preparation (Aᵀ too, when prepared).
    fn update_values(&self, py: Python<'_>, values: PyReadonlyArray1<'_, f32>) -> PyResult<()> {
        let vs = slice_of(&values, "values")?;
        self.check_values(vs.len())?;
        self.with(py, |i| {
            i.prepared.update_values(vs).map_err(to_py)?;
            i.a.data_mut().copy_from_slice(vs);
            if let Some((t, map)) = i.t_pattern.as_mut() {
                for (dst, &p) in t.data_mut().iter_mut().zip(map.iter()) {
                    *dst = vs[p as usize];
                }
                if let Some(tp) = i.t_prepared.as_mut() {
                    tp.update_values(t.data()).map_err(to_py)?;
                }
            }
            Ok(())
        })
    }

    /// `c = alpha·A·b + beta·c` on CUDA memory: `b` (`cols × n`) and `c` (`rows × n`) are device
    /// addresses of C-contiguous float32 tensors on this matrix's device, ordered on the CUDA
    /// stream `stream` (a raw `CUstream`, 0 for the legacy default stream). No synchronisation.
    #[pyo3(signature = (alpha, b, n, beta, c, stream, transpose=false))]
    #[allow(clippy::too_many_arguments)]
    fn spmm_cuda(
        &self,
        py: Python<'_>,
        alpha: f32,
        b: u64,
        n: usize,
        beta: f32,
        c: u64,
        stream: usize,
        transpose: bool,
    ) -> PyResult<()> {
        let (rows, cols) = if transpose {
            (self.cols, self.rows)
        } else {
            (self.rows, self.cols)
        };
        self.with(py, |i| {
            let ctx = cuda::context(&i.engine)?;
            let prepared = i.prepared(transpose)?;
            cuda::spmm(&ctx, prepared, alpha, b, cols, n, beta, c, rows, stream)
        })
    }

    /// Host seconds of `iters` back-to-back calls of the Rust product behind
    /// [`PyMatrix::spmm_cuda`] (`c = A·b`, same arguments), in one call from Python: the bench
    /// subtracts it from the time of as many Python calls to measure the Python layer's overhead.
    fn time_spmm_cuda(
        &self,
        py: Python<'_>,
        b: u64,
        n: usize,
        c: u64,
        stream: usize,
        iters: usize,
    ) -> PyResult<f64> {
        let (rows, cols) = (self.rows, self.cols);
        self.with(py, |i| {
            let ctx = cuda::context(&i.engine)?;
            let start = std::time::Instant::now();
            for _ in 0..iters {
                cuda::spmm(&ctx, &mut i.prepared, 1.0, b, cols, n, 0.0, c, rows, stream)?;
            }
            Ok(start.elapsed().as_secs_f64())
        })
    }

    /// The SDDMM on CUDA memory: `out` (float32, `nnz`) ← ⟨left_i, right_j⟩ on A's pattern, with
    /// `left` (`rows × k`) and `right` (`cols × k`) device addresses, ordered on `stream`.
    fn sddmm_cuda(
        &self,
        py: Python<'_>,
        left: u64,
        right: u64,
        k: usize,
        out: u64,
        stream: usize,
    ) -> PyResult<()> {
        let (rows, cols) = (self.rows, self.cols);
        self.with(py, |i| {
            cuda::sddmm(i, left, rows, right, cols, k, out, stream)
        })
    }
}

/// Approximate dense product (SpAMM) of two float32 C-contiguous matrices; returns `(C, report)`.
#[pyfunction]
#[pyo3(signature = (a, b, tau=None, rel_error=None, valid_ratio=None, device="auto"))]
fn spamm<'py>(
    py: Python<'py>,
    a: PyReadonlyArray2<'py, f32>,
    b: PyReadonlyArray2<'py, f32>,
    tau: Option<f32>,
    rel_error: Option<f64>,
    valid_ratio: Option<f64>,
    device: &str,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyDict>)> {
    use tcsparse::spamm::{DenseRef, SpammOptions, TauTarget};
    let target = match (tau, rel_error, valid_ratio) {
        (Some(t), None, None) => TauTarget::Tau(t),
        (None, Some(e), None) => TauTarget::RelError(e),
        (None, None, Some(r)) => TauTarget::ValidRatio(r),
        (None, None, None) => TauTarget::RelError(1e-5),
        _ => {
            return Err(PyValueError::new_err(
                "give at most one of tau, rel_error, valid_ratio",
            ));
        }
    };
    let device = match device {
        "auto" | "cpu" | "cuda" => device,
        other => {
            return Err(PyValueError::new_err(format!(
                "device: {other:?} is not one of 'auto', 'cpu', 'cuda'"
            )));
        }
    };
    let (ash, bsh) = (a.shape().to_vec(), b.shape().to_vec());
    let (ad, bd) = (slice_of(&a, "a")?, slice_of(&b, "b")?);
    let opts = SpammOptions::builder().target(target).build();
    let (c, report) = py.detach(|| {
        guard(|| {
            let engine = if device == "cpu" {
                tcsparse::Engine::cpu("device=\"cpu\"")
            } else {
                tcsparse::Engine::new()
            };
            if device == "cuda" && engine.backend() == tcsparse::Backend::Cpu {
                return Err(to_py(tcsparse::Error::Unavailable(format!(
                    "device=\"cuda\": {}",
                    engine.message()
                ))));
            }
            let a = DenseRef::new(ad, ash[0], ash[1]);
            let b = DenseRef::new(bd, bsh[0], bsh[1]);
            engine
                .prepare_spamm(a, &opts)
                .and_then(|mut p| p.spamm(b))
                .map_err(to_py)
        })
    })?;
    let out = PyArray1::from_vec(py, c).reshape([ash[0], bsh[1]])?;
    let d = PyDict::new(py);
    d.set_item("backend", report.backend)?;
    d.set_item("precision", report.precision)?;
    d.set_item("tau", report.tau)?;
    d.set_item("valid_ratio", report.valid_ratio)?;
    d.set_item("rel_bound", report.rel_bound)?;
    d.set_item("abs_bound", report.abs_bound)?;
    d.set_item("attempts", report.attempts)?;
    Ok((out, d))
}

/// Whether a CUDA GPU is usable (device count > 0 and the driver loads).
#[pyfunction]
fn cuda_available() -> bool {
    guard(|| Ok(tcsparse::gpu::Gpu::device_count() > 0)).unwrap_or(false)
}

/// Panics inside [`guard`]: the test that a Rust panic reaches Python as `RuntimeError`.
#[pyfunction]
fn _panic_for_test() -> PyResult<()> {
    guard(|| -> PyResult<()> { panic!("deliberate panic for the boundary test") })
}

/// The extension module.
#[pymodule]
fn _tcsparse(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMatrix>()?;
    m.add_function(wrap_pyfunction!(spamm, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
