"""tcsparse: sparse × dense products on NVIDIA tensor cores for NumPy, SciPy and PyTorch.

A matrix is prepared once — reordered, put in a tensor-core format, planned, tuned and uploaded —
and then multiplied many times::

    import tcsparse, torch
    A = tcsparse.SparseMatrix(adj, device="cuda", n_hint=128, precision="tf32")  # scipy or torch sparse
    Y = A @ X                     # X: a (cols, n) float32 CUDA tensor; Y: (rows, n), same device
    Y = tcsparse.spmm(A, X, alpha=2.0, beta=1.0, out=Y)   # Y = 2·A·X + Y

Inputs
    The matrix: any SciPy sparse matrix or array (CSR is taken as is; CSC, COO and the other formats
    are converted to CSR) or a ``torch`` sparse CSR/COO tensor. Its structure is checked as the Rust
    ``Csr`` is (row offsets of ``rows + 1`` entries, non-decreasing, within ``nnz``; sorted,
    duplicate-free, in-range column indices): a bad one raises ``ValueError``.

    Dense operands: C-contiguous 2-D arrays/tensors. On a CUDA matrix, ``torch`` CUDA tensors on the
    same device (float32) are used in place — their device pointers go to the kernels, the product
    is ordered on the caller's current CUDA stream (``torch.cuda.current_stream()``), nothing is
    copied and the host never waits. On a CPU matrix, NumPy arrays and CPU tensors run the CPU
    reference path: float32 through the prepared matrix, float64 through a float64 reference path
    (sums in f64 over the matrix's pattern: this is what ``torch.autograd.gradcheck`` runs through).

    Wrong dtype, shape, device, a non-contiguous operand or a freed matrix raise ``TypeError`` /
    ``ValueError`` / ``RuntimeError`` naming the argument; nothing is converted or copied silently.

Autograd
    ``tcsparse.spmm(A, X, values=w)`` with tensors that require grad is differentiable with respect
    to ``X`` (through ``Aᵀ``, prepared once on first use through the same engine) and to the matrix
    values ``w`` (one per stored nonzero in CSR order, through an SDDMM ``dA_ij = ⟨dY_i, X_j⟩``), so
    learned edge weights train.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from . import _tcsparse
from ._tcsparse import cuda_available

__version__: str = _tcsparse.__version__

__all__ = [
    "SparseMatrix",
    "spmm",
    "sddmm",
    "spamm",
    "cuda_available",
    "__version__",
]

_F32_MAX = float(np.finfo(np.float32).max)


# ---------------------------------------------------------------------------------------------
# helpers


def _torch() -> Any:
    """The torch module when the caller has imported it (tensors cannot exist otherwise)."""
    return sys.modules.get("torch")


def _is_tensor(x: Any) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def _describe(x: Any) -> str:
    return f"{type(x).__module__}.{type(x).__qualname__}"


def _parse_device(device: Any) -> Tuple[str, Optional[int]]:
    """``'cpu'``, ``'cuda'``, ``'cuda:N'`` or a ``torch.device`` → (kind, ordinal)."""
    text = str(device)
    if text == "cpu":
        return "cpu", None
    if text == "cuda":
        t = _torch()
        if t is not None and t.cuda.is_available():
            return "cuda", int(t.cuda.current_device())
        return "cuda", 0
    if text.startswith("cuda:"):
        try:
            index = int(text[5:])
        except ValueError:
            index = -1
        if index >= 0:
            return "cuda", index
    raise ValueError(f"device: {device!r} is not 'cpu', 'cuda' or 'cuda:N'")


def _values_f32(data: np.ndarray, what: str) -> np.ndarray:
    if data.dtype == np.float32:
        return np.ascontiguousarray(data)
    if data.dtype == np.float64:
        finite = data[np.isfinite(data)]
        if finite.size and float(np.abs(finite).max()) > _F32_MAX:
            raise ValueError(f"{what}: a finite value does not fit float32")
        return data.astype(np.float32)
    raise TypeError(f"{what}: dtype {data.dtype} is not float32 or float64")


def _index_array(x: Any, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ValueError(f"{what}: expected a 1-D integer array, got {a.dtype} of shape {a.shape}")
    return a.astype(np.int64, copy=False)


def _csr_arrays(m: Any) -> Tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, indptr, indices, data) of a SciPy or torch sparse matrix."""
    sp = sys.modules.get("scipy.sparse")
    if sp is not None and sp.issparse(m):
        if m.ndim != 2:
            raise ValueError(f"A: expected a 2-D sparse matrix, got {m.ndim}-D")
        if m.format != "csr":
            # CSC, COO, …: converted (a new CSR with sorted, summed entries).
            m = m.tocsr()
            m.sum_duplicates()
        elif not m.has_canonical_format:
            raise ValueError(
                "A: the CSR matrix has unsorted or duplicate column indices; "
                "call A.sum_duplicates() (or A.sort_indices()) first"
            )
        rows, cols = m.shape
        return (
            int(rows),
            int(cols),
            _index_array(m.indptr, "indptr"),
            _index_array(m.indices, "indices"),
            _values_f32(np.asarray(m.data), "A.data"),
        )
    t = _torch()
    if t is not None and isinstance(m, t.Tensor):
        if m.dim() != 2:
            raise ValueError(f"A: expected a 2-D sparse tensor, got {m.dim()}-D")
        if m.layout == t.sparse_coo:
            m = m.coalesce().to_sparse_csr()
        elif m.layout != t.sparse_csr:
            raise TypeError(
                f"A: a torch tensor with layout {m.layout} (expected torch.sparse_csr or "
                "torch.sparse_coo; for a dense tensor use A.to_sparse_csr())"
            )
        rows, cols = m.shape
        # The structure goes to the host once, at preparation (the engine reorders and uploads it).
        crow = m.crow_indices().detach().cpu().numpy()
        col = m.col_indices().detach().cpu().numpy()
        val = m.values().detach().cpu().numpy()
        return (
            int(rows),
            int(cols),
            _index_array(crow, "crow_indices"),
            _index_array(col, "col_indices"),
            _values_f32(val, "A.values()"),
        )
    raise TypeError(
        f"A: expected a scipy.sparse matrix/array or a torch sparse CSR/COO tensor, got {_describe(m)}"
    )


# ---------------------------------------------------------------------------------------------
# the matrix


class SparseMatrix:
    """A sparse matrix prepared once for many products ``A @ X``.

    Args:
        m: a SciPy sparse matrix/array (any format) or a torch sparse CSR/COO tensor.
        device: ``'cpu'`` (the CPU reference path), ``'cuda'``/``'cuda:N'`` or a ``torch.device``.
        n_hint: the number of columns of X the preparation (plan, tuning) is made for; products
            may use any number.
        precision: ``'tf32'`` (tensor cores allowed, the default) or ``'f32'`` (f32 rounding only).
        tune: on the GPU, time the candidate kernels at preparation and keep the fastest.

    Raises:
        TypeError: ``m`` is not a sparse matrix.
        ValueError: a malformed structure (bad ``indptr``, unsorted/duplicate/out-of-range
            indices), a bad ``device``/``precision``/``n_hint``.
        RuntimeError: ``device='cuda'`` without a usable GPU.
    """

    def __init__(
        self,
        m: Any,
        device: Any = "cpu",
        n_hint: int = 128,
        precision: str = "tf32",
        tune: bool = True,
    ) -> None:
        kind, index = _parse_device(device)
        if not isinstance(n_hint, (int, np.integer)) or isinstance(n_hint, bool) or n_hint < 1:
            raise ValueError(f"n_hint: expected a positive int, got {n_hint!r}")
        rows, cols, indptr, indices, data = _csr_arrays(m)
        self._m = _tcsparse._Matrix(
            rows, cols, indptr, indices, data, index, int(n_hint), str(precision), bool(tune)
        )
        self._kind = kind
        self._index = index
        # Fixed for the matrix's life (new values keep the pattern): read once, not per call.
        self._shape: Tuple[int, int] = tuple(self._m.shape)
        self._nnz: int = int(self._m.nnz)

    # -- description ---------------------------------------------------------------------------

    @property
    def shape(self) -> Tuple[int, int]:
        """``(rows, cols)``."""
        return self._shape

    @property
    def nnz(self) -> int:
        """Stored nonzeros."""
        return self._nnz

    @property
    def device(self) -> str:
        """``'cpu'`` or ``'cuda:N'``."""
        return "cpu" if self._index is None else f"cuda:{self._index}"

    @property
    def is_cuda(self) -> bool:
        """Whether products run on a GPU."""
        return self._index is not None

    @property
    def precision(self) -> str:
        """``'tf32'`` or ``'f32'``."""
        return self._m.precision

    @property
    def kernel(self) -> str:
        """The kernel products run (chosen at preparation)."""
        return self._m.kernel

    @property
    def dtype(self) -> Any:
        """``numpy.float32`` (the prepared matrix's value type)."""
        return np.float32

    def __repr__(self) -> str:
        if self._m.freed:
            return f"SparseMatrix(shape={self.shape}, nnz={self.nnz}, freed)"
        return (
            f"SparseMatrix(shape={self.shape}, nnz={self.nnz}, device={self.device!r}, "
            f"precision={self.precision!r}, kernel={self.kernel!r})"
        )

    def values(self) -> np.ndarray:
        """The current values (float32, CSR order of the input)."""
        return self._m.values()

    def to_scipy(self) -> Any:
        """The matrix as a ``scipy.sparse.csr_array`` (needs SciPy)."""
        import scipy.sparse as sp

        return sp.csr_array((self._m.values(), self._m.indices(), self._m.indptr()), shape=self.shape)

    def free(self) -> None:
        """Releases host and device memory now; any later use raises ``RuntimeError``."""
        self._m.free()

    # -- products ------------------------------------------------------------------------------

    def __matmul__(self, x: Any) -> Any:
        return spmm(self, x)

    def matmul(self, x: Any) -> Any:
        """``A @ x``."""
        return spmm(self, x)

    def spmv(self, x: Any, alpha: float = 1.0, beta: float = 0.0, out: Any = None) -> Any:
        """``y = alpha·A·x + beta·out`` for a vector ``x`` of ``cols`` entries (a product with one
        column); NumPy/CPU tensors on a CPU matrix, CUDA tensors on a CUDA matrix."""
        if _is_tensor(x) or isinstance(x, np.ndarray):
            if x.ndim != 1:
                raise ValueError(f"x: expected a 1-D vector, got shape {tuple(x.shape)}")
            y2 = None if out is None else _as_column(out, "out")
            y = spmm(self, _as_column(x, "x"), alpha=alpha, beta=beta, out=y2)
            return y.reshape(-1)
        raise TypeError(f"x: expected a numpy.ndarray or torch.Tensor, got {_describe(x)}")

    def update_values(self, values: Any) -> None:
        """Replaces the values (one per stored nonzero, CSR order of the input), keeping the
        pattern and the preparation. A NumPy array or a CPU tensor; a CUDA tensor is copied to the
        host (this waits for the GPU)."""
        if _is_tensor(values):
            values = values.detach()
            if values.device.type != "cpu":
                values = values.cpu()  # documented: the prepared matrix is refilled from the host
            values = values.numpy()
        if not isinstance(values, np.ndarray):
            raise TypeError(f"values: expected a numpy.ndarray or torch.Tensor, got {_describe(values)}")
        if values.ndim != 1:
            raise ValueError(f"values: expected a 1-D array of {self.nnz}, got shape {values.shape}")
        if values.dtype != np.float32:
            raise TypeError(f"values: dtype {values.dtype}, expected float32")
        self._m.update_values(values)


def _as_column(x: Any, what: str) -> Any:
    if x.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D vector, got shape {tuple(x.shape)}")
    return x.reshape(-1, 1)


def _check_matrix(a: Any) -> SparseMatrix:
    if not isinstance(a, SparseMatrix):
        raise TypeError(f"A: expected a tcsparse.SparseMatrix, got {_describe(a)}")
    return a


# ---------------------------------------------------------------------------------------------
# NumPy path


def _check_ndarray(x: Any, what: str, rows: int) -> None:
    if x.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array ({rows}, n), got shape {x.shape}")
    if x.shape[0] != rows:
        raise ValueError(f"{what}: has {x.shape[0]} rows, expected {rows}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{what}: dtype {x.dtype} is not float32 or float64")
    if not x.flags.c_contiguous:
        raise ValueError(f"{what}: must be C-contiguous (np.ascontiguousarray({what}))")


def _check_out_ndarray(out: Any, rows: int, n: int, dtype: Any) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a numpy.ndarray like X, got {_describe(out)}")
    if out.shape != (rows, n):
        raise ValueError(f"out: has shape {out.shape}, expected {(rows, n)}")
    if out.dtype != dtype:
        raise TypeError(f"out: dtype {out.dtype}, expected {np.dtype(dtype)} (the dtype of X)")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out: must be C-contiguous and writeable")


def _spmm_numpy(a: SparseMatrix, x: np.ndarray, alpha: float, beta: float, out: Any, values: Any) -> np.ndarray:
    if a.is_cuda:
        raise ValueError(f"X: a NumPy array (host memory) but A is on {a.device}; pass a CUDA tensor")
    rows, cols = a.shape
    _check_ndarray(x, "X", cols)
    n = x.shape[1]
    if out is None:
        if beta != 0.0:
            raise ValueError("beta: nonzero beta needs out (the C it scales)")
        out = np.empty((rows, n), dtype=x.dtype)
    else:
        _check_out_ndarray(out, rows, n, x.dtype)
    if x.dtype == np.float32:
        if values is not None:
            a.update_values(values)
        a._m.spmm(float(alpha), x, float(beta), out)
        return out
    vals = a._m.values().astype(np.float64) if values is None else _f64_values(values, a.nnz)
    y = a._m.spmm_f64(vals, x)
    if beta == 0.0:
        np.multiply(y, alpha, out=out)
    else:
        out *= beta
        out += alpha * y
    return out


def _f64_values(values: Any, nnz: int) -> np.ndarray:
    v = values.detach().cpu().numpy() if _is_tensor(values) else np.asarray(values)
    if v.ndim != 1 or v.shape[0] != nnz:
        raise ValueError(f"values: expected {nnz} values, got shape {v.shape}")
    if v.dtype != np.float64:
        raise TypeError(f"values: dtype {v.dtype}, expected float64 (the dtype of X)")
    return np.ascontiguousarray(v)


# ---------------------------------------------------------------------------------------------
# torch path


def _check_tensor(a: SparseMatrix, x: Any, what: str, rows: int) -> None:
    # On every call's path: each attribute is read once (a torch.device is built per access).
    t = _torch()
    if x.layout != t.strided:
        raise TypeError(f"{what}: a {x.layout} tensor; expected a dense (strided) tensor")
    shape = x.shape
    if len(shape) != 2:
        raise ValueError(f"{what}: expected a 2-D tensor ({rows}, n), got shape {tuple(shape)}")
    if shape[0] != rows:
        raise ValueError(f"{what}: has {shape[0]} rows, expected {rows}")
    dev = x.device
    kind, dtype = dev.type, x.dtype
    if kind == "cuda":
        if a._index is None:
            raise ValueError(f"{what}: is on {dev} but A is on the CPU")
        if dev.index != a._index:
            raise ValueError(f"{what}: is on {dev} but A is on {a.device}")
        if dtype != t.float32:
            raise TypeError(f"{what}: dtype {dtype}; CUDA products are float32")
    elif kind == "cpu":
        if a._index is not None:
            raise ValueError(f"{what}: is on the CPU but A is on {a.device}")
        if dtype != t.float32 and dtype != t.float64:
            raise TypeError(f"{what}: dtype {dtype} is not float32 or float64")
    else:
        raise ValueError(f"{what}: is on {dev}; tcsparse runs on 'cpu' and 'cuda'")
    if not x.is_contiguous():
        raise ValueError(f"{what}: must be contiguous (call {what}.contiguous())")


def _new_out(like: Any, rows: int, n: int) -> Any:
    return _torch().empty((rows, n), dtype=like.dtype, device=like.device)


def _check_out_tensor(a: SparseMatrix, out: Any, x: Any, rows: int, n: int) -> None:
    if not _is_tensor(out):
        raise TypeError(f"out: expected a torch.Tensor like X, got {_describe(out)}")
    _check_tensor(a, out, "out", rows)
    if out.shape[1] != n:
        raise ValueError(f"out: has {out.shape[1]} columns, X has {n}")
    if out.dtype != x.dtype:
        raise TypeError(f"out: dtype {out.dtype}, expected {x.dtype} (the dtype of X)")


class _NoGuard:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NO_GUARD = _NoGuard()


def _on_device(a: SparseMatrix) -> Any:
    """The engine makes A's device current on the calling thread (its primary context): when that
    is not torch's current device, ``torch.cuda.device`` restores torch's afterwards."""
    t = _torch()
    if t.cuda.current_device() == a._index:
        return _NO_GUARD
    return t.cuda.device(a._index)


def _stream(a: SparseMatrix) -> int:
    """The raw handle of torch's current CUDA stream on A's device."""
    t = _torch()
    raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:  # the handle without building a torch.cuda.Stream (a few µs a call)
        return raw(a._index)
    return int(t.cuda.current_stream(a._index).cuda_stream)


def _product(
    a: SparseMatrix, values: Any, x: Any, alpha: float, beta: float, out: Any, transpose: bool
) -> Any:
    """``out = alpha·op(A)·x + beta·out`` on tensors (no autograd), op(A) = A or Aᵀ."""
    t = _torch()
    rows, cols = a.shape
    if transpose:
        rows, cols = cols, rows
    n = x.shape[1]
    if out is None:
        if beta != 0.0:
            raise ValueError("beta: nonzero beta needs out (the C it scales)")
        out = _new_out(x, rows, n)
    if x.device.type == "cuda":
        if values is not None and not transpose:
            a.update_values(values)
        if n == 0 or rows == 0:
            return out
        if cols == 0 or a.nnz == 0:
            if beta == 0.0:
                out.zero_()
            else:
                out.mul_(beta)
            return out
        with _on_device(a):
            a._m.spmm_cuda(float(alpha), x.data_ptr(), n, float(beta), out.data_ptr(), _stream(a), transpose)
        return out
    xn = x.detach().numpy()
    on = out.detach().numpy()
    if x.dtype == t.float32:
        if values is not None and not transpose:
            a.update_values(values)
        a._m.spmm(float(alpha), xn, float(beta), on, transpose)
        return out
    vals = a._m.values().astype(np.float64) if values is None else _f64_values(values, a.nnz)
    y = t.from_numpy(a._m.spmm_f64(vals, xn, transpose))
    with t.no_grad():
        if beta == 0.0:
            out.copy_(y.mul_(alpha))
        else:
            out.mul_(beta).add_(y, alpha=alpha)
    return out


def _sddmm_tensors(a: SparseMatrix, left: Any, right: Any) -> Any:
    """``v_k = ⟨left_i, right_j⟩`` on A's pattern, as a tensor on left's device."""
    t = _torch()
    if left.device.type == "cuda":
        out = t.empty(a.nnz, dtype=t.float32, device=left.device)
        if a.nnz == 0:
            return out
        if left.shape[1] == 0:
            return out.zero_()
        with _on_device(a):
            a._m.sddmm_cuda(left.data_ptr(), right.data_ptr(), left.shape[1], out.data_ptr(), _stream(a))
        return out
    return t.from_numpy(a._m.sddmm(left.detach().numpy(), right.detach().numpy()))


def _autograd_function() -> Any:
    t = _torch()
    cached = getattr(_autograd_function, "cls", None)
    if cached is not None:
        return cached

    class SpMMFunction(t.autograd.Function):
        """``Y = alpha·A·X`` with gradients to ``X`` (``alpha·Aᵀ·dY``) and to A's values
        (``alpha·⟨dY_i, X_j⟩`` on A's pattern)."""

        @staticmethod
        def forward(ctx: Any, a: SparseMatrix, values: Any, x: Any, alpha: float) -> Any:  # type: ignore[override]
            ctx.a = a
            ctx.alpha = alpha
            ctx.save_for_backward(values, x)
            return _product(a, values, x, alpha, 0.0, None, False)

        @staticmethod
        def backward(ctx: Any, dy: Any) -> Any:  # type: ignore[override]
            values, x = ctx.saved_tensors
            a, alpha = ctx.a, ctx.alpha
            # The incoming gradient may be a broadcast view; the kernels read contiguous rows.
            dy = dy.contiguous()
            dvalues = dx = None
            if ctx.needs_input_grad[2]:
                dx = _product(a, values, dy, alpha, 0.0, None, True)
            if ctx.needs_input_grad[1]:
                dvalues = _sddmm_tensors(a, dy, x.detach())
                if alpha != 1.0:
                    dvalues = dvalues * alpha
            return None, dvalues, dx, None

    _autograd_function.cls = SpMMFunction  # type: ignore[attr-defined]
    return SpMMFunction


def _spmm_torch(a: SparseMatrix, x: Any, alpha: float, beta: float, out: Any, values: Any) -> Any:
    t = _torch()
    rows, cols = a.shape
    _check_tensor(a, x, "X", cols)
    n = x.shape[1]
    if values is not None:
        if not _is_tensor(values):
            raise TypeError(f"values: expected a torch.Tensor like X, got {_describe(values)}")
        if values.dim() != 1 or values.shape[0] != a.nnz:
            raise ValueError(f"values: expected {a.nnz} values, got shape {tuple(values.shape)}")
        if values.dtype != x.dtype:
            raise TypeError(f"values: dtype {values.dtype}, expected {x.dtype} (the dtype of X)")
        if values.device != x.device:
            raise ValueError(f"values: is on {values.device} but X is on {x.device}")
    if out is not None:
        _check_out_tensor(a, out, x, rows, n)
    needs_grad = t.is_grad_enabled() and (
        x.requires_grad or (values is not None and values.requires_grad)
    )
    if needs_grad:
        if out is not None or beta != 0.0:
            raise ValueError("out/beta: not supported when gradients are required")
        return _autograd_function().apply(a, values, x, float(alpha))
    # No autograd graph: no input requires grad (the float64 path's torch ops run under no_grad).
    return _product(a, values, x, float(alpha), float(beta), out, False)


# ---------------------------------------------------------------------------------------------
# public functions


def spmm(
    A: SparseMatrix,
    X: Any,
    alpha: float = 1.0,
    beta: float = 0.0,
    out: Any = None,
    values: Any = None,
) -> Any:
    """``alpha·A·X + beta·out`` (BLAS semantics: with ``beta == 0``, ``out`` is never read).

    Args:
        A: a prepared :class:`SparseMatrix`.
        X: ``(cols, n)``, C-contiguous: a NumPy array or CPU tensor (CPU matrix; float32 through the
            prepared matrix, float64 through the float64 reference path) or a float32 CUDA tensor
            on A's device (used in place, ordered on the current CUDA stream).
        alpha, beta: scalars.
        out: the ``(rows, n)`` result to write (same kind, dtype and device as X); a new one when
            ``None``.
        values: A's values to use (one per stored nonzero, CSR order, X's dtype); with tensors
            that require grad, the product is differentiable with respect to them.

    Returns:
        ``out`` (or the new result).
    """
    a = _check_matrix(A)
    if _is_tensor(X):
        return _spmm_torch(a, X, alpha, beta, out, values)
    if isinstance(X, np.ndarray):
        return _spmm_numpy(a, X, alpha, beta, out, values)
    raise TypeError(f"X: expected a numpy.ndarray or torch.Tensor, got {_describe(X)}")


def sddmm(A: SparseMatrix, left: Any, right: Any) -> Any:
    """The sampled dense-dense product on A's pattern: ``v_k = ⟨left_i, right_j⟩`` for each stored
    position ``k = (i, j)`` (CSR order), with ``left`` ``(rows, k)`` and ``right`` ``(cols, k)``.
    This is the gradient of ``A @ right`` with respect to A's values for an output gradient
    ``left``."""
    a = _check_matrix(A)
    rows, cols = a.shape
    if _is_tensor(left) and _is_tensor(right):
        _check_tensor(a, left, "left", rows)
        _check_tensor(a, right, "right", cols)
        if left.shape[1] != right.shape[1] or left.dtype != right.dtype:
            raise ValueError("left, right: need the same number of columns and the same dtype")
        return _sddmm_tensors(a, left, right)
    if isinstance(left, np.ndarray) and isinstance(right, np.ndarray):
        _check_ndarray(left, "left", rows)
        _check_ndarray(right, "right", cols)
        if left.shape[1] != right.shape[1] or left.dtype != right.dtype:
            raise ValueError("left, right: need the same number of columns and the same dtype")
        return a._m.sddmm(left, right)
    raise TypeError(
        f"left, right: expected two numpy.ndarray or two torch.Tensor, got {_describe(left)}, {_describe(right)}"
    )


def spamm(
    a: Any,
    b: Any,
    tau: Optional[float] = None,
    rel_error: Optional[float] = None,
    valid_ratio: Optional[float] = None,
    device: str = "auto",
) -> Tuple[Any, Dict[str, Any]]:
    """Approximate dense product ``C ≈ a·b`` of decay matrices (cuSpAMM): tile products whose
    norm product is below τ are skipped. τ is given (``tau``), or chosen for a bound on the
    relative error (``rel_error``, default 1e-5) or for a fraction of computed tiles
    (``valid_ratio``). ``a``, ``b``: float32 2-D C-contiguous NumPy arrays or CPU tensors (host
    memory). ``device``: ``'auto'`` (the GPU when there is one), ``'cpu'`` or ``'cuda'``.

    Returns ``(C, report)`` with ``report`` a dict (``tau``, ``valid_ratio``, ``rel_bound``, …)."""
    as_tensor = False
    arrays = []
    for name, m in (("a", a), ("b", b)):
        if _is_tensor(m):
            if m.device.type != "cpu":
                raise ValueError(f"{name}: spamm takes host memory; {name} is on {m.device}")
            as_tensor = True
            m = m.detach().numpy()
        if not isinstance(m, np.ndarray):
            raise TypeError(f"{name}: expected a numpy.ndarray or torch.Tensor, got {_describe(m)}")
        if m.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D matrix, got shape {m.shape}")
        if m.dtype != np.float32:
            raise TypeError(f"{name}: dtype {m.dtype}, expected float32")
        if not m.flags.c_contiguous:
            raise ValueError(f"{name}: must be C-contiguous")
        arrays.append(m)
    if arrays[0].shape[1] != arrays[1].shape[0]:
        raise ValueError(f"a, b: inner dimensions differ ({arrays[0].shape} · {arrays[1].shape})")
    c, report = _tcsparse.spamm(arrays[0], arrays[1], tau, rel_error, valid_ratio, device)
    if as_tensor:
        c = _torch().from_numpy(c)
    return c, report
