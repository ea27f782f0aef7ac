"""Time the corner-case stage (seeds/003) and check the paper's claims on a target.

    .venv/bin/python benchmarks/bench_corner.py                    # digits: LeNet trained here (30 epochs, lr 3e-3)
    .venv/bin/python benchmarks/bench_corner.py --target scenes    # the pipeline's scenes target (data/targets/scenes)
    .venv/bin/python benchmarks/bench_corner.py --lr 0.001 --lr_schedule constant   # the paper's step
    .venv/bin/python benchmarks/bench_corner.py --lr 0.01          # any CornerParams field: --KEY VALUE

Params: params.yaml's ``corner`` section (with ``per_target.<target>``) at ``depth: study`` (the FGSM comparison and
the paper-lr rerun are the study's: ``--depth audit`` times the audit, without the FGSM lines), then the command line's
overrides.

Prints the seconds per phase against the 2-minute target, whether the median logit margin fell by two orders of
magnitude in the search (Sec. 4.3) and whether corner cases are less noisy than FGSM's images (Sec. 4.5).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore", category=FutureWarning)

TARGET_S = 120.0


def _digits():
    import numpy as np

    from weakspot.data import load_source
    from weakspot.data.dataset import Dataset
    from weakspot.methods import AuditTarget
    from weakspot.models import ARCHS, TorchClassifier, train_torch_classifier

    ds = load_source("digits")
    X, y = np.asarray(ds.X, np.float32), np.asarray(ds.y, np.int64)
    perm = np.random.default_rng(0).permutation(len(X))
    tr, te = perm[:1259], perm[1259:]
    t = time.perf_counter()
    m = ARCHS.get("lenet")((1, 8, 8), 10)
    train_torch_classifier(m, X[tr], y[tr], epochs=30, lr=3e-3, batch_size=64, seed=0, device="cpu")
    clf = TorchClassifier(m, n_classes=10, device="cpu")
    print(f"LeNet: {time.perf_counter() - t:.1f} s, test accuracy {(clf.predict(X[te]) == y[te]).mean():.3f}")
    classes = [str(c) for c in ds.classes]
    train = Dataset(X=X[tr], y=y[tr], classes=classes, image_shape=X.shape[1:])
    test = Dataset(X=X[te], y=y[te], classes=classes, image_shape=X.shape[1:])
    return AuditTarget(name="digits", model=clf, classes=classes, test=test, train=train)


def _pipeline_target(name: str):
    from tasks.method import load_audit_target
    from weakspot import methods

    return load_audit_target(methods.get("corner"), name, None, "cpu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target", default="digits")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args, rest = ap.parse_known_args()
    overrides = {}
    for k, v in zip(rest[::2], rest[1::2]):
        overrides[k.lstrip("-").replace("-", "_")] = json.loads(v) if v[:1] in "0123456789[{-tf" else v

    import torch

    from weakspot import methods
    from weakspot.config import load_section
    from weakspot.corner import CornerParams
    from weakspot.progress import printer
    from weakspot.runtime import Runtime

    if args.threads:
        torch.set_num_threads(args.threads)
    target = _digits() if args.target == "digits" else _pipeline_target(args.target)
    _, base = load_section("corner", "params.yaml", target=args.target)  # with the target's per_target overrides
    params = CornerParams(**{**base.model_dump(), "depth": "study", **overrides})
    t = time.perf_counter()
    rep = methods.run_method("corner", target, params, Runtime(device="cpu", progress=printer("corner")))
    total = time.perf_counter() - t
    res, findings = rep.section, rep.findings
    m = res.metrics
    show = {
        k: m[k]
        for k in (
            "n_seeds",
            "margin_before",
            "margin_after",
            "realistic_yield",
            "tv_corner",
            "tv_fgsm",
            "top_class_pairs",
        )
        if k in m
    }
    print(json.dumps(show, indent=1))
    print(json.dumps({k: v for k, v in m.items() if k not in show}, indent=1, default=float))
    print(f"findings: {len(findings)} rows ({(findings['kind'] == 'class_pair').sum()} class pairs)")
    phases = dict(zip(res.tables["seconds"]["phase"], res.tables["seconds"]["seconds"]))
    print(f"total {total:.1f} s ({total / TARGET_S:.0%} of the {TARGET_S:.0f} s target); phases {phases}")
    print(
        f"median logit margin fell x{m['margin_reduction']:.3g} in {params.steps} steps: "
        f"{'at least' if m['margin_reduction'] >= 100 else 'less than'} two orders of magnitude"
    )
    print(
        "no FGSM comparison at depth audit"
        if "tv_fgsm" not in m
        else f"TV corner {m['tv_corner']:.4f} vs FGSM {m['tv_fgsm']:.4f}; manifold distance corner "
        f"{m['manifold_corner']:.4f} vs FGSM {m['manifold_fgsm']:.4f}: corner cases "
        f"{'less' if m['tv_corner'] < m['tv_fgsm'] and m['manifold_corner'] < m['manifold_fgsm'] else 'NOT less'} noisy"
    )
    out = os.environ.get("BENCH_FIGS")
    if out:
        os.makedirs(out, exist_ok=True)
        for name, fig in res.figures.items():
            fig.savefig(os.path.join(out, f"{args.target}_{name}.png"), dpi=90)


if __name__ == "__main__":
    main()
