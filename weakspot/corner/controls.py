"""The controls a corner-case run is read against: the independent judge on corner cases, on the seeds before the
search, on uniformly random codes and on real held-out images; the generator's quality gate; the search rerun at the
paper's step.

Caveats first:

* Every set is judged the same way (:meth:`weakspot.corner.judge.RealismJudge.verdict`), each image's claimed pair
  being its top two classes under the audited model. Random codes are drawn uniformly in the bounding box of the
  standardised training codes and decoded by the same generator: they measure what the judge passes without any
  search and without the seeds' KDE.
* The *yield* counts, per try, the inputs that are both near the audited model's boundary (``p1 - p2 <
  boundary_margin``) and passed by the judge: the search's corner cases per seed against random codes per code. The
  lift between the two is :func:`weakspot.evidence.compare`'s (a ratio of two proportions with its 95% interval).
* The gate is measured on held-out images the generator never learnt: the audited model's accuracy on their
  reconstructions ``G(E(x))`` over its accuracy on the images themselves. Below ``gate`` the decodings are blurred
  past what the model can read, and nothing decoded is called realistic.
* The paper's step (lr 0.001, constant, Sec. 4.3) is rerun on the first ``paper_lr_seeds`` seeds only, with the same
  loss, steps and generator, so the two margin reductions differ in the step alone.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from weakspot.corner.judge import RealismJudge, wilson

PAPER_LR = 0.001
"""Sec. 4.3: "only 50 gradient step (Adam, lr=0.001)"."""


def random_codes(codes: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` codes drawn uniformly in the bounding box of ``codes`` ``(m, d)``."""
    c = np.asarray(codes, np.float64)
    rng = np.random.default_rng([int(seed) % (2**32), 17])
    return rng.uniform(c.min(0), c.max(0), size=(int(n), c.shape[1])).astype(np.float32)


def top_two(clf: Any, images: np.ndarray) -> Dict[str, np.ndarray]:
    """The audited model's top class, runner-up and ``p1 - p2`` on each image."""
    if not len(images):
        z = np.zeros(0, np.int64)
        return {"a": z, "b": z, "margin": np.zeros(0)}
    p = np.asarray(clf.predict_proba(np.asarray(images, np.float32)), np.float64)
    order = np.argsort(-p, axis=1)[:, :2]
    rows = np.arange(len(p))
    return {"a": order[:, 0], "b": order[:, 1], "margin": p[rows, order[:, 0]] - p[rows, order[:, 1]]}


def counts(v: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """A verdict's counts: ``n``, ``pair``, ``near``, ``sharp``, ``passed``, ``share`` and its 95% Wilson ``interval``."""
    n, k = int(len(v["passed"])), int(np.sum(v["passed"]))
    ci = wilson(k, n)
    return {
        "n": n,
        "pair": int(np.sum(v["pair"])),
        "near": int(np.sum(v["near"])),
        "sharp": int(np.sum(v["sharp"])),
        "passed": k,
        "share": k / n if n else None,
        "interval": list(ci) if ci else None,
    }


def judged_sets(
    clf: Any,
    g: Any,
    judge: RealismJudge,
    search: Any,
    corner: np.ndarray,
    X_real: np.ndarray,
    n_random: int,
    boundary_margin: float,
    seed: int,
) -> Dict[str, Any]:
    """The judge on the four sets and the yield against random codes.

    Returns
    -------
    dict
        ``sets``: counts (:func:`counts`) of ``corner`` (the corner cases after the search), ``seeds`` (every seed
        before the search), ``random`` (uniform codes) and ``real`` (real held-out images, the control half);
        ``passed``: per seed, whether its image after the search passes; ``yield``: the counts of boundary inputs
        the judge passes per try, for the search and for random codes, with :func:`weakspot.evidence.compare`'s
        lift.
    """
    from weakspot.evidence import compare

    after = judge.verdict(search.images_after, search.pred_after, search.second_after)
    before_tt = top_two(clf, search.images_before)
    before = judge.verdict(search.images_before, before_tt["a"], before_tt["b"])
    rand_x = g.decode_np(random_codes(g.codes, n_random, seed))
    rand_tt = top_two(clf, rand_x)
    rand = judge.verdict(rand_x, rand_tt["a"], rand_tt["b"])
    real_tt = top_two(clf, X_real)
    real = judge.verdict(X_real, real_tt["a"], real_tt["b"])
    corner = np.asarray(corner, bool)
    sets = {
        "corner": counts({k: v[corner] for k, v in after.items()}),
        "seeds": counts(before),
        "random": counts(rand),
        "real": counts(real),
    }
    k_search = int(np.sum(after["passed"] & corner))
    k_random = int(np.sum(rand["passed"] & (rand_tt["margin"] < boundary_margin)))
    ev = compare(k_search, int(search.n), k_random, int(n_random))
    yld = {
        "search": k_search,
        "n_seeds": int(search.n),
        "random": k_random,
        "n_random": int(n_random),
        "search_share": k_search / search.n if search.n else None,
        "random_share": k_random / n_random,
        "search_interval": _list(wilson(k_search, int(search.n))),
        "random_interval": _list(wilson(k_random, n_random)),
        "lift": ev.lift,
        "lift_interval": [ev.lift_lo, ev.lift_hi],
        "random_near": int(np.sum(rand_tt["margin"] < boundary_margin)),
    }
    return {"sets": sets, "passed": after["passed"], "yield": yld}


def _list(ci: Optional[tuple]) -> Optional[list]:
    return list(ci) if ci else None


def generator_gate(
    clf: Any, judge: Optional[RealismJudge], g: Any, X: np.ndarray, y: np.ndarray, gate: float
) -> Dict[str, Any]:
    """The generator's quality gate on held-out images ``X`` (labels ``y``): the audited model's (and the reference's)
    accuracy on the images and on their reconstructions; ``holds`` when the model's ratio reaches ``gate``."""
    X, y = np.asarray(X, np.float32), np.asarray(y, np.int64)
    r = g.reconstruct_np(X)
    on_x, on_r = float(np.mean(clf.predict(X) == y)), float(np.mean(clf.predict(r) == y))
    out = {
        "n": int(len(X)),
        "model_on_images": on_x,
        "model_on_reconstructions": on_r,
        "ratio": on_r / on_x if on_x > 0 else 0.0,
        "gate": float(gate),
    }
    if judge is not None:
        out["reference_on_images"] = float(np.mean(judge.reference.predict(X) == y))
        out["reference_on_reconstructions"] = float(np.mean(judge.reference.predict(r) == y))
    out["holds"] = bool(out["ratio"] >= gate)
    return out


def paper_lr_margins(
    clf: Any, g: Any, seeds: np.ndarray, density: Any, params: Any, use_disc: bool
) -> Optional[Dict[str, Any]]:
    """The search rerun at lr 0.001, constant, on the first ``params.paper_lr_seeds`` seeds (None for 0 seeds):
    the medians of the logit margin before and after and their ratio."""
    from weakspot.corner.search import search_corner_cases

    k = min(int(params.paper_lr_seeds), len(seeds))
    if k == 0:
        return None
    s = search_corner_cases(
        clf,
        g,
        seeds[:k],
        steps=params.steps,
        lr=PAPER_LR,
        density=density,
        realism_weight=params.realism_weight,
        use_discriminator=use_disc,
        disc_alpha=params.disc_alpha,
        schedule="constant",
    )
    mb, ma = float(np.median(s.margin_before)), float(np.median(s.margin_after))
    return {
        "n_seeds": k,
        "lr": PAPER_LR,
        "steps": int(params.steps),
        "margin_before": mb,
        "margin_after": ma,
        "margin_reduction": mb / ma if ma > 0 else float("inf"),
        "near_boundary_share": float(np.mean(s.prob_margin_after < params.boundary_margin)),
    }
