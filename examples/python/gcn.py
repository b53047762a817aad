#!/usr/bin/env python3
"""A 2-layer GCN on the shared graph datasets, written three ways with the same seeds, weights and
data: tcsparse (``A @ X`` with autograd), ``torch.sparse.mm`` on a CSR tensor, and PyTorch
Geometric's ``GCNConv``. Prints the epoch time (forward + backward + optimizer step, median) and the
test accuracy of each.

The datasets are graph structures only (Matrix Market, ``$TCSPARSE_SHARED_DATASETS`` or
``--data-dir``); features and labels are made from a seed: X ~ N(0, 1) with ``--features``
columns, labels = argmax(Â·Â·X·W*) for a random W* over ``--classes`` classes (a task a 2-layer GCN
can learn), 60 % of the nodes train, the rest test. Â = D^-1/2 (A + Aᵀ + I) D^-1/2 (binary A), the
normalisation GCNConv uses.

Each layer is ``propagate(Z @ W) + b`` (GCNConv's order). The tcsparse model prepares Â once per
layer width (``n_hint`` = ``--hidden`` for the first layer, ``--classes`` for the second), since a
preparation is tuned for its width. Usage (on a GPU machine with torch and
torch_geometric; ``--device cpu`` runs the tcsparse and torch.sparse models on the CPU):

    python examples/python/gcn.py --datasets cora,citeseer --epochs 200
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

GRAPHS = ["cora", "citeseer", "PROTEINS_full", "BlogCatalog-5196", "REDDIT-BINARY", "NotreDame_www"]
IMPLS = ["tcsparse", "torch", "pyg"]


def die(msg: str) -> None:
    print(f"gcn.py: {msg}", file=sys.stderr)
    sys.exit(2)


try:
    import numpy as np
    import scipy.io
    import scipy.sparse as sp
    import torch
except ImportError as e:  # pragma: no cover - environment
    die(f"needs numpy, scipy and torch ({e})")

from torch_csr import torch_csr  # noqa: E402  (beside this file)

try:
    import tcsparse
except ImportError as e:  # pragma: no cover - environment
    die(f"the tcsparse package is not installed ({e}); see the README's Python section")


def data_dir(arg: str | None) -> Path:
    for d in (arg, os.environ.get("TCSPARSE_SHARED_DATASETS"), "../shared/datasets", "shared/datasets"):
        if d and Path(d).is_dir():
            return Path(d)
    die("no dataset folder: pass --data-dir or set TCSPARSE_SHARED_DATASETS")
    raise AssertionError


def load_adjacency(folder: Path, name: str) -> sp.csr_array:
    """Â = D^-1/2 (A + Aᵀ + I) D^-1/2 of a shared graph, float32 CSR."""
    path = folder / f"{name}.mtx.gz"
    if not path.is_file():
        die(f"{path}: not found (datasets: {', '.join(GRAPHS)})")
    with gzip.open(path, "rb") as f:
        a = sp.csr_array(scipy.io.mmread(f))
    if a.shape[0] != a.shape[1]:
        die(f"{name}: not square {a.shape}")
    a = a.astype(bool).astype(np.float32)
    a = ((a + a.T) > 0).astype(np.float32)
    a.setdiag(0)
    a.eliminate_zeros()
    a = a + sp.eye_array(a.shape[0], dtype=np.float32, format="csr")
    deg = np.asarray(a.sum(axis=1)).ravel()
    d = sp.diags_array(1.0 / np.sqrt(deg)).astype(np.float32)
    a = sp.csr_array(d @ a @ d)
    a.sum_duplicates()
    a.sort_indices()
    return a


def make_task(adj: sp.csr_array, features: int, classes: int, seed: int):
    """Seeded features, labels from a planted 2-hop signal, and a 60/40 train/test split."""
    rng = np.random.default_rng(seed)
    n = adj.shape[0]
    x = rng.standard_normal((n, features)).astype(np.float32)
    w = rng.standard_normal((features, classes)).astype(np.float32)
    y = np.asarray(adj @ (adj @ (x @ w))).argmax(axis=1)
    train = rng.random(n) < 0.6
    return x, y.astype(np.int64), train


def init_weights(features: int, hidden: int, classes: int, seed: int):
    """Glorot-uniform weights and zero biases, the same tensors for every implementation."""
    g = torch.Generator().manual_seed(seed)

    def glorot(i: int, o: int) -> torch.Tensor:
        a = math.sqrt(6.0 / (i + o))
        return (torch.rand(i, o, generator=g) * 2 - 1) * a

    return [glorot(features, hidden), torch.zeros(hidden), glorot(hidden, classes), torch.zeros(classes)]


class DenseGCN(torch.nn.Module):
    """Two layers ``propagate(Z @ W) + b`` around given propagations (one per layer)."""

    def __init__(self, weights, propagate1, propagate2):
        super().__init__()
        self.w1, self.b1, self.w2, self.b2 = (torch.nn.Parameter(w.clone()) for w in weights)
        self.propagate1, self.propagate2 = propagate1, propagate2

    def forward(self, x):
        h = torch.relu(self.propagate1(x @ self.w1) + self.b1)
        return self.propagate2(h @ self.w2) + self.b2


def build_model(impl: str, adj: sp.csr_array, weights, device: torch.device, hidden: int, precision: str):
    if impl == "tcsparse":
        # Â prepared for each layer's width: the hidden features, then the classes.
        a1 = tcsparse.SparseMatrix(adj, device=device, n_hint=hidden, precision=precision)
        a2 = tcsparse.SparseMatrix(adj, device=device, n_hint=weights[2].shape[1], precision=precision)
        model = DenseGCN(weights, lambda z: a1 @ z.contiguous(), lambda z: a2 @ z.contiguous())
        return model.to(device), f"{a1.kernel}; {a2.kernel}"
    if impl == "torch":
        t = torch_csr(adj, device)
        prop = lambda z: torch.sparse.mm(t, z)  # noqa: E731
        return DenseGCN(weights, prop, prop).to(device), "torch.sparse.mm (CSR)"
    if impl == "pyg":
        try:
            from torch_geometric.nn import GCNConv
        except ImportError as e:
            raise RuntimeError(f"torch_geometric is not installed ({e})") from e
        coo = adj.tocoo()
        off = coo.row != coo.col  # GCNConv adds the self-loops and normalises itself
        edge_index = torch.from_numpy(np.vstack([coo.row[off], coo.col[off]]).astype(np.int64)).to(device)

        class PygGCN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                f, h = weights[0].shape
                c = weights[2].shape[1]
                self.c1 = GCNConv(f, h, cached=True)
                self.c2 = GCNConv(h, c, cached=True)
                with torch.no_grad():
                    self.c1.lin.weight.copy_(weights[0].t())
                    self.c1.bias.copy_(weights[1])
                    self.c2.lin.weight.copy_(weights[2].t())
                    self.c2.bias.copy_(weights[3])

            def forward(self, x):
                return self.c2(torch.relu(self.c1(x, edge_index)), edge_index)

        return PygGCN().to(device), "PyG GCNConv (cached)"
    raise ValueError(f"unknown implementation {impl!r}")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(model, x, y, train_mask, epochs: int, lr: float, device: torch.device):
    """Trains; returns (median epoch ms over the epochs after the first 5, test accuracy)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    times = []
    for epoch in range(epochs):
        sync(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        sync(device)
        if epoch >= 5:
            times.append((time.perf_counter() - t0) * 1e3)
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
        test = ~train_mask
        acc = (pred[test] == y[test]).float().mean().item()
    return (statistics.median(times) if times else float("nan")), acc


def run(args) -> list[dict]:
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        die("--device cuda but torch.cuda.is_available() is False")
    folder = data_dir(args.data_dir)
    rows = []
    for name in args.datasets.split(","):
        adj = load_adjacency(folder, name)
        x, y, train_mask = make_task(adj, args.features, args.classes, args.seed)
        weights = init_weights(args.features, args.hidden, args.classes, args.seed)
        xt = torch.from_numpy(x).to(device)
        yt = torch.from_numpy(y).to(device)
        mt = torch.from_numpy(train_mask).to(device)
        for impl in args.impls.split(","):
            torch.manual_seed(args.seed)
            try:
                model, what = build_model(impl, adj, weights, device, args.hidden, args.precision)
                ms, acc = train(model, xt, yt, mt, args.epochs, args.lr, device)
            except Exception as e:  # one implementation failing must not hide the others
                print(f"{name:16} {impl:9} FAILED: {type(e).__name__}: {e}", file=sys.stderr)
                rows.append({"dataset": name, "impl": impl, "error": f"{type(e).__name__}: {e}"})
                continue
            row = {
                "dataset": name,
                "rows": adj.shape[0],
                "nnz": int(adj.nnz),
                "impl": impl,
                "what": what,
                "epoch_ms": ms,
                "test_acc": acc,
            }
            rows.append(row)
            print(f"{name:16} {impl:9} epoch {ms:9.3f} ms  test acc {acc:.4f}  ({what})", flush=True)
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default=",".join(GRAPHS))
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--data-dir")
    p.add_argument("--device", default="cuda")
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", default="tf32", choices=["tf32", "f32"])
    p.add_argument("--json", help="also write the rows as JSON here")
    return p


def main() -> None:
    args = parser().parse_args()
    rows = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if any("error" in r for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
