"""The CPU path through NumPy and SciPy: products against an f64 reference, input checks."""

import numpy as np
import pytest
import scipy.sparse as sp

import tcsparse
from conftest import random_csr, reference

# f32 products over rows of at most k nonzeros: |C - C_exact| <= k·2^-24/(1 - k·2^-24)·(|A|·|X|).
F32_BOUND = 64 * 2.0**-24
# TF32 inputs, f32 sums (the facade's Precision::Tf32 bound).
TF32_BOUND = 2 * 2.0**-10


def scaled_error(got, want, scale):
    err = np.abs(got.astype(np.float64) - want)
    return float(np.max(np.where(scale > 0, err / np.where(scale > 0, scale, 1), err), initial=0.0))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "bsr"])
@pytest.mark.parametrize("precision", ["f32", "tf32"])
def test_spmm_matches_the_f64_reference_for_every_scipy_format(fmt, precision):
    m = random_csr(90, 60, 0.1, seed=2)
    a = tcsparse.SparseMatrix(m.asformat(fmt), device="cpu", n_hint=16, precision=precision)
    assert a.shape == (90, 60) and a.nnz == m.nnz and a.device == "cpu"
    x = np.random.default_rng(3).standard_normal((60, 16)).astype(np.float32)
    y = a @ x
    assert y.shape == (90, 16) and y.dtype == np.float32
    want, scale = reference(m, x)
    assert scaled_error(y, want, scale) <= (F32_BOUND if precision == "f32" else TF32_BOUND)


def test_alpha_beta_and_out_follow_blas_semantics(small):
    a = tcsparse.SparseMatrix(small, precision="f32")
    x = np.random.default_rng(4).standard_normal((50, 5)).astype(np.float32)
    c0 = np.random.default_rng(5).standard_normal((70, 5)).astype(np.float32)
    out = c0.copy()
    r = tcsparse.spmm(a, x, alpha=2.0, beta=-0.5, out=out)
    assert r is out
    want, scale = reference(small, x)
    want = 2.0 * want - 0.5 * c0.astype(np.float64)
    scale = 2.0 * scale + 0.5 * np.abs(c0.astype(np.float64))
    assert scaled_error(out, want, scale) <= F32_BOUND
    # beta = 0: out is never read (NaN in it must not reach the result).
    nan = np.full((70, 5), np.nan, dtype=np.float32)
    tcsparse.spmm(a, x, beta=0.0, out=nan)
    assert np.isfinite(nan).all()


def test_the_binding_multiplies_by_the_transpose(small):
    # The host product autograd's backward runs (torch-free here): c = alpha·Aᵀ·b + beta·c.
    a = tcsparse.SparseMatrix(small, precision="f32")
    b = np.random.default_rng(7).standard_normal((70, 3)).astype(np.float32)
    c0 = np.random.default_rng(8).standard_normal((50, 3)).astype(np.float32)
    out = c0.copy()
    a._m.spmm(1.5, b, 0.25, out, True)
    want, scale = reference(small.T.tocsr(), b)
    want = 1.5 * want + 0.25 * c0.astype(np.float64)
    scale = 1.5 * scale + 0.25 * np.abs(c0.astype(np.float64))
    assert scaled_error(out, want, scale) <= F32_BOUND
    with pytest.raises(ValueError):
        a._m.spmm(1.0, b, 0.0, np.zeros((70, 3), np.float32), True)


def test_spmv(small):
    a = tcsparse.SparseMatrix(small, precision="f32")
    x = np.random.default_rng(6).standard_normal(50).astype(np.float32)
    y = a.spmv(x)
    want, scale = reference(small, x[:, None])
    assert y.shape == (70,)
    assert scaled_error(y[:, None], want, scale) <= F32_BOUND


def test_float64_runs_the_reference_path(small):
    a = tcsparse.SparseMatrix(small)
    x = np.random.default_rng(7).standard_normal((50, 3))
    y = a @ x
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, small.astype(np.float64) @ x, rtol=1e-12, atol=1e-12)


def test_update_values_equals_a_fresh_preparation(small):
    a = tcsparse.SparseMatrix(small, precision="f32")
    x = np.random.default_rng(8).standard_normal((50, 4)).astype(np.float32)
    a @ x
    new = np.random.default_rng(9).uniform(-1, 1, small.nnz).astype(np.float32)
    a.update_values(new)
    m2 = small.copy()
    m2.data = new
    fresh = tcsparse.SparseMatrix(m2, precision="f32")
    np.testing.assert_array_equal(a @ x, fresh @ x)
    np.testing.assert_array_equal(a.values(), new)
    assert (a.to_scipy() != m2).nnz == 0


def test_sddmm_equals_the_dense_product_on_the_pattern(small):
    a = tcsparse.SparseMatrix(small)
    rng = np.random.default_rng(10)
    left = rng.standard_normal((70, 6)).astype(np.float32)
    right = rng.standard_normal((50, 6)).astype(np.float32)
    v = tcsparse.sddmm(a, left, right)
    full = left.astype(np.float64) @ right.astype(np.float64).T
    rows = np.repeat(np.arange(70), np.diff(small.indptr))
    np.testing.assert_allclose(v, full[rows, small.indices], rtol=1e-6, atol=1e-6)


def test_empty_and_degenerate_shapes():
    m = sp.csr_array((4, 3), dtype=np.float32)
    a = tcsparse.SparseMatrix(m)
    np.testing.assert_array_equal(a @ np.ones((3, 2), np.float32), np.zeros((4, 2), np.float32))
    assert (a @ np.ones((3, 0), np.float32)).shape == (4, 0)


def test_spamm_matches_the_dense_product():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    c, report = tcsparse.spamm(a, b, tau=0.0, device="cpu")
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert report["valid_ratio"] == 1.0 and report["backend"] == "cpu"


# -- bad input ------------------------------------------------------------------------------------


def test_bad_indptr_is_refused():
    good = random_csr(5, 5, 0.4, seed=12)
    for indptr in ([0, 2, 1, 3, 3, 3], [0, 1, 2, 3, 4, 99], [0, 1, 2]):
        bad = sp.csr_array((5, 5), dtype=np.float32)
        bad.indptr = np.array(indptr, dtype=np.int32)
        bad.indices = good.indices[: max(indptr)] if max(indptr) <= good.nnz else good.indices
        bad.data = good.data[: len(bad.indices)]
        with pytest.raises(ValueError):
            tcsparse.SparseMatrix(bad)


def test_out_of_range_and_duplicate_indices_are_refused():
    m = sp.csr_array((np.ones(2, np.float32), np.array([0, 7]), np.array([0, 1, 2])), shape=(2, 3))
    with pytest.raises(ValueError):
        tcsparse.SparseMatrix(m)
    dup = sp.csr_array((np.ones(2, np.float32), np.array([1, 1]), np.array([0, 2, 2])), shape=(2, 3))
    with pytest.raises(ValueError, match="sum_duplicates"):
        tcsparse.SparseMatrix(dup)


def test_non_sparse_inputs_are_type_errors():
    with pytest.raises(TypeError, match="A:"):
        tcsparse.SparseMatrix(np.eye(3, dtype=np.float32))
    with pytest.raises(TypeError, match="A:"):
        tcsparse.spmm("not a matrix", np.ones((3, 1), np.float32))


def test_bad_options_name_the_argument(small):
    with pytest.raises(ValueError, match="precision"):
        tcsparse.SparseMatrix(small, precision="f8")
    with pytest.raises(ValueError, match="device"):
        tcsparse.SparseMatrix(small, device="tpu")
    with pytest.raises(ValueError, match="n_hint"):
        tcsparse.SparseMatrix(small, n_hint=0)


def test_bad_dense_operands_name_the_argument(small):
    a = tcsparse.SparseMatrix(small)
    with pytest.raises(ValueError, match="X: has 49 rows"):
        a @ np.ones((49, 2), np.float32)
    with pytest.raises(TypeError, match="X: dtype int64"):
        a @ np.ones((50, 2), np.int64)
    with pytest.raises(ValueError, match="X: must be C-contiguous"):
        a @ np.ones((2, 50), np.float32).T
    with pytest.raises(ValueError, match="X: expected a 2-D"):
        a @ np.ones(50, np.float32)
    with pytest.raises(TypeError, match="X:"):
        a @ [[1.0]] * 50
    with pytest.raises(ValueError, match="out: has shape"):
        tcsparse.spmm(a, np.ones((50, 2), np.float32), out=np.ones((70, 3), np.float32))
    with pytest.raises(TypeError, match="out: dtype"):
        tcsparse.spmm(a, np.ones((50, 2), np.float32), out=np.ones((70, 2), np.float64))
    with pytest.raises(ValueError, match="beta"):
        tcsparse.spmm(a, np.ones((50, 2), np.float32), beta=1.0)
    with pytest.raises(ValueError, match="values"):
        a.update_values(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="values: dtype"):
        a.update_values(np.ones(small.nnz, np.float64))


def test_a_freed_matrix_raises_runtime_error(small):
    a = tcsparse.SparseMatrix(small)
    a.free()
    with pytest.raises(RuntimeError, match="freed"):
        a @ np.ones((50, 1), np.float32)
    with pytest.raises(RuntimeError, match="freed"):
        a.update_values(np.ones(small.nnz, np.float32))
    assert "freed" in repr(a)


def test_cuda_without_a_gpu_is_a_runtime_error(small):
    if tcsparse.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="cuda"):
        tcsparse.SparseMatrix(small, device="cuda")


def test_a_rust_panic_arrives_as_runtime_error():
    with pytest.raises(RuntimeError, match="internal error"):
        tcsparse._tcsparse._panic_for_test()
