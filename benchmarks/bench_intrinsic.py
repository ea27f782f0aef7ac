"""Is psi cheap? (seeds/002 Sec. 5.5: "it can be fast generated without considerable testing cost"). Time psi on N
inputs against PGD-30 accuracy on the same N inputs, side by side in one run, on a pipeline target's model.

    .venv/bin/python benchmarks/bench_intrinsic.py                       # scenes (data/targets/scenes), N = 1000
    .venv/bin/python benchmarks/bench_intrinsic.py --target digits --n 1000 --repeats 3

Needs the target's prepared data and model (`weakspot stage prepare T`, `weakspot stage train T`). Prints seconds per
method and their ratio (PGD-30 / psi; > 1 means psi is cheaper). psi runs with params.yaml's intrinsic.psi settings
as the stage does (steps, step size, restarts, floor), PGD with intrinsic.pgd_steps; both clipped to the training
data's range and batched the same way (intrinsic.batch_size), same threads.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="scenes")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    import numpy as np
    import torch

    from weakspot.config import load_section
    from tasks.data import read_prepared
    from tasks.target import load_target_model
    from weakspot.adversarial import attacks as A
    from weakspot.data.dataset import image_range
    from weakspot.intrinsic.config import default_eps
    from weakspot.intrinsic.evaluate import ascent_kwargs
    from weakspot.intrinsic.psi import max_kl, psi

    _, p = load_section("intrinsic", "params.yaml", target=a.target)
    clf, _ = load_target_model(a.target, "cpu")
    m = clf.module.eval()
    X = np.concatenate([np.asarray(read_prepared(a.target, s).X, np.float32) for s in ("test", "val", "train")])[: a.n]
    y = np.concatenate([np.asarray(read_prepared(a.target, s).y, np.int64) for s in ("test", "val", "train")])[: a.n]
    clip = image_range(read_prepared(a.target, "train").X)  # as the stage: the training data's range
    eps = p.eps if p.eps is not None else default_eps(X.shape[1], *clip)
    bs = int(p.batch_size)
    t_psi, t_pgd = [], []
    for r in range(a.repeats):
        t = time.perf_counter()
        kl = max_kl(m, X, **{**ascent_kwargs(p, eps, clip, "cpu"), "seed": r}).kl
        t_psi.append(time.perf_counter() - t)
        t = time.perf_counter()
        xa = A.batched(
            A.pgd,
            m,
            X,
            y,
            batch_size=bs,
            eps=eps,
            steps=p.pgd_steps,
            clip=clip,
            generator=torch.Generator().manual_seed(r),
        )
        acc = float(np.mean(A.predict(m, xa) == y))
        t_pgd.append(time.perf_counter() - t)
    sp, sg = float(np.median(t_psi)), float(np.median(t_pgd))
    print(f"{a.target}: {len(X)} inputs, eps {eps:.4g}, torch threads {torch.get_num_threads()}, median of {a.repeats}")
    print(f"  psi ({p.psi.steps} ascent steps x {p.psi.restarts} start(s)): {sp:7.2f} s   psi = {psi(kl):.2f}")
    print(f"  PGD-{p.pgd_steps} accuracy:                 {sg:7.2f} s   accuracy = {acc:.3f}")
    print(
        f"  ratio PGD-{p.pgd_steps} / psi seconds: {sg / sp:.2f}  (> 1: psi is cheaper; the paper's full test-set "
        f"accuracy would cost {sg * 10000 / len(X):.0f} s on 10,000 inputs)"
    )
    ps, gs = sp / (p.psi.steps * p.psi.restarts + 1), sg / (p.pgd_steps + 1)
    print(
        f"  per forward-backward pass over the {len(X)} inputs: psi {ps * 1e3:.0f} ms, PGD {gs * 1e3:.0f} ms (ratio "
        f"{gs / ps:.2f}): psi is cheaper by its step count, not per step"
    )


if __name__ == "__main__":
    main()
