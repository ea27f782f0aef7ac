"""A user's first audit of their own image model: what adding a 28x28 CNN target costs, stage by stage.

The target is what a new user brings: scikit-learn's 8x8 digits scaled up to 28x28 (MNIST's layout: 1 x 28 x 28 in
[0, 1]), 1,200 training and 597 test images as ``.npz`` files, and their own small torch CNN (``kind: torch``, a
factory in ``user28.py`` and a state_dict trained here for 8 epochs, not counted). A copy of ``--checkout`` (default:
this one) gets a params.yaml whose only target is this one (every method section as the checkout has it, ``per_target``
entries of the built-in targets dropped), so the audit runs exactly the stages the new target adds (prepare, train,
segments, robustness, intrinsic, corner, HDA) and the report, on the checkout's default workers, as ``weakspot audit``
would after the user added it. ``--depth study`` sets every method's depth to the deep one (the paper's comparisons);
``--methods`` audits only those methods (the target's ``methods``).

    .venv/bin/python benchmarks/bench_user_target.py DIR [--checkout PATH] [--label before] [--depth audit|study]
        [--methods robustness,corner]

DIR must not exist. It prints and writes ``DIR/result.json``: the audit's wall time, each stage's time (the audit's
``<stage>: done in N s`` lines) and each method's confirmed weak spots (after the target's family correction). The
figures are in docs/results/audit-cost.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

USER_MODULE = '''"""A user's own CNN for 28x28 grey images (the benchmark's user model)."""
import torch


def build(n_classes=10):
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 64), torch.nn.ReLU(), torch.nn.Linear(64, n_classes),
    )
'''


def write_target(repo: Path) -> None:
    """The images (``data/user28/{train,test}.npz``), the module (``user28.py``) and the trained weights."""
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.nn.functional.interpolate(
        torch.as_tensor(d.images[:, None] / 16.0, dtype=torch.float32), size=(28, 28), mode="bilinear"
    ).clamp(0, 1)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    tr, te = order[:1200], order[1200:]
    out = repo / "data" / "user28"
    out.mkdir(parents=True)
    np.savez(out / "train.npz", x=x[tr].numpy(), y=y[tr])
    np.savez(out / "test.npz", x=x[te].numpy(), y=y[te])
    (repo / "user28.py").write_text(USER_MODULE)
    sys.path.insert(0, str(repo))
    import user28

    torch.manual_seed(0)
    net = user28.build()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    xt, yt = x[tr], torch.as_tensor(y[tr])
    for _ in range(8):
        for b in torch.randperm(len(yt)).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xt[b]), yt[b]).backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        acc = float((net(x[te]).argmax(1).numpy() == y[te]).mean())
    torch.save(net.state_dict(), out / "cnn.pt")
    print(f"user CNN: test accuracy {acc:.3f}", flush=True)


def params(repo: Path, depth: str, methods: "list[str] | None" = None) -> None:
    import yaml

    p = repo / "params.yaml"
    raw = yaml.safe_load(p.read_text())
    raw["targets"] = {
        "user28": {
            "data": {"train": "npz:data/user28/train.npz", "test": "npz:data/user28/test.npz"},
            "model": {"kind": "torch", "factory": "user28:build", "weights": "data/user28/cnn.pt"},
            **({"methods": methods} if methods else {}),
        }
    }
    for section in raw.values():
        if isinstance(section, dict):
            section.pop("per_target", None)
    for m in ("intrinsic", "corner", "robustness", "hda"):  # two depths (the examiner needs a scene target)
        if isinstance(raw.get(m), dict) and depth != "checkout":
            raw[m]["depth"] = depth
    raw["gates"] = {"fail": False, "conditions": []}
    p.write_text(yaml.safe_dump(raw, sort_keys=False))


def confirmed(repo: Path) -> dict:
    """Each method's confirmed weak spots on the target, after the target's family correction."""
    import pandas as pd

    from weakspot.findings import correct_by_target

    tables = {("user28", f.stem): pd.read_parquet(f) for f in sorted((repo / "findings" / "user28").glob("*.parquet"))}
    out = {}
    for (_, method), t in correct_by_target(tables).items():
        out[method] = {"candidates": int(len(t)), "confirmed": int(t["confirmed"].sum()) if len(t) else 0}
    return out


def main() -> int:
    from bench_stage_overhead import copy_checkout

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--checkout", type=Path, default=ROOT)
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--depth", default="checkout", help="audit | study | checkout (the params as they are)")
    ap.add_argument("--methods", default="", help="comma-separated: audit only these methods (default: every one)")
    args = ap.parse_args()
    repo = args.dir / "repo"
    repo.mkdir(parents=True)
    copy_checkout(args.checkout.resolve(), repo)
    write_target(repo)
    methods = [m for m in args.methods.split(",") if m]
    params(repo, args.depth, methods)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "WEAKSPOT_"))},
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
        "PYTHONPATH": str(repo),
        "WEAKSPOT_ROOT": str(repo),
        "WEAKSPOT_WORKDIR": str(args.dir / "work"),
    }
    t0 = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ops.cli", "audit"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        stamped = f"[{time.time() - t0:7.1f}] {line.rstrip()}"
        lines.append(stamped)
        print(stamped, flush=True)
    rc = proc.wait()
    wall = time.time() - t0
    (args.dir / "audit.log").write_text("\n".join(lines) + "\n")
    stages = {}
    for ln in lines:
        body = ln.split("] ", 1)[1]
        if ": done in " in body and body.rstrip().endswith(" s"):
            name, rest = body.split(": done in ", 1)
            stages[name.strip()] = float(rest.split()[0])
    result = {
        "label": args.label,
        "depth": args.depth,
        "methods": methods or "every one that fits",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"], cwd=args.checkout, capture_output=True, text=True
        ).stdout.strip(),
        "returncode": rc,
        "audit_wall_s": round(wall, 1),
        "stage_s": stages,
        "weak_spots": confirmed(repo) if rc in (0, 3) else {},
    }
    print(json.dumps(result, indent=1))
    (args.dir / "result.json").write_text(json.dumps(result, indent=1))
    return 0 if rc in (0, 3) else 1


if __name__ == "__main__":
    sys.exit(main())
