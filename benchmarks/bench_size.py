"""What an image target's size costs each method: seconds and peak memory per method on a synthetic MNIST-size target
(70,000 x 1 x 28 x 28) and a CIFAR-size one (60,000 x 3 x 32 x 32), each with a user CNN, against the digits target
(1,797 x 1 x 8 x 8), side by side in one run.

Each (target, method) runs ``weakspot.audit`` (the pipeline's library functions, in process) in a fresh
subprocess, so its peak resident memory (and peak GPU memory on CUDA) is its own. The user CNN is trained first on
the target's train part (``--cnn-epochs``), in its own subprocess, and is not counted. The params are params.yaml's
method sections with a profile merged in (``--profile paper`` on a GPU; the default is the CPU budget). The synthetic
images are class-dependent bright patches on noise: the point is the cost of the data's size, not a weakness.

    .venv/bin/python benchmarks/bench_size.py [--sizes digits mnist cifar] [--methods segments intrinsic corner hda]
        [--profile paper] [--methods all] [--device cpu|cuda] [--timeout 1500] [--out benchmarks/size.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (train rows, test rows, channels, side)
SIZES = {"digits": None, "mnist": (60_000, 10_000, 1, 28), "cifar": (50_000, 10_000, 3, 32)}
IMAGE_METHODS = ("segments", "intrinsic", "corner", "hda")


def synthetic(n: int, channels: int, side: int, seed: int):
    """``n`` images of 10 classes: a bright square whose place is the class, on uniform noise, in [0, 1]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    X = rng.uniform(0, 0.35, (n, channels, side, side)).astype(np.float32)
    cell = side // 4
    for k in range(10):
        r, c = cell * (k // 4) + 1, cell * (k % 4) + 1
        X[y == k, :, r : r + cell - 2, c : c + cell - 2] += 0.6
    return np.clip(X, 0, 1), y


def data(size: str, folder: Path):
    """The target's four arrays, written once to ``folder/<size>.npz``."""
    import numpy as np

    f = folder / f"{size}.npz"
    if not f.is_file():
        if SIZES[size] is None:
            from sklearn.datasets import load_digits

            d = load_digits()
            X = (d.images[:, None] / 16.0).astype(np.float32)
            rng = np.random.default_rng(0).permutation(len(X))
            cut = int(0.85 * len(X))
            arrays = dict(
                X_train=X[rng[:cut]], y_train=d.target[rng[:cut]], X_test=X[rng[cut:]], y_test=d.target[rng[cut:]]
            )
        else:
            n_tr, n_te, ch, side = SIZES[size]
            X_tr, y_tr = synthetic(n_tr, ch, side, 0)
            X_te, y_te = synthetic(n_te, ch, side, 1)
            arrays = dict(X_train=X_tr, y_train=y_tr, X_test=X_te, y_test=y_te)
        np.savez(f, **arrays)
    return f


def cnn(channels: int, side: int):
    """The user's CNN: two conv layers and a linear head (the kind of small model a user brings)."""
    import torch.nn as nn

    flat = 32 * (side // 4) * (side // 4)
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 10),
    )


def train_cnn(npz: str, out: str, epochs: int, device: str) -> None:
    import numpy as np
    import torch

    z = np.load(npz)
    X, y = torch.from_numpy(z["X_train"]), torch.from_numpy(z["y_train"]).long()
    torch.manual_seed(0)
    dev = torch.device("cuda" if device == "cuda" else "cpu")
    net = cnn(X.shape[1], X.shape[2]).to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    for _ in range(epochs):
        for idx in torch.randperm(len(X)).split(128):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(X[idx].to(dev)), y[idx].to(dev)).backward()
            opt.step()
    torch.save(net.state_dict(), out)


def one(npz: str, weights: str, method: str, params_json: str, device: str) -> dict:
    """One method on one target, in this (fresh) process: seconds, peak RSS, findings."""
    import resource

    import numpy as np
    import torch

    import weakspot

    z = np.load(npz)
    net = cnn(z["X_train"].shape[1], z["X_train"].shape[2])
    net.load_state_dict(torch.load(weights, weights_only=True))
    params = json.loads(Path(params_json).read_text())
    t0 = time.perf_counter()
    res = weakspot.audit(
        net.eval(),
        z["X_test"],
        z["y_test"],
        z["X_train"],
        z["y_train"],
        methods=None if method == "all" else [method],
        params=params,
        name=Path(npz).stem,
        device=device,
    )
    seconds = time.perf_counter() - t0
    peak_gpu = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
    return {
        "seconds": round(seconds, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_gpu_mib": None if peak_gpu is None else round(peak_gpu),
        "findings": int(len(res.findings)),
        "test_accuracy": res.metrics["train"]["test_accuracy"],
    }


def params_of(profile: str | None) -> dict:
    from weakspot.config import deep_merge, read_yaml

    raw = read_yaml(ROOT / "params.yaml")
    if profile:
        raw = deep_merge(raw, read_yaml(ROOT / "profiles" / f"{profile}.yaml"))
    return raw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument(
        "--methods",
        nargs="+",
        default=list(IMAGE_METHODS),
        choices=list(IMAGE_METHODS) + ["all"],
        help="'all': every method that fits in one weakspot.audit call, one process (a whole audit)",
    )
    ap.add_argument("--profile", default=None, help="merge profiles/NAME.yaml into params.yaml's sections")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cnn-epochs", type=int, default=None, help="default: 40 for digits, 2 for the large sizes")
    ap.add_argument("--timeout", type=float, default=1500, help="seconds one method may take before it is stopped")
    ap.add_argument("--out", default=None, help="also write the table as JSON here")
    ap.add_argument("--logs", default=None, help="a folder for the stderr of each method that failed")
    ap.add_argument("--_one", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._one:
        print(json.dumps(one(*args._one)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-size-"))
    pfile = work / "params.json"
    pfile.write_text(json.dumps(params_of(args.profile)))
    rows = []
    me = [sys.executable, str(Path(__file__).resolve())]
    for size in args.sizes:
        npz = data(size, work)
        weights = work / f"{size}.pt"
        t0 = time.perf_counter()
        epochs = args.cnn_epochs or (40 if SIZES[size] is None else 2)
        subprocess.run(
            [
                sys.executable,
                "-c",
                f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                f"sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_size as b; "
                f"b.train_cnn({str(npz)!r}, {str(weights)!r}, {epochs}, {args.device!r})",
            ],
            check=True,
        )
        print(f"{size}: user CNN trained in {time.perf_counter() - t0:.0f} s", flush=True)
        for method in args.methods:
            try:
                p = subprocess.run(
                    me + ["--_one", str(npz), str(weights), method, str(pfile), args.device],
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                )
                row = (
                    json.loads(p.stdout.strip().splitlines()[-1])
                    if p.returncode == 0
                    else {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:200]}
                )
                if p.returncode and args.logs:
                    Path(args.logs).mkdir(parents=True, exist_ok=True)
                    (Path(args.logs) / f"{size}-{method}.log").write_text(p.stderr[-20000:])
            except subprocess.TimeoutExpired:
                row = {"error": f"stopped after {args.timeout:.0f} s"}
            rows.append({"target": size, "method": method, **row})
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'target':8s} {'method':10s} {'seconds':>8s} {'peak RSS MiB':>13s} {'peak GPU MiB':>13s}  note")
    for r in rows:
        print(
            f"{r['target']:8s} {r['method']:10s} {r.get('seconds', '-'):>8} {r.get('peak_rss_mib', '-'):>13} "
            f"{str(r.get('peak_gpu_mib', '-')):>13}  {r.get('error', '')}"
        )
    if args.out:
        Path(args.out).write_text(
            json.dumps({"profile": args.profile or "params.yaml", "device": args.device, "rows": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
