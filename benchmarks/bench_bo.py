"""BO examiner: suggest() time at 100, 300 and 500 observations, the bayesian-optimization package as shipped
(``stock``: GP refit with 5 restarts every step, 10000 random candidates + 10 L-BFGS-B starts with numerical
gradients) against our tuned settings (warm-started GP fit with no restarts, hyperparameters re-optimised every 5
steps, 2000 random candidates + 3 rounds of 300 batched local perturbations), side by side, and against the time of
one render through the real BlenderRenderer (32 px, 8 samples, 2 workers) when bpy is importable.

A third column, ``lean`` (500 candidates, 3 x 100 perturbations, hyperparameters every 10 steps), shows how much
further the acquisition can be cut. A fourth, ``default``, is params.yaml's examiner: the tuned settings with one
length scale per factor floored at 0.05 and the log-odds as the GP's target (9 hyperparameters to fit, not one).

Run:

    .venv/bin/python benchmarks/bench_bo.py [--steps 5] [--sizes 100 300 500] [--no-render]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from weakspot.examine.examiners import make_examiner  # noqa: E402
from weakspot.scene.space import SceneSpace  # noqa: E402


def _landscape(space, q):
    """A smooth 9-d 'true-class probability' with a basin (what the GP sees in a real examination)."""
    names = space.searched
    lo = np.array([space.bounds[k][0] for k in names])
    hi = np.array([space.bounds[k][1] for k in names])
    u = (np.array([[p[k] for k in names] for p in q]) - lo) / (hi - lo)
    return 1 - 0.9 * np.exp(-((u - 0.8) ** 2).sum(1) / 0.3) + 0.05 * np.sin(7 * u).mean(1)


def _time_suggest(space, n_obs: int, steps: int, **opts) -> np.ndarray:
    bounds = {k: space.bounds[k] for k in space.searched}
    ex = make_examiner("bo", bounds=bounds, seed=0, **opts)
    rng = np.random.default_rng(n_obs)
    q = [{k: float(lo + rng.random() * (hi - lo)) for k, (lo, hi) in bounds.items()} for _ in range(n_obs)]
    ex.observe(q, np.clip(_landscape(space, q), 0, 1))
    ts = []
    for _ in range(steps):
        t = time.perf_counter()
        s = ex.suggest(1)
        ts.append(time.perf_counter() - t)
        ex.observe(s, np.clip(_landscape(space, s), 0, 1))
    return np.array(ts)


def _render_time(n: int = 40):
    try:
        from weakspot.scene.objects import CLASSES
        from weakspot.scene.renderer import BlenderRenderer
    except Exception as e:  # pragma: no cover - depends on the environment  # noqa: BLE001
        return None, f"BlenderRenderer not importable ({type(e).__name__}: {e})"
    space = SceneSpace()
    rng = np.random.default_rng(0)
    scenes = [
        dict(p, **{"class": CLASSES[i % len(CLASSES)], "instance": 0}) for i, p in enumerate(space.sample(rng, n))
    ]
    try:
        with BlenderRenderer(resolution=32, samples=8, workers=2, device="cpu", seed=0) as r:
            r.render(scenes[:4])  # warm up the workers
            t = time.perf_counter()
            r.render(scenes[:1])
            one = time.perf_counter() - t
            t = time.perf_counter()
            r.render(scenes)
            per = (time.perf_counter() - t) / n
        return (one, per), "BlenderRenderer(resolution=32, samples=8, workers=2, device='cpu')"
    except Exception as e:  # pragma: no cover - depends on the environment  # noqa: BLE001
        return None, f"BlenderRenderer failed ({type(e).__name__}: {e})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 500])
    ap.add_argument("--steps", type=int, default=5, help="suggest() calls timed per size (median reported)")
    ap.add_argument("--no-render", action="store_true")
    a = ap.parse_args()
    space = SceneSpace()
    render, what = (None, "skipped (--no-render)") if a.no_render else _render_time()
    print(f"render: {what}")
    if render:
        print(f"  one render() call with 1 scene: {render[0]:.3f} s; per image in a batch of 40: {render[1]:.3f} s")
    print(
        f"{'n_obs':>6} {'stock median s':>15} {'tuned median s':>15} {'tuned max s':>12} {'speed-up':>9}"
        f" {'lean median s':>14} {'default median s':>17}" + ("   tuned / one render" if render else "")
    )
    for n in a.sizes:
        stock = _time_suggest(space, n, a.steps, stock=True)
        tuned = _time_suggest(space, n, max(a.steps, 5), single_thread=True)  # covers one hyperparameter refit
        lean = _time_suggest(space, n, max(a.steps, 10), n_random=500, n_local=100, refit_every=10)
        default = _time_suggest(
            space, n, max(a.steps, 5), kappa=0.5, objective="logit", ard=True, min_length_scale=0.05
        )
        line = (
            f"{n:>6} {np.median(stock):>15.3f} {np.median(tuned):>15.3f} {tuned.max():>12.3f} "
            f"{np.median(stock) / np.median(tuned):>8.1f}x {np.median(lean):>14.3f} {np.median(default):>17.3f}"
        )
        if render:
            line += (
                f"   {np.mean(tuned) / render[0]:.2f} (mean tuned / 1-scene call), "
                f"{np.mean(tuned) / render[1]:.2f} (/ per image in a batch)"
            )
        print(line)


if __name__ == "__main__":
    main()
