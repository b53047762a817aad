#!/usr/bin/env python3
"""Host time per SpMM call on small shared graphs (GPU only): ``tcsparse.spmm(A, X, out=Y)`` from
Python, ``torch.sparse.mm`` on the same CSR tensor, and the same tcsparse product looped in Rust,
each called 2000 times in a row (after 50 untimed calls) without waiting for the GPU, N = 128, f32.
On a graph whose kernel is shorter than the call, the host time is what a call costs.

    python examples/python/host_cost.py --data-dir DIR [--datasets cora,citeseer,PROTEINS_full]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gcn  # noqa: E402  (the same loaders)

import torch  # noqa: E402

import tcsparse  # noqa: E402

CALLS = 2000


def host_us(fn) -> float:
    """Host µs per call of ``fn`` over CALLS calls, after 50 untimed ones."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    us = (time.perf_counter() - t0) / CALLS * 1e6
    torch.cuda.synchronize()
    return us


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir")
    p.add_argument("--datasets", default="cora,citeseer,PROTEINS_full")
    p.add_argument("--n", type=int, default=128)
    args = p.parse_args()
    if not torch.cuda.is_available() or not tcsparse.cuda_available():
        gcn.die("needs a CUDA GPU visible to both torch and tcsparse")
    dev = torch.device("cuda")
    for name in args.datasets.split(","):
        adj = gcn.load_adjacency(gcn.data_dir(args.data_dir), name)
        rows = adj.shape[0]
        x = torch.randn(rows, args.n, device=dev)
        y = torch.empty(rows, args.n, device=dev)
        t = gcn.torch_csr(adj, dev)
        a = tcsparse.SparseMatrix(adj, device=dev, n_hint=args.n, precision="f32")
        stream = torch.cuda.current_stream(dev).cuda_stream
        ours = host_us(lambda: tcsparse.spmm(a, x, out=y))
        theirs = host_us(lambda: torch.sparse.mm(t, x))
        torch.cuda.synchronize()
        rust = a._m.time_spmm_cuda(x.data_ptr(), args.n, y.data_ptr(), stream, CALLS) / CALLS * 1e6
        torch.cuda.synchronize()
        print(f"{name:14} tcsparse.spmm {ours:6.2f} µs/call (Rust {rust:5.2f})  "
              f"torch.sparse.mm {theirs:6.2f} µs/call  kernel {a.kernel}", flush=True)
        a.free()


if __name__ == "__main__":
    main()
