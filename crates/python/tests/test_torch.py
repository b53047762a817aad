"""The PyTorch CPU path: tensors in and out, torch sparse inputs, autograd (gradcheck in f64)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcsparse  # noqa: E402
from conftest import random_csr, reference  # noqa: E402

F32_BOUND = 64 * 2.0**-24


def test_cpu_tensors_match_the_reference():
    m = random_csr(80, 40, 0.1, seed=20)
    a = tcsparse.SparseMatrix(m, precision="f32")
    x = torch.randn(40, 8, generator=torch.Generator().manual_seed(0))
    y = a @ x
    assert isinstance(y, torch.Tensor) and y.shape == (80, 8) and y.dtype == torch.float32
    want, scale = reference(m, x.numpy())
    err = np.abs(y.numpy().astype(np.float64) - want)
    assert np.all(err <= F32_BOUND * scale + 1e-30)


@pytest.mark.parametrize("layout", ["csr", "coo"])
def test_torch_sparse_inputs(layout):
    m = random_csr(30, 20, 0.2, seed=21)
    dense = torch.from_numpy(m.toarray())
    t = dense.to_sparse_csr() if layout == "csr" else dense.to_sparse()
    a = tcsparse.SparseMatrix(t, precision="f32")
    x = torch.randn(20, 3, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(a @ x, dense @ x, rtol=1e-5, atol=1e-5)


def test_gradcheck_in_float64():
    m = random_csr(12, 9, 0.3, seed=22)
    a = tcsparse.SparseMatrix(m)
    g = torch.Generator().manual_seed(2)
    values = torch.from_numpy(m.data.astype(np.float64)).requires_grad_()
    x = torch.randn(9, 4, dtype=torch.float64, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, x: tcsparse.spmm(a, x, values=v, alpha=1.5), (values, x))
    assert torch.autograd.gradcheck(lambda x: a @ x, (x,))


def test_float32_gradients_match_float64_ones():
    m = random_csr(50, 30, 0.1, seed=23)
    a = tcsparse.SparseMatrix(m, precision="f32")
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(30, 6, generator=g)
    w0 = torch.from_numpy(m.data.copy())
    dy = torch.randn(50, 6, generator=g)
    grads = []
    for dtype in (torch.float32, torch.float64):
        x = x0.to(dtype, copy=True).requires_grad_()
        w = w0.to(dtype, copy=True).requires_grad_()
        (tcsparse.spmm(a, x, values=w) * dy.to(dtype)).sum().backward()
        grads.append((x.grad, w.grad))
    torch.testing.assert_close(grads[0][0].double(), grads[1][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[0][1].double(), grads[1][1], rtol=1e-5, atol=1e-5)


def test_learned_values_train():
    m = random_csr(20, 20, 0.2, seed=24)
    a = tcsparse.SparseMatrix(m, precision="f32")
    target = torch.from_numpy((m * 0.5).toarray()) @ torch.ones(20, 2)
    w = torch.nn.Parameter(torch.from_numpy(m.data.copy()))
    opt = torch.optim.SGD([w], lr=1.0)
    x = torch.ones(20, 2)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = ((tcsparse.spmm(a, x, values=w) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 1e-3 * losses[0]


def test_bad_tensors_name_the_argument():
    m = random_csr(10, 8, 0.3, seed=25)
    a = tcsparse.SparseMatrix(m)
    with pytest.raises(ValueError, match="X: must be contiguous"):
        a @ torch.ones(3, 8).t()
    with pytest.raises(TypeError, match="X: dtype torch.int64"):
        a @ torch.ones(8, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match="X: has 7 rows"):
        a @ torch.ones(7, 2)
    with pytest.raises(TypeError, match="X: a torch.sparse"):
        a @ torch.ones(8, 2).to_sparse()
    with pytest.raises(ValueError, match="out/beta"):
        tcsparse.spmm(a, torch.ones(8, 2, requires_grad=True), out=torch.empty(10, 2))
    with pytest.raises(TypeError, match="values: dtype"):
        tcsparse.spmm(a, torch.ones(8, 2), values=torch.ones(m.nnz, dtype=torch.float64))
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="X: is on cuda"):
            a @ torch.ones(8, 2, device="cuda")


def test_the_transpose_follows_update_values():
    m = random_csr(40, 30, 0.1, seed=26)
    a = tcsparse.SparseMatrix(m, precision="f32")
    dy = torch.randn(40, 3, generator=torch.Generator().manual_seed(5))
    for scale in (1.0, -2.0, 0.5):
        a.update_values((m.data * scale).astype(np.float32))
        x = torch.zeros(30, 3, requires_grad=True)
        ((a @ x) * dy).sum().backward()
        want = torch.from_numpy((m * scale).T.toarray()) @ dy
        torch.testing.assert_close(x.grad, want, rtol=1e-5, atol=1e-5)
