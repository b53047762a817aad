"""Cross-check of our cuSPARSE wrapper against torch.sparse (which also calls cuSPARSE SpMM).

Usage (on the GPU machine, where PyTorch and SciPy are installed):
    python3 torch_spmm_baseline.py MATRIX.mtx N [N ...]
Prints one line per N: the median of 50 CUDA-event-timed torch.sparse.mm launches (CSR, f32) after
warm-up, in the same format as the tcsparse bench so the two can be compared side by side.
"""
import sys
import time

from pathlib import Path

import numpy as np
import scipy.io
import torch

# The examples' torch CSR operand (examples/python/torch_csr.py: NumPy and PyTorch only).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "python"))
from torch_csr import torch_csr  # noqa: E402


def main() -> None:
    path, ns = sys.argv[1], [int(x) for x in sys.argv[2:]] or [128]
    t0 = time.time()
    a = scipy.io.mmread(path).tocsr().astype(np.float32)
    a.sum_duplicates()
    print(f"read {path}: {a.shape[0]}x{a.shape[1]}, nnz {a.nnz} in {time.time() - t0:.1f}s")
    dev = torch.device("cuda")
    a_t = torch_csr(a, dev)
    for n in ns:
        b = torch.rand(a.shape[1], n, device=dev)
        for _ in range(5):
            torch.sparse.mm(a_t, b)
        times = []
        for _ in range(50):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.sparse.mm(a_t, b)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        ms = float(np.median(times))
        print(f"torch.sparse.mm N={n}: {ms:.3f} ms ({2 * a.nnz * n / (ms * 1e-3) / 1e9:.1f} GFLOP/s)")
        kernel_times(a_t, b, n)


def kernel_times(a_t, b, n: int) -> None:
    """Per-kernel device time inside torch.sparse.mm (torch.profiler), to separate cuSPARSE's own SpMM
    kernel from torch's allocations, layout copies and index conversions."""
    reps = 20
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            torch.sparse.mm(a_t, b)
        torch.cuda.synchronize()
    for ev in prof.key_averages():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.count:
            per_call = ev.self_device_time_total / reps / 1e3
            print(f"  N={n} kernel {ev.key[:70]:<70} {ev.count // reps:>2}x/call {per_call:.3f} ms/call")


if __name__ == "__main__":
    main()
