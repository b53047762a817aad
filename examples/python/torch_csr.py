"""A SciPy CSR matrix as a ``torch.sparse_csr_tensor`` on a device (int64 indices): the
torch.sparse operand the examples and ``xtask/scripts/torch_spmm_baseline.py`` compare against.
Needs only NumPy and PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def torch_csr(a: Any, device: Any, dtype: Any = None) -> Any:
    """``a`` (any SciPy CSR matrix or array) as a torch CSR tensor on ``device``, its values as
    they are or converted to the NumPy ``dtype``."""
    return torch.sparse_csr_tensor(
        torch.from_numpy(a.indptr.astype(np.int64)),
        torch.from_numpy(a.indices.astype(np.int64)),
        torch.from_numpy(a.data if dtype is None else a.data.astype(dtype)),
        size=a.shape,
    ).to(device)
