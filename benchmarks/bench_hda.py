"""How much dearer than PGD is HDA's test generation? (seeds/004 Table 6: the two-step GA takes about 100x PGD's
seconds per seed on MNIST; the issue's aim is under 20x.) Times the two-step GA and PGD-30 on the same seeds, the
same model and the same number of test cases per seed, side by side in one run, on a pipeline target's model.

    .venv/bin/python benchmarks/bench_hda.py                          # digits, 50 seeds, params.yaml's GA settings
    .venv/bin/python benchmarks/bench_hda.py --target scenes --seeds 30 --repeats 3

Needs the target's prepared data and model (`weakspot stage prepare T`, `weakspot stage train T`). The GA runs with
params.yaml's ``hda`` settings for the target (its overrides applied), PGD with ``hda.pgd_steps``, one random start
per test case; both on the same threads. Prints seconds per seed, queries per seed and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="digits")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    import numpy as np
    import torch

    from weakspot.config import load_section
    from tasks.data import read_prepared
    from tasks.target import load_target_model
    from weakspot.hda import generate as G
    from weakspot.hda.config import radius_of

    _, p = load_section("hda", "params.yaml", target=a.target)
    clf, _ = load_target_model(a.target, "cpu")
    m = clf.module.eval()
    te = read_prepared(a.target, "test")
    X, y = np.asarray(te.X, np.float32), np.asarray(te.y, np.int64)
    pf = G.module_proba(m)
    ok = np.where(pf(torch.as_tensor(X)).argmax(1).numpy() == y)[0][: a.seeds]
    X, y = X[ok], y[ok]
    r = radius_of(p, X.shape[1], (0.0, 1.0))
    n_i = np.full(len(X), int(p.cases_per_seed), np.int64)
    ga = p.ga
    t_ga, t_pgd, ae_ga, ae_pgd = [], [], [], []
    for rep in range(a.repeats):
        t = time.perf_counter()
        res = G.two_step_ga(
            pf,
            X,
            y,
            n_i,
            r,
            population=ga.population,
            generations=ga.generations,
            metric=ga.metric,
            lam=ga.lam,
            switch_at=ga.switch_at,
            mutation_rate=ga.mutation_rate,
            mutation_scale=ga.mutation_scale,
            elite=ga.elite,
            seed=rep,
            batch=4 * p.batch_size,
        )
        t_ga.append(time.perf_counter() - t)
        ae_ga.append(float((pf(torch.as_tensor(res.X_cases)).argmax(1).numpy() != y[res.seed_index]).mean()))
        t = time.perf_counter()
        pres = G.pgd_cases(m, X, y, n_i, r, steps=p.pgd_steps, seed=rep, batch=p.batch_size)
        t_pgd.append(time.perf_counter() - t)
        ae_pgd.append(float((pf(torch.as_tensor(pres.X_cases)).argmax(1).numpy() != y[pres.seed_index]).mean()))
    sg, sp = float(np.median(t_ga)) / len(X), float(np.median(t_pgd)) / len(X)
    print(
        f"{a.target}: {len(X)} seeds x {int(p.cases_per_seed)} test cases, L-inf {r:.4g}, torch threads "
        f"{torch.get_num_threads()}, median of {a.repeats}"
    )
    print(
        f"  HDA two-step GA (population {ga.population} x {ga.generations} generations): {sg * 1e3:8.2f} ms/seed, "
        f"{res.queries / len(X):.0f} queries/seed, AE proportion {np.mean(ae_ga):.3f}"
    )
    print(
        f"  PGD-{p.pgd_steps} (one random start per case):             {sp * 1e3:8.2f} ms/seed, "
        f"{pres.queries / len(X):.0f} gradient queries/seed, AE proportion {np.mean(ae_pgd):.3f}"
    )
    print(f"  ratio HDA / PGD-{p.pgd_steps} seconds per seed: {sg / sp:.1f}x  (paper Table 6, MNIST: ~100x; aim < 20x)")


if __name__ == "__main__":
    main()
