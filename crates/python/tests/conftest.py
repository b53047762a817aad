"""Shared fixtures: seeded random sparse matrices and the f64 reference product."""

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")


def random_csr(rows, cols, density, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    m = sp.random_array((rows, cols), density=density, format="csr", rng=rng, dtype=np.float64)
    m.data = rng.uniform(-2.0, 2.0, size=m.nnz)
    m.sum_duplicates()
    return m.astype(dtype)


def reference(m, x):
    """f64 A·X and the bound scale |A|·|X|."""
    a64 = m.astype(np.float64)
    return a64 @ x.astype(np.float64), abs(a64) @ np.abs(x.astype(np.float64))


@pytest.fixture
def small():
    return random_csr(70, 50, 0.08, seed=1)
