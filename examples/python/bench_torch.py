#!/usr/bin/env python3
"""tcsparse against PyTorch on the shared graph datasets (GPU only), written to
docs/results/torch-<device>.md:

* SpMM forward ``Â·X`` (X: rows × N float32 CUDA tensor, N = 128 by default) with tcsparse
  (prepared once, tuned) against ``torch.sparse.mm`` on the same CSR tensor, same precision
  (``--precision f32``: f32 arithmetic on both sides; ``tf32`` lets tcsparse use tensor cores),
  same process; median of CUDA-event timings. Every tcsparse result is checked against an f64
  product first (a failed check prints FAILED and no speedup).
* The 2-layer GCN epoch (forward + backward + Adam step) of examples/python/gcn.py with tcsparse,
  ``torch.sparse.mm`` and PyG's GCNConv, and each one's test accuracy after the same epochs.
* The Python call overhead: host time per ``tcsparse.spmm(A, X, out=Y)`` call minus that of the
  same Rust call looped in Rust, on a 1 k-row matrix.

Lines the goals name:
  geomean (spmm vs torch.sparse.mm, shared datasets): X.XX×
  gcn epoch vs best of PyG and torch.sparse (largest graphs): X.XX×
  python call overhead (1k rows, N=128): X.X µs per SpMM over the Rust call

    python examples/python/bench_torch.py --out docs/results/torch-h200.md
"""

from __future__ import annotations

import argparse
import datetime
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gcn  # noqa: E402  (the same loaders, task and models)

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402

import tcsparse  # noqa: E402

TF32_BOUND = 2 * 2.0**-10
F32_BOUND = 2.0**-16


def event_ms(fn, iters: int, warmup: int = 5) -> float:
    """Median ms of ``fn`` over ``iters`` calls, each timed with CUDA events."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def check(y: torch.Tensor, adj: sp.csr_array, x: torch.Tensor) -> float:
    """max |y − Â·x| / (|Â|·|x|) against an f64 product (on the GPU)."""
    a64 = gcn.torch_csr(adj, x.device, np.float64)
    x64 = x.double()
    want = torch.sparse.mm(a64, x64)
    scale = torch.sparse.mm(a64.abs(), x64.abs())
    return ((y.double() - want).abs() / scale.clamp_min(1e-300)).max().item()


def spmm_rows(args, folder: Path) -> list[dict]:
    dev = torch.device("cuda")
    rows = []
    g = torch.Generator(device=dev).manual_seed(args.seed)
    for name in args.datasets.split(","):
        adj = gcn.load_adjacency(folder, name)
        n = adj.shape[0]
        x = torch.randn(n, args.n, device=dev, generator=g)
        t = gcn.torch_csr(adj, dev)
        a = tcsparse.SparseMatrix(adj, device=dev, n_hint=args.n, precision=args.precision)
        y = torch.empty(n, args.n, device=dev)
        tcsparse.spmm(a, x, out=y)
        err = check(y, adj, x)
        bound = TF32_BOUND if args.precision == "tf32" else F32_BOUND
        ok = err <= bound
        torch_ms = event_ms(lambda: torch.sparse.mm(t, x), args.iters)
        ours_ms = event_ms(lambda: tcsparse.spmm(a, x, out=y), args.iters)
        row = {
            "dataset": name,
            "rows": n,
            "nnz": int(adj.nnz),
            "kernel": a.kernel,
            "torch_ms": torch_ms,
            "tcsparse_ms": ours_ms,
            "speedup": torch_ms / ours_ms if ok else None,
            "max_scaled_error": err,
            "ok": ok,
        }
        rows.append(row)
        sp_text = f"{row['speedup']:.2f}x" if ok else "FAILED accuracy check"
        print(f"spmm {name:16} torch {torch_ms:8.4f} ms  tcsparse {ours_ms:8.4f} ms  {sp_text}  "
              f"(err {err:.2e}, {a.kernel})", flush=True)
        a.free()
    return rows


def overhead_us(args) -> float:
    """Python-layer µs per call over the Rust call, on a 1 k-row matrix (host time, no sync)."""
    dev = torch.device("cuda")
    m = sp.random_array((1000, 1000), density=0.005, format="csr", rng=np.random.default_rng(1),
                        dtype=np.float32)
    a = tcsparse.SparseMatrix(m, device=dev, n_hint=args.n)
    x = torch.randn(1000, args.n, device=dev)
    y = torch.empty(1000, args.n, device=dev)
    stream = torch.cuda.current_stream(dev).cuda_stream
    iters = 2000
    best = math.inf
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            tcsparse.spmm(a, x, out=y)
        py_s = time.perf_counter() - t0
        torch.cuda.synchronize()
        rust_s = a._m.time_spmm_cuda(x.data_ptr(), args.n, y.data_ptr(), stream, iters)
        torch.cuda.synchronize()
        best = min(best, (py_s - rust_s) / iters * 1e6)
    return best


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in xs) / len(xs)) if xs else float("nan")


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default=",".join(gcn.GRAPHS))
    p.add_argument("--data-dir")
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--precision", default="f32", choices=["tf32", "f32"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--commit", default=None, help="commit to name in the header (default: git HEAD)")
    p.add_argument("--kind", default=None,
                   help="the lent machine's device kind to name in the header (e.g. nvidia-h200)")
    p.add_argument("--out", help="Markdown file (default docs/results/torch-<device>.md)")
    p.add_argument("--skip-gcn", action="store_true")
    args = p.parse_args()
    if not torch.cuda.is_available() or not tcsparse.cuda_available():
        gcn.die("needs a CUDA GPU visible to both torch and tcsparse")
    folder = gcn.data_dir(args.data_dir)
    device_name = torch.cuda.get_device_name(0)
    short = "h200" if "H200" in device_name else device_name.split()[-1].lower()
    out = Path(args.out or f"docs/results/torch-{short}.md")

    spmm = spmm_rows(args, folder)
    speedups = [r["speedup"] for r in spmm if r["speedup"]]
    gm = geomean(speedups)
    failed = [r["dataset"] for r in spmm if not r["ok"]]

    gcn_rows = []
    if not args.skip_gcn:
        gargs = gcn.parser().parse_args([
            "--datasets", args.datasets, "--epochs", str(args.epochs), "--seed", str(args.seed),
            "--precision", args.precision, "--hidden", str(args.n), "--features", str(args.n),
        ] + (["--data-dir", args.data_dir] if args.data_dir else []))
        gcn_rows = gcn.run(gargs)
    by = {(r["dataset"], r["impl"]): r for r in gcn_rows if "error" not in r}
    largest = sorted({r["dataset"]: r["nnz"] for r in gcn_rows if "nnz" in r}.items(),
                     key=lambda kv: -kv[1])[:2]
    ratios = []
    for name, _ in largest:
        ours = by.get((name, "tcsparse"))
        others = [by[(name, i)]["epoch_ms"] for i in ("torch", "pyg") if (name, i) in by]
        if ours and others:
            ratios.append(min(others) / ours["epoch_ms"])
    overhead = overhead_us(args)

    lines = [
        f"# tcsparse vs PyTorch ({device_name})",
        "",
        f"Measured {datetime.date.today().isoformat()}, commit {args.commit or commit()}, {device_name}"
        + (f" (device kind {args.kind})" if args.kind else "")
        + f", torch {torch.__version__}, N = {args.n}, precision {args.precision}.",
        f"Command: `python examples/python/bench_torch.py --n {args.n} --precision {args.precision} "
        f"--iters {args.iters} --epochs {args.epochs}`",
        "",
        "## SpMM forward (Â·X) against torch.sparse.mm (CSR)",
        "",
        "| dataset | rows | nnz | kernel | torch.sparse.mm ms | tcsparse ms | speedup | max scaled error |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in spmm:
        s = f"{r['speedup']:.2f}×" if r["speedup"] else "FAILED"
        lines.append(f"| {r['dataset']} | {r['rows']:,} | {r['nnz']:,} | {r['kernel']} | {r['torch_ms']:.4f} | "
                     f"{r['tcsparse_ms']:.4f} | {s} | {r['max_scaled_error']:.1e} |")
    lines += ["", f"geomean (spmm vs torch.sparse.mm, shared datasets): {gm:.2f}×"]
    if speedups:
        lines.append(f"lowest: {min(speedups):.2f}×")
    if failed:
        lines.append(f"accuracy check FAILED on: {', '.join(failed)}")
    if gcn_rows:
        lines += ["", "## GCN epoch (forward + backward + Adam), 2 layers", "",
                  "| dataset | impl | epoch ms | test accuracy |", "|---|---|---:|---:|"]
        for r in gcn_rows:
            if "error" in r:
                lines.append(f"| {r['dataset']} | {r['impl']} | FAILED: {r['error']} | |")
            else:
                lines.append(f"| {r['dataset']} | {r['impl']} | {r['epoch_ms']:.3f} | {r['test_acc']:.4f} |")
        lines += ["", "gcn epoch vs best of PyG and torch.sparse (largest graphs): "
                  + (f"{geomean(ratios):.2f}×" if ratios else "n/a")
                  + f" ({', '.join(n for n, _ in largest)})"]
    lines += ["", f"python call overhead (1k rows, N={args.n}): {overhead:.1f} µs per SpMM over the Rust call", ""]
    text = "\n".join(lines)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}", file=sys.stderr)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
