"""The HDA audit of one image target (seeds/004): RQ1 (Tables 3-4, Fig. 3), seed selection (Table 5), the two-step GA
against PGD, coverage-guided fuzzing and FODA (Table 6-7), the adversarially trained model (Table 8), adversarial
fine-tuning (Table 9) and the repaired model, findings and the report section.

Caveats first:

* Protocol: candidate seeds are correctly classified inputs of the test split (then the validation split) up to
  ``pool``; random seeds are a uniform draw from the Table 4 balls (themselves a uniform draw of the candidates),
  HDA's seeds the top ``n_seeds`` by density x indicator. Every generator gets the same seeds and the same number
  of test cases per seed (allocated by density, Sec. 3.4).
* FID compares a method's AEs with the seeds they came from (Table 2), on the penultimate-layer features of the
  audited model where it has a last linear layer (the network the pipeline trained), else on the VAE encoder's
  features; both are networks this pipeline trains, not Inception (no weights can be downloaded here), so FIDs
  compare methods within a target and not with the paper's numbers. FID also falls with more samples, so a method
  with fewer AEs is handicapped; the AE counts sit next to it.
* Timings are in the tables and the lineage, never in the metrics (metrics must be byte-identical across reruns);
  the metrics carry queries per seed instead.
* RQ4's global robustness is measured, as in the paper, on AEs the HDA GA finds (with another random seed) around
  a validation pool drawn by density, which favours HDA's own fine-tuning; we also give the accuracy on PGD's AEs
  around the same pool, which favours PGD's.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from weakspot.hda import generate as G
from weakspot.hda.config import PAPER_SETTINGS, HdaParams
from weakspot.hda.density import Density, frechet_distance, latent_quality, train_density
from weakspot.progress import Progress
from weakspot.result import StageResult

METHOD_TITLES = {"hda": "HDA (two-step GA)", "pgd": "PGD", "coverage": "coverage-guided fuzzing",
                 "foda": "FODA (VAE decoding)", "fgsm": "FGSM", "autoattack": "AutoAttack (ART)"}
SEVERITY = "adversarial test cases among the seed's, plus their mean SSIM to the seed (naturalness), over 2"


# ------------------------------------------------------------------------------------------------------ features
class Featurizer:
    """FID features: the input of the audited model's last linear layer, else the VAE encoder's hidden layer."""

    def __init__(self, module: Optional[torch.nn.Module], density: Density, batch: int = 1024, device: Any = "cpu"):
        self.density, self.batch, self.device = density, batch, device
        self.module, self.layer = None, None
        if module is not None:
            lins = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
            if lins:
                self.module, self.layer = module, lins[-1]
        self.name = ("the audited model's penultimate layer" if self.module is not None
                     else "the VAE encoder's hidden layer")

    def __call__(self, X: np.ndarray) -> np.ndarray:
        if self.module is None:
            return self.density.features(X)
        out: List[np.ndarray] = []
        h = self.layer.register_forward_hook(lambda m, i, o: out.append(i[0].detach().reshape(len(i[0]), -1)
                                                                        .cpu().numpy()))
        try:
            with torch.no_grad():
                for i in range(0, len(X), self.batch):
                    self.module(torch.as_tensor(np.asarray(X[i:i + self.batch], np.float32), device=self.device))
        finally:
            h.remove()
        return np.concatenate(out).astype(np.float64) if out else np.zeros((0, 1))


def fid(feat: Featurizer, A: np.ndarray, B: np.ndarray) -> float:
    return frechet_distance(feat(A), feat(B)) if len(A) >= 2 and len(B) >= 2 else float("nan")


# ---------------------------------------------------------------------------------------------------------- helpers
def _r(v: Any, d: int = 4) -> Any:
    if v is None:
        return None
    v = float(v)
    return None if not math.isfinite(v) else round(v, d)


def _predict(proba_fn: G.ProbaFn, X: np.ndarray, batch: int) -> np.ndarray:
    with torch.no_grad():
        return G.batched_proba(proba_fn, torch.as_tensor(np.asarray(X, np.float32)), batch).cpu().numpy()


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or a[ok].std() == 0 or b[ok].std() == 0:
        return float("nan")
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def _case_row(e: G.CaseEval) -> Dict[str, Any]:
    return {"method": METHOD_TITLES.get(e.method, e.method), "seeds": e.seeds, "test cases": e.n_cases,
            "AE prop.": round(e.ae_prop, 3), "pred. loss (AEs)": _r(e.pred_loss, 3),
            "log density of AEs": _r(e.log_density, 3), "FID": _r(e.fid, 3), "AEs": int(e.ae_mask.sum()),
            "SSIM to seed": _r(e.ssim, 3), "L-inf to seed": _r(e.linf, 4),
            "queries / seed": round(e.queries_per_seed, 1), "seconds / seed": round(e.seconds_per_seed, 4)}


# ------------------------------------------------------------------------------------------------------------- run
def run_hda(module: Optional[torch.nn.Module], proba_fn: G.ProbaFn, X_train: np.ndarray, y_train: np.ndarray,
            X_cand: np.ndarray, y_cand: np.ndarray, X_val: np.ndarray, y_val: np.ndarray, X_test: np.ndarray,
            y_test: np.ndarray, classes: Sequence[str], p: HdaParams, *, radius: float, clip: Tuple[float, float],
            adv_module: Optional[torch.nn.Module] = None, adv_label: str = "", device: Any = "cpu",
            cand_names: Optional[Sequence[str]] = None, progress: Optional[Progress] = None) -> Tuple[StageResult, Any, Optional[Dict[str, Any]]]:
    """Everything of one target; returns (the report section, the findings, the repaired model or None).

    ``module`` is the audited torch module (None for a black-box model: the gradient indicator, PGD, coverage,
    Table 8 and fine-tuning need it and are skipped); ``proba_fn`` maps a batch of inputs to probabilities;
    ``cand_names`` names each candidate input for the findings (default "candidate <i>").
    """
    t_all = time.perf_counter()
    white = module is not None
    bs = int(p.batch_size)
    n_classes = len(classes)
    seconds: Dict[str, float] = {}
    rng = np.random.default_rng(int(p.seed))

    def tick(name: str, t0: float) -> None:
        seconds[name] = round(time.perf_counter() - t0, 2)

    # ---- RQ1 stage 1: the global distribution -------------------------------------------------------------------
    t0 = time.perf_counter()
    v = p.vae
    dens = train_density(X_train, clip=clip, latent_dim=v.latent_dim, hidden=v.hidden, epochs=v.epochs,
                         max_steps=v.max_steps, lr=v.lr, batch_size=v.batch_size, beta=v.beta, seed=p.seed,
                         device=device, progress=progress)
    tick("VAE and KDE", t0)
    feat = Featurizer(module, dens, device=device)
    t0 = time.perf_counter()
    table3 = latent_quality(dens, X_train, y_train, X_test, n_classes, seed=p.seed)
    n_fid = int(min(p.fid_samples, len(X_train)))
    ref = X_train[rng.choice(len(X_train), n_fid, replace=False)]
    z_kde, z_uni = dens.sample(n_fid, p.seed), dens.sample_uniform(n_fid, p.seed)
    img_kde, img_uni = dens.decode(z_kde), dens.decode(z_uni)
    fid3 = {"kde": fid(feat, ref, img_kde), "uniform": fid(feat, ref, img_uni)}
    tick("Table 3 and Fig. 3", t0)

    # ---- candidates, densities, indicators ---------------------------------------------------------------------
    P_cand = _predict(proba_fn, X_cand, bs)
    ok = np.where(P_cand.argmax(1) == y_cand)[0][:int(p.pool)]
    Xc, yc = X_cand[ok], y_cand[ok]
    names = [str(cand_names[i]) if cand_names is not None else f"candidate {i}" for i in ok]
    ld = dens.log_density(Xc)
    P_train = _predict(proba_fn, X_train, bs)
    t0 = time.perf_counter()
    sep = G.separation_indicator(P_cand[ok], yc, P_train, y_train)
    grad = G.gradient_indicator(module, Xc, yc, device=device) if white else None
    use = "gradient" if (p.indicator == "gradient" or (p.indicator == "auto" and white)) else "separation"
    if use == "gradient" and not white:
        use = "separation"  # a black-box model has no gradient; the report says which ran
    fragility = grad if use == "gradient" else -sep
    tick("indicators", t0)

    # ---- RQ1 stage 2: indicators against the estimated local robustness (Table 4) ----------------------------
    from weakspot.hda.robustness import amls_log_prob, misclassification_score

    rb = p.robustness
    n_balls = min(int(rb.n_balls), len(Xc))
    balls = rng.choice(len(Xc), n_balls, replace=False)
    k = min(int(p.n_seeds), len(Xc))
    sel = G.select_seeds(ld, fragility, k, normalise=p.normalise)
    rnd = balls[:k]
    est_idx = np.unique(np.concatenate([balls, sel]))
    t0 = time.perf_counter()
    yt_est = torch.as_tensor(yc[est_idx], dtype=torch.int64)
    score = misclassification_score(module, yt_est, from_logits=True) if white else \
        misclassification_score(proba_fn, yt_est, from_logits=False)
    est = amls_log_prob(score, torch.as_tensor(Xc[est_idx]), radius, clip=clip, particles=rb.particles, rho=rb.rho,
                        mh_steps=rb.mh_steps, log_p_min=rb.log_p_min, max_levels=rb.max_levels, seed=p.seed,
                        progress=progress)
    tick("local robustness (AMLS)", t0)
    log10p = np.full(len(Xc), np.nan)
    log10p[est_idx] = est.log10_p
    pear = {"gradient": _pearson(log10p[balls], np.log10(grad[balls] + 1e-30)) if white else None,
            "separation": _pearson(log10p[balls], np.log10(sep[balls] + 1e-30))}
    floor_share = float(np.mean(est.terminated[np.searchsorted(est_idx, balls)]))

    # ---- Table 5 ---------------------------------------------------------------------------------------------
    table5 = {name: {"log_density": float(ld[ids].mean()), "log10_local_robustness": float(log10p[ids].mean()),
                     "indicator": float(np.log10(np.abs(fragility[ids]) + 1e-30).mean())}
              for name, ids in (("random", rnd), ("selected", sel))}

    # ---- Table 6 / 7: every generator on both seed sets --------------------------------------------------------
    ga = p.ga
    ga_kw = dict(clip=clip, population=ga.population, generations=ga.generations, metric=ga.metric, lam=ga.lam,
                 switch_at=ga.switch_at, crossover=ga.crossover, mutation_rate=ga.mutation_rate,
                 mutation_scale=ga.mutation_scale, elite=ga.elite, batch=bs * 4, device=device)
    cov = None
    if white:
        from weakspot.hda.coverage import NeuronCoverage

        ref_cov = X_train[rng.choice(len(X_train), min(1000, len(X_train)), replace=False)]
        cov = NeuronCoverage(module, torch.as_tensor(ref_cov, device=device), threshold=p.coverage.threshold)
    evals: Dict[Tuple[str, str], G.CaseEval] = {}
    results: Dict[Tuple[str, str], G.LocalResult] = {}
    alloc: Dict[str, np.ndarray] = {}
    for sname, ids in (("selected", sel), ("random", rnd)):
        n_i = G.allocate(ld[ids], int(p.cases_per_seed) * len(ids), ga.population)
        alloc[sname] = n_i
        Xs, ys = Xc[ids], yc[ids]
        gens: Dict[str, Any] = {"hda": lambda: G.two_step_ga(proba_fn, Xs, ys, n_i, radius, seed=p.seed,
                                                             progress=progress, **ga_kw),
                                "foda": lambda: G.foda_cases(dens, Xs, n_i, samples=p.foda.samples,
                                                             scale=p.foda.scale, seed=p.seed)}
        if white:
            gens["pgd"] = lambda: G.pgd_cases(module, Xs, ys, n_i, radius, clip=clip, steps=p.pgd_steps,
                                              seed=p.seed, batch=bs, device=device)
            gens["coverage"] = lambda: _coverage(module, cov, Xs, ys, n_i, radius, clip, p, progress)
        for mname, fn in gens.items():
            res = fn()
            results[(mname, sname)] = res
            evals[(mname, sname)] = _eval(res, sname, Xs, ys, proba_fn, dens, feat, clip, bs, device)
    if cov is not None:
        cov_rate = float(cov.rate)
        cov.close()
    else:
        cov_rate = None

    # ---- Table 8: FGSM, PGD, AutoAttack and HDA on the normal and the adversarially trained model -----------------
    table8_rows: List[Dict[str, Any]] = []
    t8: Dict[str, Dict[str, Any]] = {}
    if white:
        t0 = time.perf_counter()
        models = {"normal": module, **({"adversarial": adv_module} if adv_module is not None and p.adversarial_model
                                       else {})}
        for mlabel, mod in models.items():
            pf = proba_fn if mod is module else G.module_proba(mod)
            if mod is module:
                s_ids, Xs, ys = sel, Xc[sel], yc[sel]
                n_i = alloc["selected"]
            else:  # the adversarial model's own seeds: its correct candidates, its own gradient indicator
                okm = np.where(_predict(pf, Xc, bs).argmax(1) == yc)[0]
                if len(okm) < 2:
                    continue
                gm = G.gradient_indicator(mod, Xc[okm], yc[okm], device=device)
                s_ids = okm[G.select_seeds(ld[okm], gm, min(k, len(okm)), normalise=p.normalise)]
                Xs, ys = Xc[s_ids], yc[s_ids]
                n_i = G.allocate(ld[s_ids], int(p.cases_per_seed) * len(s_ids), ga.population)
            row_m: Dict[str, Any] = {}
            ones = np.ones(len(Xs), np.int64)
            for att in ("fgsm", "pgd", "autoattack", "hda"):
                if mod is module and att in ("pgd", "hda"):
                    e = evals[(att, "selected")]
                else:
                    res = _attack(att, mod, pf, Xs, ys, ones if att in ("fgsm", "autoattack") else n_i, radius,
                                  clip, p, ga_kw, n_classes, bs, device, progress)
                    e = _eval(res, "selected", Xs, ys, pf, dens, feat, clip, bs, device)
                row_m[att] = e
                table8_rows.append({"model": mlabel, "method": METHOD_TITLES[att],
                                    "log density of seeds": round(float(ld[s_ids].mean()), 3),
                                    "AE prop.": round(e.ae_prop, 3), "FID": _r(e.fid, 3), "AEs": int(e.ae_mask.sum()),
                                    "SSIM to seed": _r(e.ssim, 3)})
            t8[mlabel] = row_m
        tick("Table 8", t0)

    # ---- Table 9: adversarial fine-tuning -------------------------------------------------------------------------
    ft_rows: List[Dict[str, Any]] = []
    ft_metrics: Dict[str, Dict[str, Any]] = {}
    repaired = None
    ft = p.finetune
    if white and ft.enabled and ft.methods:
        t0 = time.perf_counter()
        ft_rows, ft_metrics, repaired = _finetune_all(module, proba_fn, dens, X_train, y_train, X_val, y_val, X_test,
                                                      y_test, p, radius, clip, ga_kw, bs, device, progress, rng)
        tick("Table 9 (fine-tuning)", t0)
    seconds["total"] = round(time.perf_counter() - t_all, 2)

    # ---- metrics, tables, figures, findings --------------------------------------------------------------------
    metrics = _metrics(evals, pear, ft_metrics, table5, fid3, table3, t8, use, radius, k, floor_share)
    found = _findings(evals, results, Xc, yc, sel, ld, classes, proba_fn, p, radius, names)
    result = _result(metrics, evals, results, table3, fid3, pear, table5, table8_rows, ft_rows, seconds, p, radius,
                     clip, dens, Xc, yc, ld, sel, rnd, balls, log10p, grad, sep, use, img_kde, img_uni, classes,
                     cov_rate, floor_share, est, feat.name, adv_label, proba_fn, len(ok), white)
    if repaired is not None:
        repaired["seconds"] = seconds
    return result, found, repaired


def _coverage(module, cov, Xs, ys, n_i, radius, clip, p, progress) -> G.LocalResult:
    from weakspot.hda.coverage import coverage_fuzz

    r = coverage_fuzz(module, torch.as_tensor(Xs), ys, n_i, radius, clip=clip, coverage=cov,
                      iterations=p.coverage.iterations, mutants=p.coverage.mutants, seed=p.seed, progress=progress)
    return G.LocalResult("coverage", r.X_cases, r.seed_index, r.queries, r.seconds,
                         {"coverage_rate": r.coverage_rate, "curve": r.coverage_curve})


def _eval(res, sname, Xs, ys, proba_fn, dens, feat, clip, bs, device) -> G.CaseEval:
    return G.evaluate_cases(res, sname, Xs, ys, proba_fn, dens, clip=clip, batch=bs, device=device, featurize=feat)


def _attack(att, mod, pf, Xs, ys, n_i, radius, clip, p, ga_kw, n_classes, bs, device, progress) -> G.LocalResult:
    from weakspot.adversarial.attacks import batched, fgsm

    t0 = time.perf_counter()
    idx = np.repeat(np.arange(len(Xs)), n_i)
    if att == "fgsm":
        X = batched(fgsm, mod, Xs[idx], ys[idx], batch_size=bs, device=device, eps=float(radius), clip=tuple(clip))
        return G.LocalResult("fgsm", X, idx, len(idx), time.perf_counter() - t0)
    if att == "autoattack":
        from weakspot.adversarial.art_attacks import art_autoattack

        X = art_autoattack(mod, Xs[idx], ys[idx], eps=float(radius), clip=tuple(clip), n_classes=n_classes,
                           iters=p.autoattack_iters, seed=p.seed, batch_size=bs, device=device)
        return G.LocalResult("autoattack", X, idx, 0, time.perf_counter() - t0)
    if att == "pgd":
        return G.pgd_cases(mod, Xs, ys, n_i, radius, clip=clip, steps=p.pgd_steps, seed=p.seed, batch=bs,
                           device=device)
    return G.two_step_ga(pf, Xs, ys, n_i, radius, seed=p.seed, progress=progress, **ga_kw)


def _finetune_all(module, proba_fn, dens, X_train, y_train, X_val, y_val, X_test, y_test, p, radius, clip, ga_kw, bs,
                  device, progress, rng):
    """Table 9: a validation pool drawn by density, seeds for each method's fine-tuning cases, validation AEs."""
    from weakspot.hda.finetune import finetune

    ft = p.finetune
    Pv = _predict(proba_fn, X_val, bs)
    okv = np.where(Pv.argmax(1) == y_val)[0]
    ldv = dens.log_density(X_val[okv])
    w = np.exp(ldv - ldv.max())
    n_pool = min(int(ft.pool), len(okv))
    pool = okv[rng.choice(len(okv), n_pool, replace=False, p=w / w.sum())] if n_pool else okv
    Xv, yv = X_val[pool], y_val[pool]
    ldp = dens.log_density(Xv)
    k = min(int(ft.seeds), len(Xv))
    grad = G.gradient_indicator(module, Xv, yv, device=device)
    seeds = {"hda": G.select_seeds(ldp, grad, k, normalise=p.normalise),
             "pgd": rng.choice(len(Xv), k, replace=False), "coverage": rng.choice(len(Xv), k, replace=False)}
    # validation AEs: the GA with another random seed around the whole pool (kept where the model errs), and PGD's
    n_val = np.full(len(Xv), int(ft.cases_per_seed), np.int64)
    vres = G.two_step_ga(proba_fn, Xv, yv, n_val, radius, seed=p.seed + 1, progress=progress, **ga_kw)
    Pr = _predict(proba_fn, vres.X_cases, bs)
    vy = yv[vres.seed_index]
    keep = Pr.argmax(1) != vy
    val_hda = (vres.X_cases[keep], vy[keep])
    pres = G.pgd_cases(module, Xv, yv, np.ones(len(Xv), np.int64), radius, clip=clip, steps=p.pgd_steps,
                       seed=p.seed + 1, batch=bs, device=device)
    keep = _predict(proba_fn, pres.X_cases, bs).argmax(1) != yv[pres.seed_index]
    val_pgd = (pres.X_cases[keep], yv[pres.seed_index][keep])
    sub = rng.choice(len(X_train), min(int(ft.train), len(X_train)), replace=False)
    tr_eval = rng.choice(len(X_train), min(2000, len(X_train)), replace=False)

    def acc(mod, X, y) -> Optional[float]:
        if len(X) == 0:
            return None
        return float((_predict(G.module_proba(mod), X, bs).argmax(1) == y).mean())

    rows, met = [], {}
    base = {"train_acc": acc(module, X_train[tr_eval], y_train[tr_eval]), "test_acc": acc(module, X_test, y_test),
            "global_robustness": acc(module, *val_hda), "pgd_robustness": acc(module, *val_pgd)}
    rows.append({"fine-tuned with": "nothing (the audited model)", "test cases": 0, **_ft_cols(base)})
    repaired = None
    for mname in ft.methods:
        ids = seeds[mname]
        n_i = np.full(len(ids), int(ft.cases_per_seed), np.int64)
        if mname == "hda":
            n_i = G.allocate(ldp[ids], int(ft.cases_per_seed) * len(ids), p.ga.population)
            res = G.two_step_ga(proba_fn, Xv[ids], yv[ids], n_i, radius, seed=p.seed, progress=progress, **ga_kw)
        elif mname == "pgd":
            res = G.pgd_cases(module, Xv[ids], yv[ids], n_i, radius, clip=clip, steps=p.pgd_steps, seed=p.seed,
                              batch=bs, device=device)
        else:
            from weakspot.hda.coverage import NeuronCoverage

            with NeuronCoverage(module, torch.as_tensor(X_train[sub[:1000]], device=device),
                                threshold=p.coverage.threshold) as cov:
                res = _coverage(module, cov, Xv[ids], yv[ids], n_i, radius, clip, p, progress)
        ycase = yv[ids][res.seed_index]
        X_ft = np.concatenate([X_train[sub], res.X_cases]).astype(np.float32)
        y_ft = np.concatenate([y_train[sub], ycase])
        out = finetune(module, X_ft, y_ft, epochs=ft.epochs, lr=ft.lr, batch_size=ft.batch_size, seed=p.seed,
                       device=device, progress=progress)
        m = out["module"]
        r = {"train_acc": acc(m, X_train[tr_eval], y_train[tr_eval]), "test_acc": acc(m, X_test, y_test),
             "global_robustness": acc(m, *val_hda), "pgd_robustness": acc(m, *val_pgd)}
        met[mname] = {kk: _r(vv) for kk, vv in r.items()}
        met[mname]["test_cases"] = int(len(res.X_cases))
        rows.append({"fine-tuned with": METHOD_TITLES[mname], "test cases": int(len(res.X_cases)), **_ft_cols(r)})
        if mname == "hda":
            repaired = {"state_dict": {kk: vv.detach().cpu() for kk, vv in m.state_dict().items()},
                        "before": {kk: _r(vv) for kk, vv in base.items()}, "after": met[mname],
                        "settings": {"seeds": int(len(ids)), "test_cases": int(len(res.X_cases)),
                                     "train_inputs": int(len(sub)), "epochs": int(ft.epochs), "lr": float(ft.lr),
                                     "schedule": "slow start, fast decay (Jeddi et al. 2021)",
                                     "validation_pool": int(len(Xv)), "validation_aes_hda": int(len(val_hda[0])),
                                     "validation_aes_pgd": int(len(val_pgd[0]))}}
    met["none"] = {kk: _r(vv) for kk, vv in base.items()}
    met["validation"] = {"pool": int(len(Xv)), "hda_aes": int(len(val_hda[0])), "pgd_aes": int(len(val_pgd[0]))}
    return rows, met, repaired


def _ft_cols(r: Dict[str, Any]) -> Dict[str, Any]:
    f = lambda v: "" if v is None else f"{v:.1%}"  # noqa: E731
    return {"train acc.": f(r["train_acc"]), "test acc.": f(r["test_acc"]),
            "global robustness (HDA validation AEs)": f(r["global_robustness"]),
            "accuracy on PGD validation AEs": f(r["pgd_robustness"])}


# ---------------------------------------------------------------------------------------------------------- metrics
def _metrics(evals, pear, ft_metrics, table5, fid3, table3, t8, use, radius, k, floor_share) -> Dict[str, Any]:
    m: Dict[str, Any] = {"radius": _r(radius, 6), "n_seeds": int(k), "indicator": use}
    for (mname, sname), e in evals.items():
        entry = {"ae_prop": _r(e.ae_prop), "pred_loss": _r(e.pred_loss), "fid": _r(e.fid),
                 "log_density": _r(e.log_density), "queries_per_seed": _r(e.queries_per_seed, 1),
                 "test_cases": int(e.n_cases)}
        if sname == "selected":
            m[mname] = entry
        else:
            m.setdefault("random_seeds", {})[mname] = entry
    m["indicator_pearson"] = {kk: _r(vv) for kk, vv in pear.items()}
    m["robustness_floor_share"] = _r(floor_share)
    m["seeds"] = {kk: {a: _r(b) for a, b in vv.items()} for kk, vv in table5.items()}
    m["fid_kde_samples"] = {kk: _r(vv) for kk, vv in fid3.items()}
    m["latent"] = {r["compression"]: {"vs": r["VS"], "sse": r["reconstruction SSE"]}
                   for r in table3.to_dict("records")}
    m["adversarial_model"] = {ml: {a: {"ae_prop": _r(e.ae_prop), "fid": _r(e.fid)} for a, e in row.items()}
                              for ml, row in t8.items()}
    if ft_metrics:
        m["finetune"] = ft_metrics
    # headline numbers for cards and history
    m["hda_ae_prop"] = m["hda"]["ae_prop"]
    m["hda_fid"] = m["hda"]["fid"]
    if "pgd" in m:
        m["pgd_ae_prop"] = m["pgd"]["ae_prop"]
        m["pgd_fid"] = m["pgd"]["fid"]
    m["claims"] = _claims(evals, table5, ft_metrics)
    lat = m["latent"]
    m["claims_rq1"] = {  # RQ1's three answers (Tables 3-4, Fig. 3), checked the same way
        "vae_clusters_better_than_pca": bool(lat["VAE encoder"]["vs"] > lat["PCA"]["vs"]),
        "kde_samples_lower_fid_than_uniform": bool(fid3["kde"] < fid3["uniform"]),
        "indicators_correlate_as_expected": bool((pear["gradient"] is None or pear["gradient"] > 0)
                                                 and (pear["separation"] or 0.0) < 0),
    }
    return m


def _claims(evals, table5, ft) -> Dict[str, Any]:
    """The paper's claims of the issue, each True/False (None where it could not be checked)."""
    out: Dict[str, Any] = {}
    h = evals.get(("hda", "selected"))
    others = [evals[(b, "selected")] for b in ("pgd", "coverage") if (b, "selected") in evals]
    if h is not None and others:
        out["hda_higher_ae_prop"] = bool(all(h.ae_prop > o.ae_prop for o in others))
        out["hda_lower_fid"] = bool(all(np.isfinite(h.fid) and (not np.isfinite(o.fid) or h.fid < o.fid)
                                        for o in others))
    s, r = table5["selected"], table5["random"]
    out["seeds_denser"] = bool(s["log_density"] > r["log_density"])
    out["seeds_less_robust"] = bool(s["log10_local_robustness"] > r["log10_local_robustness"])
    if ft and "hda" in ft and all(b in ft for b in ("pgd", "coverage")):
        def gain(mn: str) -> float:
            return (ft[mn]["global_robustness"] or 0.0) - (ft["none"]["global_robustness"] or 0.0)

        def drop(mn: str) -> float:
            return (ft["none"]["test_acc"] or 0.0) - (ft[mn]["test_acc"] or 0.0)

        out["finetune_most_robustness"] = bool(gain("hda") >= max(gain("pgd"), gain("coverage")))
        out["finetune_least_accuracy_drop"] = bool(drop("hda") <= min(drop("pgd"), drop("coverage")))
    return out


# --------------------------------------------------------------------------------------------------------- findings
def _findings(evals, results, Xc, yc, sel, ld, classes, proba_fn, p, radius, names) -> Any:
    """Per selected seed with at least one AE among HDA's test cases: the most natural AE (highest SSIM) as the image,
    the prediction before and after, the density; ranked by the share of AEs and their naturalness."""
    import pandas as pd

    from weakspot.findings import to_png

    e, res = evals[("hda", "selected")], results[("hda", "selected")]
    X = Xc[sel]
    y = yc[sel]
    ss = e.ssim_cases
    P_seed = _predict(proba_fn, X, p.batch_size)
    rows = []
    for i in range(len(X)):
        mine = np.where(res.seed_index == i)[0]
        ae = mine[e.ae_mask[mine]]
        if not len(ae):
            continue
        best = ae[np.argmax(ss[ae])]
        share = len(ae) / len(mine)
        pred = int(e.pred[best])
        rows.append({"weak_spot": f"{names[sel[i]]} (true {classes[y[i]]}): {len(ae)} of {len(mine)} test cases "
                                  f"within L-inf {radius:.3g} are read as {classes[pred]} (SSIM {ss[best]:.3f})",
                     "kind": "input", "severity": float(share + float(ss[ae].mean())) / 2.0,
                     "severity_meaning": SEVERITY, "label": classes[y[i]], "prediction": classes[pred],
                     "confidence": float(e.conf[best]),
                     "example": json.dumps({"seed": names[sel[i]], "prediction_before": classes[int(P_seed[i].argmax())],
                                            "confidence_before": round(float(P_seed[i].max()), 4),
                                            "log_density": round(float(ld[sel[i]]), 4),
                                            "pred_loss": round(float(e.J[best]), 4), "ssim": round(float(ss[best]), 4)}),
                     "image": to_png(res.X_cases[best], scale=4 if X.shape[-1] <= 16 else 2)})
    from weakspot.findings import REQUIRED

    df = pd.DataFrame(rows, columns=list(REQUIRED) + ["example", "image"])  # no AE anywhere: no findings, same shape
    if len(df):
        df = df.sort_values("severity", ascending=False, kind="stable").head(int(p.max_findings)).reset_index(drop=True)
    return df


# ----------------------------------------------------------------------------------------------------------- report
def _result(m, evals, results, table3, fid3, pear, table5, table8_rows, ft_rows, seconds, p, radius, clip, dens, Xc,
            yc, ld, sel, rnd, balls, log10p, grad, sep, use, img_kde, img_uni, classes, cov_rate, floor_share, est,
            feat_name, adv_label, proba_fn, n_cand, white) -> StageResult:
    import pandas as pd

    t6 = pd.DataFrame([_case_row(e) for e in evals.values()])
    t3 = table3.copy()
    t3_fid = pd.DataFrame([{"samples": f"{p.fid_samples} decoded from the KDE", "FID to the training data": _r(fid3["kde"], 3)},
                           {"samples": f"{p.fid_samples} decoded from a uniform latent box",
                            "FID to the training data": _r(fid3["uniform"], 3)}])
    t4 = pd.DataFrame([{"indicator": "gradient (white-box): L1 norm of the input gradient", "Pearson r":
                        _r(pear["gradient"], 3), "expected sign": "+", "paper |r| (MNIST / CIFAR-10)": "0.672 / 0.832"},
                       {"indicator": "separation (black-box): distance to the nearest other-label output",
                        "Pearson r": _r(pear["separation"], 3), "expected sign": "-",
                        "paper |r| (MNIST / CIFAR-10)": "0.379 / 0.646"}])
    t5 = pd.DataFrame([{"seeds": n, "mean relative log density": round(v["log_density"], 3),
                        "mean log10 P(misclassified in the ball)": round(v["log10_local_robustness"], 3),
                        f"mean log10 {use} indicator": round(v["indicator"], 3)} for n, v in table5.items()])
    t8 = pd.DataFrame(table8_rows)
    t9 = pd.DataFrame(ft_rows)
    claims = m["claims"]
    ctab = pd.DataFrame([
        {"claim (seeds/004)": "HDA's AEs: a higher AE proportion than PGD's and coverage's",
         "holds": claims.get("hda_higher_ae_prop"),
         "numbers": _cmp(evals, "ae_prop")},
        {"claim (seeds/004)": "HDA's AEs: a lower FID than PGD's and coverage's", "holds": claims.get("hda_lower_fid"),
         "numbers": _cmp(evals, "fid")},
        {"claim (seeds/004)": "HDA's seeds are denser than random ones", "holds": claims.get("seeds_denser"),
         "numbers": f"log density {table5['selected']['log_density']:.2f} vs {table5['random']['log_density']:.2f}"},
        {"claim (seeds/004)": "HDA's seeds are less robust than random ones", "holds": claims.get("seeds_less_robust"),
         "numbers": f"log10 P(misclassified) {table5['selected']['log10_local_robustness']:.2f} vs "
                    f"{table5['random']['log10_local_robustness']:.2f}"},
        {"claim (seeds/004)": "HDA fine-tuning gains the most global robustness",
         "holds": claims.get("finetune_most_robustness"), "numbers": _ftcmp(m, "global_robustness")},
        {"claim (seeds/004)": "... for the least test accuracy", "holds": claims.get("finetune_least_accuracy_drop"),
         "numbers": _ftcmp(m, "test_acc")},
        {"claim (seeds/004)": "RQ1: the VAE encoder clusters the classes better than PCA (Table 3)",
         "holds": m["claims_rq1"]["vae_clusters_better_than_pca"],
         "numbers": f"V-measure {m['latent']['VAE encoder']['vs']:.3f} vs {m['latent']['PCA']['vs']:.3f}"},
        {"claim (seeds/004)": "RQ1: samples of the KDE have a lower FID than uniform latent samples (Fig. 3)",
         "holds": m["claims_rq1"]["kde_samples_lower_fid_than_uniform"],
         "numbers": f"FID {fid3['kde']:.3g} vs {fid3['uniform']:.3g}"},
        {"claim (seeds/004)": "RQ1: gradient indicator correlates +, separation - with misclassification (Table 4)",
         "holds": m["claims_rq1"]["indicators_correlate_as_expected"],
         "numbers": ", ".join(f"{k} r {v:+.2f}" for k, v in pear.items() if v is not None and np.isfinite(v))},
    ])
    ctab["holds"] = ctab["holds"].map(lambda v: "not checked" if v is None else ("yes" if v else "no"))
    settings = _settings(p, radius, n_cand)
    tsec = pd.DataFrame([{"step": kk, "seconds": vv} for kk, vv in seconds.items()])
    tables = {"table6": t6, "table3": t3, "fig3_fid": t3_fid, "table4": t4, "table5": t5, "claims": ctab,
              "settings": settings, "seconds": tsec}
    if len(t8):
        tables["table8"] = t8
    if len(t9):
        tables["table9"] = t9
    figures = {"landscape": _fig_landscape(dens, Xc, ld, sel, rnd),
               "aes": _fig_aes(evals, results, Xc, yc, sel, ld, classes, proba_fn, p),
               "ga_curve": _fig_curve(results[("hda", "selected")].extra.get("curve", [])),
               "indicators": _fig_indicators(log10p[balls], grad[balls] if grad is not None else None, sep[balls]),
               "samples": _fig_samples(img_kde[:8], img_uni[:8])}
    h, pg = evals[("hda", "selected")], evals.get(("pgd", "selected"))
    fl = "" if floor_share == 0 else (f" ({floor_share:.0%} of the balls are below the estimator's floor "
                                      f"log P = {p.robustness.log_p_min:g} and sit there)")
    summary = [
        "Hierarchical distribution-aware testing (Huang et al., seeds/004) looks for adversarial examples (AEs) where "
        "they matter and where a person would not notice them: it picks test seeds where the data are dense (a KDE "
        "over a VAE's codes of the training data) and the model is fragile (a local-robustness indicator), then a "
        "black-box two-step genetic algorithm searches each seed's L-inf ball of radius "
        f"{radius:.4g} for AEs, first for any AE, then for AEs that stay perceptually close to the seed "
        f"({p.ga.metric.upper()}, lambda {p.ga.lam:g}).",
        f"On {len(sel)} selected seeds, {h.n_cases} test cases: HDA's AE proportion {h.ae_prop:.0%}, FID {h.fid:.3g}, "
        f"SSIM to the seed {h.ssim:.3f}"
        + (f"; PGD-{p.pgd_steps}'s {pg.ae_prop:.0%}, FID {pg.fid:.3g}, SSIM {pg.ssim:.3f}" if pg is not None else "")
        + (f"; coverage-guided fuzzing's {evals[('coverage', 'selected')].ae_prop:.0%} (neuron coverage "
           f"{cov_rate:.0%})" if ("coverage", "selected") in evals else "")
        + f". Seed selection used the {use} indicator; the selected seeds' mean relative log density is "
        f"{table5['selected']['log_density']:.2f} against random seeds' {table5['random']['log_density']:.2f}, "
        f"and their estimated log10 probability of misclassification in the ball "
        f"{table5['selected']['log10_local_robustness']:.2f} against {table5['random']['log10_local_robustness']:.2f}"
        f"{fl}.",
        "The paper's claims, checked: " + "; ".join(f"{r['claim (seeds/004)']}: {r['holds']}"
                                                    for r in ctab.to_dict("records")) + ".",
        f"Caveats: FID is on {feat_name} (no Inception weights here), comparable across methods of this target "
        "only, and it falls with the number of AEs compared (see the AE counts). The local robustness is Webb et al.'s "
        f"adaptive multilevel splitting with {p.robustness.particles} particles and {p.robustness.mh_steps} "
        "Metropolis-Hastings steps per level; their estimates of tiny probabilities are noisy. Global robustness after "
        "fine-tuning is measured on AEs found by HDA's own GA, as in the paper, which favours HDA's fine-tuning; the "
        "accuracy on PGD's AEs is given beside it. Settings that differ from the paper's: "
        + "; ".join(f"{r['setting']} {r['ran']} (paper: {r['paper']})" for r in settings.to_dict("records")
                    if r["differs"]) + ".",
    ]
    items = [
        {"figure": "aes", "caption": "The most natural AEs HDA found (highest SSIM to their seed), grouped by class: "
         "each seed (top: true class, the model's prediction, the seed's relative log density) and its AE (bottom: "
         "the prediction and its confidence, SSIM to the seed)."},
        {"table": "claims", "caption": "The paper's claims, checked on this target."},
        {"table": "table6", "caption": f"Tables 6-7: every generator on the same seeds ({len(sel)} selected by HDA, "
         f"{len(rnd)} random), the same number of test cases per seed; AE prop. is the share of test cases that are "
         "AEs, pred. loss p(best other class) - p(true class) over the AEs (Definition 3; > 0 is an AE), FID against the "
         "seeds."},
        {"figure": "landscape", "caption": "The global distribution: the training codes' first two principal "
         "components coloured by log KDE density, HDA's seeds (red) and random seeds (white)."},
        {"table": "table5", "caption": "Table 5: HDA's seeds against random seeds (relative log density: 0 = the "
         "median training input; higher log10 P = less robust)."},
        {"table": "table4", "caption": f"Table 4: Pearson correlation between log10 of the estimated probability of "
         f"misclassification in {len(balls)} random balls and the log of each indicator."},
        {"figure": "indicators", "caption": "Fig. 4: the estimated local robustness against each indicator."},
        {"table": "table3", "caption": "Table 3: VAE encoder against PCA (K-means completeness, homogeneity, "
         "V-measure against the labels; reconstruction error of held-out test inputs)."},
        {"table": "fig3_fid", "caption": "Fig. 3: FID of decoded samples from the KDE and from a uniform latent box."},
        {"figure": "samples", "caption": "Fig. 3: decoded samples from the KDE (top) and from a uniform latent box "
         "(bottom)."},
        {"figure": "ga_curve", "caption": "Fig. 5: the two-step GA on the selected seeds: AE proportion, the share "
         "of seeds in the second step, and the best individual's prediction loss and perceptual term."},
        *([{"table": "table8", "caption": f"Table 8: AEs of FGSM, PGD-{p.pgd_steps}, AutoAttack (APGD-CE + APGD-DLR, "
            f"{p.autoattack_iters} iterations, IBM ART) and HDA on the audited model and on "
            f"{adv_label or 'the adversarially trained model'}; each model's own seeds."}] if len(t8) else []),
        *([{"table": "table9", "caption": "Table 9: adversarial fine-tuning with each method's test cases; the HDA "
            "fine-tuned model is saved as the repaired model."}] if len(t9) else []),
        {"table": "settings", "caption": "What ran against the paper's settings."},
        {"table": "seconds", "caption": "Time per step of this stage (seconds, this machine)."},
    ]
    head = f"HDA: {h.ae_prop:.0%} of {h.n_cases} test cases around {len(sel)} dense, fragile seeds are AEs at L-inf " \
           f"{radius:.3g} (SSIM {h.ssim:.3f} to the seed)"
    if pg is not None:
        head += f"; PGD-{p.pgd_steps}: {pg.ae_prop:.0%} (SSIM {pg.ssim:.3f})"
    if "finetune" in m and "hda" in m["finetune"]:
        f = m["finetune"]
        head += (f"; HDA fine-tuning: robustness on natural AEs {f['none']['global_robustness'] or 0:.0%} -> "
                 f"{f['hda']['global_robustness'] or 0:.0%}, test accuracy {f['none']['test_acc']:.1%} -> "
                 f"{f['hda']['test_acc']:.1%}")
    keys = ["hda_ae_prop", "hda_fid"] + (["pgd_ae_prop", "pgd_fid"] if "pgd_ae_prop" in m else [])
    return StageResult(metrics=m, tables=tables, figures=figures,
                       title="Hierarchical distribution-aware testing: natural AEs near dense, fragile seeds",
                       summary=summary, items=items, headline=[head + "."], key_metrics=keys)


def _cmp(evals, key: str) -> str:
    parts = []
    for mn in ("hda", "pgd", "coverage"):
        e = evals.get((mn, "selected"))
        if e is not None:
            v = getattr(e, key)
            parts.append(f"{mn} {v:.3g}" if np.isfinite(v) else f"{mn} n/a")
    return ", ".join(parts)


def _ftcmp(m, key: str) -> str:
    f = m.get("finetune")
    if not f:
        return "not run"
    return ", ".join(f"{mn} {f[mn][key]:.1%}" for mn in ("none", "hda", "pgd", "coverage")
                     if mn in f and f[mn].get(key) is not None)


def _settings(p: HdaParams, radius: float, n_cand: int) -> Any:
    import pandas as pd

    ran = {"n_seeds": p.n_seeds, "robustness.n_balls": p.robustness.n_balls, "fid_samples": p.fid_samples,
           "ga.generations": p.ga.generations, "finetune.epochs": p.finetune.epochs,
           "finetune.seeds": p.finetune.seeds,
           "finetune.train": f"{p.finetune.train} random training inputs"}
    rows = [{"setting": k, "ran": ran[k], "paper": v[0], "where": v[1], "differs": str(ran[k]) != str(v[0])}
            for k, v in PAPER_SETTINGS.items()]
    rows += [{"setting": "radius", "ran": round(radius, 4), "paper": "0.1 (MNIST), 0.03 (CIFAR-10)",
              "where": "Table 1", "differs": False},
             {"setting": "GA population x generations", "ran": f"{p.ga.population} x {p.ga.generations}",
              "paper": "not given", "where": "Algorithm 1", "differs": False},
             {"setting": "candidate seeds", "ran": f"{n_cand} correctly classified", "paper": "the test set",
              "where": "Sec. 3.3", "differs": False}]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------- figures
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _img(x: np.ndarray) -> np.ndarray:
    from weakspot.plotting import display_array

    return display_array(x)


def _fig_landscape(dens: Density, Xc, ld, sel, rnd) -> Any:
    plt = _plt()
    mu = dens.mu.cpu().numpy()
    c = mu - mu.mean(0)
    _, _, vt = np.linalg.svd(c[:5000], full_matrices=False)
    pc = vt[:2]
    tr = c @ pc.T
    grid = 60
    lo, hi = np.percentile(tr, 1, 0), np.percentile(tr, 99, 0)
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], grid), np.linspace(lo[1], hi[1], grid))
    Z = mu.mean(0) + np.stack([gx.ravel(), gy.ravel()], 1) @ pc
    dz = dens.log_kde(Z.astype(np.float32)).reshape(grid, grid) - dens.log_density_ref
    cand = (dens.encode(Xc)[0] - mu.mean(0)) @ pc.T
    fig, ax = plt.subplots(figsize=(6.0, 4.6))
    cs = ax.contourf(gx, gy, np.maximum(dz, np.percentile(dz, 5)), levels=20, cmap="viridis")
    fig.colorbar(cs, ax=ax, label="log density (relative)")
    ax.scatter(cand[rnd, 0], cand[rnd, 1], s=22, facecolors="none", edgecolors="white", label="random seeds")
    ax.scatter(cand[sel, 0], cand[sel, 1], s=26, c="red", marker="*", label="HDA seeds")
    ax.set_xlabel("latent PC 1")
    ax.set_ylabel("latent PC 2")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def _fig_aes(evals, results, Xc, yc, sel, ld, classes, proba_fn, p) -> Any:
    plt = _plt()
    e, res = evals[("hda", "selected")], results[("hda", "selected")]
    X, y = Xc[sel], yc[sel]
    ss = e.ssim_cases
    per_class = max(1, 12 // max(1, len(classes)))
    picks = []
    for c in range(len(classes)):
        cand = [j for j in np.where(e.ae_mask)[0] if y[res.seed_index[j]] == c]
        seen = set()
        for j in sorted(cand, key=lambda j: -ss[j]):
            if res.seed_index[j] not in seen:
                picks.append(j)
                seen.add(res.seed_index[j])
            if len(seen) >= per_class:
                break
    picks = picks[:12]
    n = max(1, len(picks))
    fig, axes = plt.subplots(2, n, figsize=(1.25 * n + 0.6, 3.6), squeeze=False)
    if not picks:
        for ax in axes.ravel():
            ax.axis("off")
        axes[0, 0].text(0, 0.5, "no AEs found", fontsize=9)
        return fig
    Ps = _predict(proba_fn, X[res.seed_index[picks]], p.batch_size)
    for c, j in enumerate(picks):
        i = res.seed_index[j]
        for r, (img, cap) in enumerate(((X[i], f"{classes[y[i]]}: {classes[int(Ps[c].argmax())]}\n"
                                                f"density {ld[sel[i]]:+.2f}"),
                                        (res.X_cases[j], f"-> {classes[int(e.pred[j])]} "
                                                         f"({e.conf[j]:.0%})\nSSIM {ss[j]:.3f}"))):
            ax = axes[r, c]
            im = _img(img)
            ax.imshow(im, cmap="gray" if im.ndim == 2 else None, vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(cap, fontsize=8, color="crimson" if r == 1 else "black")
    axes[0, 0].set_ylabel("seed", fontsize=8)
    axes[1, 0].set_ylabel("HDA AE", fontsize=8)
    fig.tight_layout()
    return fig


def _fig_curve(curve: List[Dict[str, float]]) -> Any:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    if curve:
        g = [c["generation"] for c in curve]
        ax.plot(g, [c["ae_prop"] for c in curve], label="AE proportion")
        ax.plot(g, [c["stage2"] for c in curve], label="seeds in step 2", ls="--")
        ax.set_ylim(-0.02, 1.02)
        ax2 = ax.twinx()
        ax2.plot(g, [c["best_J"] for c in curve], color="crimson", alpha=0.7, label="best prediction loss")
        ax2.set_ylabel("prediction loss of the best", color="crimson")
        ax3 = ax.twinx()
        ax3.spines["right"].set_position(("outward", 48))
        ax3.plot(g, [c["best_Q"] for c in curve], color="navy", alpha=0.6, ls=":", label="best perceptual term")
        ax3.set_ylabel("perceptual term of the best", color="navy")
    ax.set_xlabel("generation")
    ax.set_ylabel("share")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def _fig_indicators(log10p, grad, sep) -> Any:
    plt = _plt()
    n = 2 if grad is not None else 1
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False)
    pairs = ([("gradient indicator (log10)", grad)] if grad is not None else []) + \
        [("separation distance (log10)", sep)]
    for ax, (lab, v) in zip(axes[0], pairs):
        ax.scatter(np.log10(v + 1e-30), log10p, s=8, alpha=0.6)
        ax.set_xlabel(lab)
        ax.set_ylabel("log10 P(misclassified in the ball)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _fig_samples(kde: np.ndarray, uni: np.ndarray) -> Any:
    plt = _plt()
    n = max(1, len(kde))
    fig, axes = plt.subplots(2, n, figsize=(1.1 * n + 0.4, 2.5), squeeze=False)
    for r, imgs in enumerate((kde, uni)):
        for c in range(n):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c < len(imgs):
                im = _img(imgs[c])
                ax.imshow(im, cmap="gray" if im.ndim == 2 else None, vmin=0, vmax=1, interpolation="nearest")
    axes[0, 0].set_ylabel("KDE", fontsize=8)
    axes[1, 0].set_ylabel("uniform", fontsize=8)
    fig.tight_layout()
    return fig
