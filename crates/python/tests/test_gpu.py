"""The CUDA path (run on a GPU machine: `pytest -m gpu`); skipped without a GPU and torch.cuda."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcsparse  # noqa: E402
from conftest import random_csr, reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (torch.cuda.is_available() and tcsparse.cuda_available()), reason="needs a CUDA GPU"
    ),
]

TF32_BOUND = 2 * 2.0**-10


def check(y, m, x):
    want, scale = reference(m, x.cpu().numpy())
    err = np.abs(y.cpu().numpy().astype(np.float64) - want)
    assert np.all(err <= TF32_BOUND * scale + 1e-30)


@pytest.mark.parametrize("n", [1, 32, 128])
def test_cuda_tensors_in_place(n):
    m = random_csr(3000, 2000, 0.004, seed=30)
    a = tcsparse.SparseMatrix(m, device="cuda", n_hint=n)
    assert a.is_cuda
    x = torch.randn(2000, n, device="cuda")
    y = a @ x
    assert y.device == x.device and y.shape == (3000, n)
    check(y, m, x)
    # alpha, beta and a caller's out.
    out = torch.randn(3000, n, device="cuda")
    c0 = out.clone()
    r = tcsparse.spmm(a, x, alpha=2.0, beta=0.5, out=out)
    assert r.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out, 2.0 * y + 0.5 * c0, rtol=1e-3, atol=1e-3)


def test_ordered_on_the_callers_stream():
    m = random_csr(4000, 4000, 0.002, seed=31)
    a = tcsparse.SparseMatrix(m, device="cuda", n_hint=64)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(4000, 64, device="cuda")
        x.mul_(3.0)  # queued on s just before the product: the product must see it
        y = a @ x
        z = y * 1.0  # queued on s after the product: it must see the result
    s.synchronize()
    check(z, m, x)


def test_backward_on_the_gpu_matches_the_cpu_path():
    m = random_csr(500, 400, 0.01, seed=32)
    ag = tcsparse.SparseMatrix(m, device="cuda", precision="f32")
    ac = tcsparse.SparseMatrix(m, device="cpu", precision="f32")
    g = torch.Generator().manual_seed(4)
    x0 = torch.randn(400, 16, generator=g)
    w0 = torch.from_numpy(m.data.copy())
    dy = torch.randn(500, 16, generator=g)
    grads = []
    for a, dev in ((ag, "cuda"), (ac, "cpu")):
        x = x0.to(dev, copy=True).requires_grad_()
        w = w0.to(dev, copy=True).requires_grad_()
        (tcsparse.spmm(a, x, values=w) * dy.to(dev)).sum().backward()
        grads.append((x.grad.cpu(), w.grad.cpu()))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-4, atol=1e-4)


def test_sddmm_on_the_gpu():
    m = random_csr(300, 200, 0.02, seed=33)
    a = tcsparse.SparseMatrix(m, device="cuda")
    left = torch.randn(300, 24, device="cuda")
    right = torch.randn(200, 24, device="cuda")
    v = tcsparse.sddmm(a, left, right)
    full = left.double().cpu() @ right.double().cpu().T
    rows = np.repeat(np.arange(300), np.diff(m.indptr))
    torch.testing.assert_close(v.double().cpu(), full[rows, m.indices], rtol=1e-4, atol=1e-4)


def test_bad_cuda_input_names_the_argument():
    m = random_csr(50, 40, 0.1, seed=34)
    a = tcsparse.SparseMatrix(m, device="cuda")
    with pytest.raises(ValueError, match="X: is on the CPU"):
        a @ torch.ones(40, 2)
    with pytest.raises(ValueError, match="X: a NumPy array"):
        a @ np.ones((40, 2), np.float32)
    with pytest.raises(TypeError, match="X: dtype torch.float64"):
        a @ torch.ones(40, 2, device="cuda", dtype=torch.float64)
    with pytest.raises(ValueError, match="X: must be contiguous"):
        a @ torch.ones(2, 40, device="cuda").t()
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="X: is on cuda:1"):
            a @ torch.ones(40, 2, device="cuda:1")
    a.free()
    with pytest.raises(RuntimeError, match="freed"):
        a @ torch.ones(40, 2, device="cuda")
