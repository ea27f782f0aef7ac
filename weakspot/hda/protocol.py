"""The evaluation of seeds/004 (Sec. 4) on one target's arrays: one function per research question.

* RQ1, stage 1 (:func:`rq1_distribution`): the VAE + KDE against PCA (Table 3) and the FID of decoded KDE samples
  against uniform latent samples (Fig. 3).
* RQ1, stage 2 and the seed selection (:func:`rq1_seeds`): the local-robustness indicators against Webb et al.'s
  statistical local robustness of random balls (Table 4), HDA's seeds against random ones (Table 5).
* RQ2 (:func:`rq2_generators`): the two-step GA, PGD, coverage-guided fuzzing and FODA on the same seeds with the
  same test cases per seed (Tables 6-7).
* RQ3 (:func:`rq3_adversarial_model`): FGSM, PGD, AutoAttack and HDA on the audited and an adversarially trained
  model (Table 8).
* RQ4 (:func:`rq4_finetune`): adversarial fine-tuning with each method's test cases (Table 9).

Caveats first:

* Protocol: candidate seeds are correctly classified inputs of the test split (then the validation split) up to
  ``pool``; random seeds are a uniform draw from the Table 4 balls that are not selected seeds (the balls themselves a
  uniform draw of the candidates), HDA's seeds the top ``n_seeds`` by density x indicator. Every generator gets the same seeds and the same number
  of test cases per seed (allocated by density, Sec. 3.4).
* One ``numpy`` generator seeded by ``hda.seed`` is drawn from in this order: the FID reference sample (RQ1), the
  balls (RQ1), the coverage reference sample (RQ2), then RQ4's validation pool, random seeds and training subsets;
  calling the questions in another order changes every random stream after it.
* ``hda.depth: audit`` runs the weak spots' evidence only: the seeds (density, indicator, selection, the balls the
  random seeds come from, without their local robustness) and HDA's GA on both seed sets, without FID. It makes the
  same draws up to the GA (:func:`rq1_draws` stands in for :func:`rq1_distribution`; the GA and every estimator
  seed generators of their own), so its seeds, test cases and weak spots are the study depth's.
* FID compares a method's AEs with the seeds they came from (pair by pair, :func:`weakspot.hda.fid.paired_fid`) on
  the features of a reference CNN this stage trains (:mod:`weakspot.hda.reference`, not Inception, not the audited
  model): comparable across methods of one target only, biased upward with few AEs (hence its pair count and
  bootstrap interval).
* OODA (Table 7) is PGD's test cases with only the AEs the VAE's reconstruction probability accepts
  (:mod:`weakspot.hda.ooda`); every generator's share of such "valid" AEs is measured with the same threshold.
* RQ4's global robustness is measured, as in the paper, on AEs the HDA GA finds (with another random seed) around
  a validation pool drawn by density, which favours HDA's own fine-tuning; the accuracy on PGD's AEs around the
  same pool is measured too, which favours PGD's.
* The white-box parts (gradient indicator, PGD, coverage, RQ3, RQ4) need ``bench.module``, a torch module answering
  logits; on a black box they are skipped by the caller (:func:`weakspot.hda.run.audit`). Coverage-guided fuzzing
  also needs hidden neurons a forward hook sees (:func:`weakspot.hda.coverage.hookable`): on a module without them (a
  TorchScript model) it is skipped in RQ2 and RQ4 and the results say why (``skipped``); the rest runs.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple, cast

import numpy as np
import torch

from weakspot.hda import generate as G
from weakspot.hda.config import HdaParams, coverage_iterations
from weakspot.hda.density import Density, latent_quality
from weakspot.hda.fid import FidEstimate, fid, paired_fid
from weakspot.hda.ooda import Validity
from weakspot.hda.reference import Reference
from weakspot.hda.result import AdversarialModel, Distribution, Finetuning, Generators, Landscape, Seeds
from weakspot.progress import Progress

Pair = Tuple[np.ndarray, np.ndarray]


@dataclass
class Splits:
    """One target's arrays: ``(X, y)`` of each split, the candidate seeds (test then validation inputs) and their
    names for the findings (``None``: "candidate <i>")."""

    train: Pair
    val: Pair
    test: Pair
    candidates: Pair
    names: Optional[Sequence[str]] = None


@dataclass
class Bench:
    """What every research question works with: the model, its probabilities, the distribution and the settings.

    ``module`` is the audited torch module answering logits, or None for a black box (``proba_fn`` only).
    """

    module: Optional[torch.nn.Module]
    proba_fn: G.ProbaFn
    density: Density
    reference: Optional[Reference]  # the FID reference network; None at depth audit (no FID)
    p: HdaParams
    radius: float
    clip: Tuple[float, float]
    device: Any = "cpu"
    progress: Optional[Progress] = None
    validity: Optional[Validity] = None

    @property
    def white(self) -> bool:
        return self.module is not None

    @property
    def study(self) -> bool:
        """Whether the paper's comparisons run (``hda.depth: study``), not only the weak spots' evidence."""
        return self.p.comparisons

    @property
    def ref(self) -> Reference:
        """``reference``, for the FID steps (which run at depth study, where it is trained)."""
        assert self.reference is not None, "a FID without the reference network (depth audit)"
        return self.reference

    @property
    def white_module(self) -> torch.nn.Module:
        """``module``, for the white-box steps (their callers check :attr:`white`)."""
        assert self.module is not None, "a white-box step on a black-box model"
        return self.module

    @property
    def coverage_skip(self) -> Optional[str]:
        """Why coverage-guided fuzzing cannot run on the white-box ``module`` (None: it can, or a black box, where
        no white-box generator runs)."""
        from weakspot.hda.coverage import hookable

        return None if self.module is None else hookable(self.module)

    @property
    def batch(self) -> int:
        return int(self.p.batch_size)

    def ga(self, proba_fn: G.ProbaFn, X: np.ndarray, y: np.ndarray, n_cases: Any, seed: int) -> G.LocalResult:
        """The two-step GA with ``hda.ga``'s settings on seeds ``X`` (labels ``y``)."""
        ga = self.p.ga
        return G.two_step_ga(
            proba_fn,
            X,
            y,
            n_cases,
            self.radius,
            clip=self.clip,
            population=ga.population,
            generations=ga.generations,
            metric=ga.metric,
            lam=ga.lam,
            switch_at=ga.switch_at,
            crossover=ga.crossover,
            mutation_rate=ga.mutation_rate,
            mutation_scale=ga.mutation_scale,
            elite=ga.elite,
            batch=self.batch * 4,
            device=self.device,
            seed=seed,
            progress=self.progress,
        )

    def pgd(self, module: torch.nn.Module, X: np.ndarray, y: np.ndarray, n_cases: Any, seed: int) -> G.LocalResult:
        """PGD-``hda.pgd_steps``, one random start per test case."""
        return G.pgd_cases(
            module,
            X,
            y,
            n_cases,
            self.radius,
            clip=self.clip,
            steps=self.p.pgd_steps,
            seed=seed,
            batch=self.batch,
            device=self.device,
        )

    def fid_of(self, seeds: np.ndarray, cases: np.ndarray) -> FidEstimate:
        """The FID of test cases against their own seeds on the reference network, with its bootstrap interval."""
        return paired_fid(self.ref.features, seeds, cases, bootstrap=self.p.fid.bootstrap, seed=self.p.seed)

    def evaluate(
        self,
        res: G.LocalResult,
        seeds_name: str,
        X: np.ndarray,
        y: np.ndarray,
        proba_fn: Optional[G.ProbaFn] = None,
        require_valid: bool = False,
    ) -> G.CaseEval:
        """Table 6's numbers for test cases around seeds ``X`` (on ``proba_fn``, default the audited model's);
        ``require_valid``: only AEs the VAE's reconstruction probability accepts count (OODA). No FID without the
        reference network (depth audit)."""
        return G.evaluate_cases(
            res,
            seeds_name,
            X,
            y,
            proba_fn or self.proba_fn,
            self.density,
            clip=self.clip,
            batch=self.batch,
            device=self.device,
            fid_of=self.fid_of if self.reference is not None else None,
            validity=self.validity,
            require_valid=require_valid,
        )


class Clock:
    """Seconds per step (two decimals), for the report's timings and the lineage, never the metrics."""

    def __init__(self) -> None:
        self.seconds: Dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        self.seconds[name] = round(time.perf_counter() - t0, 2)


def predict(proba_fn: G.ProbaFn, X: np.ndarray, batch: int) -> np.ndarray:
    """Probabilities of inputs ``X`` as a numpy array, ``batch`` rows at a time."""
    with torch.no_grad():
        return G.batched_proba(proba_fn, torch.as_tensor(np.asarray(X, np.float32)), batch).cpu().numpy()


# ------------------------------------------------------------------------------------------------------------ RQ1
def rq1_distribution(
    bench: Bench, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, n_classes: int, rng: np.random.Generator
) -> Distribution:
    """Table 3 (the VAE encoder against PCA) and Fig. 3 (FID of KDE samples and uniform latent samples)."""
    p, dens = bench.p, bench.density
    table3 = latent_quality(dens, X_train, y_train, X_test, n_classes, seed=p.seed)
    n_fid = int(min(p.fid_samples, len(X_train)))
    ref = X_train[rng.choice(len(X_train), n_fid, replace=False)]
    img_kde, img_uni = dens.decode(dens.sample(n_fid, p.seed)), dens.decode(dens.sample_uniform(n_fid, p.seed))
    feat = bench.ref.features
    fid3 = {"kde": fid(feat, ref, img_kde), "uniform": fid(feat, ref, img_uni)}
    return Distribution(table3, fid3, img_kde[:8], img_uni[:8], bench.ref.label, bench.validity, bench.ref.info())


def rq1_draws(bench: Bench, X_train: np.ndarray, rng: np.random.Generator) -> Distribution:
    """Depth audit's stand-in for :func:`rq1_distribution`: none of its work (no Table 3, no FID), only its draw
    from ``rng`` (the FID reference sample's indices, thrown away), so that the balls, the random seeds and everything
    after are drawn as at depth study; the distribution holds the validity threshold only."""
    rng.choice(len(X_train), int(min(bench.p.fid_samples, len(X_train))), replace=False)  # as rq1_distribution's
    return Distribution(None, {}, None, None, "", bench.validity, None)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r over the finite pairs (:func:`scipy.stats.pearsonr`); NaN with fewer than 3 finite pairs or a
    constant input."""
    from scipy.stats import pearsonr

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or a[ok].std() == 0 or b[ok].std() == 0:
        return float("nan")
    return float(pearsonr(a[ok], b[ok]).statistic)


def landscape(dens: Density, X: np.ndarray, grid: int = 60) -> Landscape:
    """The KDE's relative log density on the training codes' first two principal components, and ``X``'s codes
    there (the grid spans the codes' 1st to 99th percentiles)."""
    mu = dens.mu.cpu().numpy()
    c = mu - mu.mean(0)
    _, _, vt = np.linalg.svd(c[:5000], full_matrices=False)
    pc = vt[:2]
    tr = c @ pc.T
    lo, hi = np.percentile(tr, 1, 0), np.percentile(tr, 99, 0)
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], grid), np.linspace(lo[1], hi[1], grid))
    Z = mu.mean(0) + np.stack([gx.ravel(), gy.ravel()], 1) @ pc
    dz = dens.log_kde(Z.astype(np.float32)).reshape(grid, grid) - dens.log_density_ref
    return Landscape(gx, gy, dz, (dens.encode(X)[0] - mu.mean(0)) @ pc.T)


def rq1_seeds(bench: Bench, data: Splits, rng: np.random.Generator, clock: Clock) -> Seeds:
    """The candidates, both indicators, the local robustness of random balls (Table 4) and HDA's seeds against
    random ones (Table 5). At depth audit the balls are drawn (the random seeds are drawn from them) but their local
    robustness is not estimated: no Table 4, Table 5 without it."""
    from weakspot.hda.robustness import amls_log_prob, misclassification_score

    p, dens, bs = bench.p, bench.density, bench.batch
    (X_cand, y_cand), (X_train, y_train) = data.candidates, data.train
    P_cand = predict(bench.proba_fn, X_cand, bs)
    ok = np.where(P_cand.argmax(1) == y_cand)[0][: int(p.pool)]
    Xc, yc = X_cand[ok], y_cand[ok]
    names = [str(data.names[i]) if data.names is not None else f"candidate {i}" for i in ok]
    ld = dens.log_density(Xc)
    P_train = predict(bench.proba_fn, X_train, bs)
    with clock("indicators"):
        sep = G.separation_indicator(P_cand[ok], yc, P_train, y_train)
        grad = G.gradient_indicator(bench.white_module, Xc, yc, device=bench.device) if bench.white else None
        use = "gradient" if (p.indicator == "gradient" or (p.indicator == "auto" and bench.white)) else "separation"
        if use == "gradient" and not bench.white:
            use = "separation"  # a black-box model has no gradient; the report says which ran
        fragility = grad if use == "gradient" else -sep
        assert fragility is not None  # "gradient" only on a white box, which has grad

    rb = p.robustness
    balls = rng.choice(len(Xc), min(int(rb.n_balls), len(Xc)), replace=False)
    k = min(int(p.n_seeds), len(Xc))
    sel = G.select_seeds(ld, fragility, k, normalise=p.normalise)
    rnd = balls[~np.isin(balls, sel)][:k]  # the control seeds: random, and none of them a selected seed
    if len(rnd) < k:  # too few balls outside the selection (small settings): other candidates, drawn at random
        rest = np.setdiff1d(np.arange(len(Xc)), np.concatenate([balls, sel]))
        rnd = np.concatenate([rnd, rng.permutation(rest)[: k - len(rnd)]]).astype(balls.dtype)
    if not len(rnd):  # every candidate is a selected seed: no control is left; the balls stand in for the paper's
        rnd = balls[:k]  # tables, and the seed set's evidence is not tested (weakspot.hda.evidence.disjoint)
    ind = {
        name: {
            "log_density": float(ld[ids].mean()),
            "indicator": float(np.log10(np.abs(fragility[ids]) + 1e-30).mean()),
        }
        for name, ids in (("random", rnd), ("selected", sel))
    }
    log10p = np.full(len(Xc), np.nan)
    pear: Dict[str, Optional[float]] = {}
    floor = float("nan")
    if bench.study:  # Table 4 and Table 5's local robustness: AMLS over the balls and the selected seeds
        est_idx = np.unique(np.concatenate([balls, sel]))
        with clock("local robustness (AMLS)"):
            yt_est = torch.as_tensor(yc[est_idx], dtype=torch.int64)
            score = (
                misclassification_score(bench.module, yt_est, from_logits=True)
                if bench.white
                else misclassification_score(bench.proba_fn, yt_est, from_logits=False)
            )
            est = amls_log_prob(
                score,
                torch.as_tensor(Xc[est_idx]),
                bench.radius,
                clip=bench.clip,
                particles=rb.particles,
                rho=rb.rho,
                mh_steps=rb.mh_steps,
                log_p_min=rb.log_p_min,
                max_levels=rb.max_levels,
                seed=p.seed,
                progress=bench.progress,
            )
        log10p[est_idx] = est.log10_p
        pear = {
            "gradient": _pearson(log10p[balls], np.log10(grad[balls] + 1e-30)) if grad is not None else None,
            "separation": _pearson(log10p[balls], np.log10(sep[balls] + 1e-30)),
        }
        floor = float(np.mean(est.terminated[np.searchsorted(est_idx, balls)]))
        for name, ids in (("random", rnd), ("selected", sel)):
            ind[name]["log10_local_robustness"] = float(log10p[ids].mean())
    table5: Dict[str, Dict[str, float]] = {  # the paper's column order
        name: {k: v[k] for k in ("log_density", "log10_local_robustness", "indicator") if k in v}
        for name, v in ind.items()
    }
    return Seeds(
        Xc,
        yc,
        names,
        ld,
        use,
        grad,
        sep,
        sel,
        rnd,
        balls,
        log10p,
        pear,
        floor,
        table5,
        predict(bench.proba_fn, Xc[sel], bs),
        landscape(dens, Xc),
    )


# ------------------------------------------------------------------------------------------------------------ RQ2
def _coverage(bench: Bench, cov: Any, Xs: np.ndarray, ys: np.ndarray, n_i: Any) -> G.LocalResult:
    from weakspot.hda.coverage import coverage_fuzz

    c = bench.p.coverage
    r = coverage_fuzz(
        bench.white_module,
        torch.as_tensor(Xs),
        ys,
        n_i,
        bench.radius,
        clip=bench.clip,
        coverage=cov,
        iterations=coverage_iterations(bench.p),
        mutants=c.mutants,
        seed=bench.p.seed,
        progress=bench.progress,
    )
    return G.LocalResult(
        "coverage",
        r.X_cases,
        r.seed_index,
        r.queries,
        r.seconds,
        {"coverage_rate": r.coverage_rate, "curve": r.coverage_curve},
    )


def _generate(bench: Bench, mname: str, cov: Any, Xs: np.ndarray, ys: np.ndarray, n_i: np.ndarray) -> G.LocalResult:
    p = bench.p
    if mname == "hda":
        return bench.ga(bench.proba_fn, Xs, ys, n_i, p.seed)
    if mname == "foda":
        return G.foda_cases(bench.density, Xs, n_i, samples=p.foda.samples, scale=p.foda.scale, seed=p.seed)
    if mname == "pgd":
        return bench.pgd(bench.white_module, Xs, ys, n_i, p.seed)
    return _coverage(bench, cov, Xs, ys, n_i)


def rq2_generators(bench: Bench, seeds: Seeds, X_train: np.ndarray, rng: np.random.Generator) -> Generators:
    """Tables 6-7: every generator (HDA's GA, FODA; PGD, OODA and coverage-guided fuzzing on a white box) on HDA's
    seeds and on random ones, the same test cases per seed (OODA: PGD's test cases, only its valid AEs counted). At
    depth audit HDA's GA alone, on both seed sets with the same allocation (the weak spots' evidence); ``rng`` is not
    drawn from then (the coverage reference sample is the only draw here, and nothing after it draws at that depth)."""
    from weakspot.hda.coverage import NeuronCoverage

    p = bench.p
    cov = None
    skip = bench.coverage_skip if bench.study else None
    if bench.study:
        names: Tuple[str, ...] = ("hda", "foda", "pgd", "coverage") if bench.white else ("hda", "foda")
    else:
        names = ("hda",)
    if bench.white and skip is None and "coverage" in names:
        ref_cov = X_train[rng.choice(len(X_train), min(1000, len(X_train)), replace=False)]
        cov = NeuronCoverage(
            bench.white_module, torch.as_tensor(ref_cov, device=bench.device), threshold=p.coverage.threshold
        )
    results: Dict[Tuple[str, str], G.LocalResult] = {}
    evals: Dict[Tuple[str, str], G.CaseEval] = {}
    alloc: Dict[str, np.ndarray] = {}
    for sname, ids in (("selected", seeds.selected), ("random", seeds.random)):
        n_i = G.allocate(seeds.log_density[ids], int(p.cases_per_seed) * len(ids), p.ga.population)
        alloc[sname] = n_i
        Xs, ys = seeds.X[ids], seeds.y[ids]
        for mname in names:
            if mname == "coverage" and skip is not None:
                continue
            res = results[(mname, sname)] = _generate(bench, mname, cov, Xs, ys, n_i)
            evals[(mname, sname)] = bench.evaluate(res, sname, Xs, ys)
            if mname == "pgd" and bench.validity is not None:
                res = results[("ooda", sname)] = dataclasses.replace(res, method="ooda")
                evals[("ooda", sname)] = bench.evaluate(res, sname, Xs, ys, require_valid=True)
    cov_rate = None
    if cov is not None:
        cov_rate = float(cov.rate)
        cov.close()
    return Generators(results, evals, alloc, cov_rate, {"coverage": skip} if skip is not None else {})


# ------------------------------------------------------------------------------------------------------------ RQ3
def _attack(
    bench: Bench,
    att: str,
    mod: torch.nn.Module,
    pf: G.ProbaFn,
    Xs: np.ndarray,
    ys: np.ndarray,
    n_i: Any,
    n_classes: int,
) -> G.LocalResult:
    from weakspot.adversarial.attacks import batched, fgsm

    p, radius, clip = bench.p, float(bench.radius), cast(Tuple[float, float], tuple(bench.clip))
    t0 = time.perf_counter()
    idx = np.repeat(np.arange(len(Xs)), n_i)
    if att == "fgsm":
        X = batched(fgsm, mod, Xs[idx], ys[idx], batch_size=bench.batch, device=bench.device, eps=radius, clip=clip)
        return G.LocalResult("fgsm", X, idx, len(idx), time.perf_counter() - t0)
    if att == "autoattack":
        from weakspot.adversarial.art_attacks import art_autoattack

        X = art_autoattack(
            mod,
            Xs[idx],
            ys[idx],
            eps=radius,
            clip=clip,
            n_classes=n_classes,
            iters=p.autoattack_iters,
            seed=p.seed,
            batch_size=bench.batch,
            device=bench.device,
        )
        return G.LocalResult("autoattack", X, idx, 0, time.perf_counter() - t0)
    if att == "pgd":
        return bench.pgd(mod, Xs, ys, n_i, p.seed)
    return bench.ga(pf, Xs, ys, n_i, p.seed)


def rq3_adversarial_model(
    bench: Bench,
    seeds: Seeds,
    gens: Generators,
    n_classes: int,
    adversarial: Optional[torch.nn.Module] = None,
    label: str = "",
) -> AdversarialModel:
    """Table 8: FGSM, PGD, AutoAttack and HDA on the audited model (HDA's seeds, RQ2's PGD and HDA test cases) and
    on ``adversarial`` (its own seeds: its correct candidates by its own gradient indicator); skipped for a model
    with fewer than 2 correct candidates."""
    p, module = bench.p, bench.white_module
    models = {
        "normal": module,
        **({"adversarial": adversarial} if adversarial is not None and p.adversarial_model else {}),
    }
    evals: Dict[str, Dict[str, G.CaseEval]] = {}
    seed_ld: Dict[str, float] = {}
    for mlabel, mod in models.items():
        pf = bench.proba_fn if mod is module else G.module_proba(mod)
        if mod is module:
            s_ids, n_i = seeds.selected, gens.allocation["selected"]
        else:  # the adversarial model's own seeds: its correct candidates, its own gradient indicator
            okm = np.where(predict(pf, seeds.X, bench.batch).argmax(1) == seeds.y)[0]
            if len(okm) < 2:
                continue
            gm = G.gradient_indicator(mod, seeds.X[okm], seeds.y[okm], device=bench.device)
            s_ids = okm[
                G.select_seeds(seeds.log_density[okm], gm, min(len(seeds.selected), len(okm)), normalise=p.normalise)
            ]
            n_i = G.allocate(seeds.log_density[s_ids], int(p.cases_per_seed) * len(s_ids), p.ga.population)
        Xs, ys = seeds.X[s_ids], seeds.y[s_ids]
        ones = np.ones(len(Xs), np.int64)
        row: Dict[str, G.CaseEval] = {}
        for att in ("fgsm", "pgd", "autoattack", "hda"):
            if mod is module and att in ("pgd", "hda"):
                row[att] = gens.evals[(att, "selected")]
            else:
                res = _attack(bench, att, mod, pf, Xs, ys, ones if att in ("fgsm", "autoattack") else n_i, n_classes)
                row[att] = bench.evaluate(res, "selected", Xs, ys, pf)
        evals[mlabel] = row
        seed_ld[mlabel] = float(seeds.log_density[s_ids].mean())
    return AdversarialModel(evals, seed_ld, label)


# ------------------------------------------------------------------------------------------------------------ RQ4
def _validation_pool(bench: Bench, X_val: np.ndarray, y_val: np.ndarray, rng: np.random.Generator) -> Pair:
    """Up to ``finetune.pool`` correctly classified validation inputs, drawn without replacement by density."""
    Pv = predict(bench.proba_fn, X_val, bench.batch)
    okv = np.where(Pv.argmax(1) == y_val)[0]
    ldv = bench.density.log_density(X_val[okv])
    w = np.exp(ldv - ldv.max())
    n_pool = min(int(bench.p.finetune.pool), len(okv))
    pool = okv[rng.choice(len(okv), n_pool, replace=False, p=w / w.sum())] if n_pool else okv
    return X_val[pool], y_val[pool]


def _validation_aes(bench: Bench, Xv: np.ndarray, yv: np.ndarray) -> Tuple[Pair, Pair, Dict[str, Any]]:
    """The AEs of global robustness around the held-out seeds ``Xv``, where the audited model errs: the HDA GA's
    (another random seed, ``finetune.cases_per_seed`` test cases per input) and PGD's (one per input); and the GA
    search's AE rate on the audited model (the fresh search's "before", :func:`_rate`)."""
    n_val = np.full(len(Xv), int(bench.p.finetune.cases_per_seed), np.int64)
    vres = bench.ga(bench.proba_fn, Xv, yv, n_val, bench.p.seed + 1)
    vy = yv[vres.seed_index]
    keep = predict(bench.proba_fn, vres.X_cases, bench.batch).argmax(1) != vy
    val_hda, search_rate = (vres.X_cases[keep], vy[keep]), _rate(keep)
    pres = bench.pgd(bench.white_module, Xv, yv, np.ones(len(Xv), np.int64), bench.p.seed + 1)
    keep = predict(bench.proba_fn, pres.X_cases, bench.batch).argmax(1) != yv[pres.seed_index]
    return val_hda, (pres.X_cases[keep], yv[pres.seed_index][keep]), search_rate


def _rate(mask: np.ndarray) -> Dict[str, Any]:
    """The share of True in ``mask`` with the count it rests on (``rate`` None when empty)."""
    return {"rate": float(mask.mean()) if len(mask) else None, "n": int(len(mask))}


def reattack(
    bench: Bench,
    repaired: torch.nn.Module,
    X_held: np.ndarray,
    y_held: np.ndarray,
    before: Dict[str, Any],
    X_test: np.ndarray,
    y_test: np.ndarray,
    n_classes: int,
) -> Dict[str, Dict[str, Any]]:
    """The repaired model attacked again, next to the audited one: a fresh HDA search (the same GA and random seed)
    around the held-out seeds, its AE rate before and after; PGD-``pgd_steps`` and AutoAttack accuracy on test
    inputs (inputs neither model was fine-tuned on)."""
    fixed = G.module_proba(repaired)
    after = bench.ga(
        fixed, X_held, y_held, np.full(len(X_held), int(bench.p.finetune.cases_per_seed), np.int64), bench.p.seed + 1
    )
    wrong = predict(fixed, after.X_cases, bench.batch).argmax(1) != y_held[after.seed_index]
    out = {"hda_search": {"before": before, "after": _rate(wrong)}}
    ones = np.ones(len(X_test), np.int64)
    for att in ("pgd", "autoattack"):
        row = {}
        for name, mod, fn in (("before", bench.white_module, bench.proba_fn), ("after", repaired, fixed)):
            res = (
                bench.pgd(mod, X_test, y_test, ones, bench.p.seed + 2)
                if att == "pgd"
                else _attack(bench, att, mod, fn, X_test, y_test, ones, n_classes)
            )
            row[name] = _rate(predict(fn, res.X_cases, bench.batch).argmax(1) == y_test[res.seed_index])
        out[f"{att}_accuracy"] = row
    return out


def _finetune_cases(
    bench: Bench, mname: str, Xs: np.ndarray, ys: np.ndarray, lds: np.ndarray, X_ref: np.ndarray
) -> G.LocalResult:
    """Method ``mname``'s fine-tuning test cases around seeds ``Xs`` (HDA's allocated by density ``lds``)."""
    from weakspot.hda.coverage import NeuronCoverage

    p = bench.p
    n_i = np.full(len(Xs), int(p.finetune.cases_per_seed), np.int64)
    if mname == "hda":
        n_i = G.allocate(lds, int(p.finetune.cases_per_seed) * len(Xs), p.ga.population)
        return bench.ga(bench.proba_fn, Xs, ys, n_i, p.seed)
    if mname == "pgd":
        return bench.pgd(bench.white_module, Xs, ys, n_i, p.seed)
    with NeuronCoverage(
        bench.white_module, torch.as_tensor(X_ref, device=bench.device), threshold=p.coverage.threshold
    ) as cov:
        return _coverage(bench, cov, Xs, ys, n_i)


def _accuracy(bench: Bench, mod: torch.nn.Module, X: np.ndarray, y: np.ndarray) -> Optional[float]:
    if len(X) == 0:
        return None
    return float((predict(G.module_proba(mod), X, bench.batch).argmax(1) == y).mean())


def split_pool(n: int, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """The validation pool's two disjoint halves: (fine-tuning seeds are drawn from, held-out seeds) indices."""
    perm = rng.permutation(n)
    return np.sort(perm[n // 2 :]), np.sort(perm[: n // 2])


def rq4_finetune(bench: Bench, data: Splits, rng: np.random.Generator, n_classes: int) -> Finetuning:
    """Table 9: fine-tune a copy of the audited model with each method's test cases (around seeds of one half of a
    validation pool drawn by density: HDA's by density x gradient indicator, the others' at random) mixed with
    training inputs; the accuracies before and after on AEs around the other half (held-out seeds, disjoint by
    construction), the HDA-fine-tuned model attacked again, and its weights."""
    from weakspot.hda.finetune import finetune

    p, ft = bench.p, bench.p.finetune
    (X_train, y_train), (X_test, y_test) = data.train, data.test
    Xv, yv = _validation_pool(bench, *data.val, rng)
    tune, held = split_pool(len(Xv), rng)
    ldp = bench.density.log_density(Xv)
    k = min(int(ft.seeds), len(tune))
    grad = G.gradient_indicator(bench.white_module, Xv[tune], yv[tune], device=bench.device)
    seeds = {
        "hda": tune[G.select_seeds(ldp[tune], grad, k, normalise=p.normalise)],
        "pgd": tune[rng.choice(len(tune), k, replace=False)],
        "coverage": tune[rng.choice(len(tune), k, replace=False)],
    }
    val_hda, val_pgd, search_before = _validation_aes(bench, Xv[held], yv[held])
    sub = rng.choice(len(X_train), min(int(ft.train), len(X_train)), replace=False)
    tr_eval = rng.choice(len(X_train), min(2000, len(X_train)), replace=False)
    te = rng.choice(len(X_test), min(int(ft.pool), len(X_test)), replace=False)

    def accuracies(mod: torch.nn.Module) -> Dict[str, Optional[float]]:
        return {
            "train_acc": _accuracy(bench, mod, X_train[tr_eval], y_train[tr_eval]),
            "test_acc": _accuracy(bench, mod, X_test, y_test),
            "global_robustness": _accuracy(bench, mod, *val_hda),
            "pgd_robustness": _accuracy(bench, mod, *val_pgd),
        }

    out = Finetuning(
        accuracies(bench.white_module),
        {},
        {},
        {},
        {
            "pool": int(len(Xv)),
            "held_seeds": int(len(held)),
            "tune_pool": int(len(tune)),
            "hda_aes": int(len(val_hda[0])),
            "pgd_aes": int(len(val_pgd[0])),
        },
        int(len(sub)),
        split={
            "tune": tune.tolist(),
            "held": held.tolist(),
            "seeds": {mn: np.asarray(ids).tolist() for mn, ids in seeds.items()},
        },
    )
    skip = bench.coverage_skip
    if skip is not None and "coverage" in ft.methods:
        out.skipped["coverage"] = skip
    for mname in ft.methods:
        if mname in out.skipped:
            continue
        ids = seeds[mname]
        res = _finetune_cases(bench, mname, Xv[ids], yv[ids], ldp[ids], X_train[sub[:1000]])
        X_ft = np.concatenate([X_train[sub], res.X_cases]).astype(np.float32)
        y_ft = np.concatenate([y_train[sub], yv[ids][res.seed_index]])
        m = finetune(
            bench.white_module,
            X_ft,
            y_ft,
            epochs=ft.epochs,
            lr=ft.lr,
            batch_size=ft.batch_size,
            seed=p.seed,
            device=bench.device,
            progress=bench.progress,
        )["module"]
        out.after[mname] = accuracies(m)
        out.test_cases[mname], out.seeds[mname] = int(len(res.X_cases)), int(len(ids))
        if mname == "hda":
            out.repaired = {kk: vv.detach().cpu() for kk, vv in m.state_dict().items()}
            out.reattack = reattack(bench, m, Xv[held], yv[held], search_before, X_test[te], y_test[te], n_classes)
    return out
