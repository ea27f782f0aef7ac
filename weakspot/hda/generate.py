"""Seed selection and local test-case generation of HDA (seeds/004 Secs. 3.3-3.4), and the baselines behind the same
local-generator protocol.

Caveats first:

* **Prediction loss** (Definition 3, stated on the model's probabilities; its formula is not legible in our copy) is
  taken as ``J(x') = p_best_other(x') - p_y(x')`` in [-1, 1]: positive exactly when ``x'`` is an adversarial example
  (AE) of the seed's label ``y``, as the paper's "J > 0 meaning the detection of an AE" requires; black-box. The
  GA's first fitness ranks by the log-probability margin instead (same sign, but not flat at -1 on the confident
  inputs where a saturated softmax leaves J no signal).
* **Perceptual term** of Eq. 8, one of three (``metric``): SSIM (pytorch-msssim, window 3 px on images under 22 px,
  7 px under 44 px, else 11), ``-MSE / radius^2`` (in [-1, 0]) or ``PSNR / 50``; each within about one unit, like J.
* **The GA** (Algorithm 1): a population of perturbations inside the L-inf ball (and the data's range), initialised
  with uniform noise in the ball; fitness 1 is J, fitness 2 is J + lambda * Q, used while at least ``switch_at`` of
  the seed's population is adversarial (and dropped again when it is not); elitism, fitness-proportional selection
  with a temperature equal to the population's fitness spread, uniform crossover weighted by the parents' fitness
  (GenAttack, Alzantot et al. 2019) and per-pixel mutation that either adds uniform noise of
  ``mutation_scale * radius`` or shrinks it by a uniform factor in [0, 1) (ours: the shrinking lets the population
  reduce its perturbation, which a natural AE needs). The whole population of every seed is evaluated as one batch
  per generation.
* **Test cases**: a seed's ``n_i`` best individuals of the final population, adversarial ones first (the tester
  knows which are AEs from the same black-box answers); ``n_i`` is allocated in proportion to the seeds'
  re-normalised global densities (Sec. 3.4), at least 1 and at most the population.
* **Seeds** are correctly classified inputs (an input the model already gets wrong is an AE without testing).
  Selection multiplies the global density and the local-robustness indicator after normalising both to one scale
  (Sec. 3.3 ii): by default their percentile ranks among the candidates (``normalise: rank``), because densities
  span orders of magnitude and a max-normalised product would rank by density alone; ``max`` divides each by its
  largest value.
* Baselines: PGD (seeds/002's implementation) with one random start per test case; coverage-guided fuzzing
  (:mod:`weakspot.hda.coverage`); FODA (Dola et al. 2021), test cases decoded from the VAE around the seed's code,
  whose label is the seed's only by assumption (the paper's Remark 4: they are far from the seed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from weakspot.adversarial.attacks import cw_margin
from weakspot.checks import check_clip, check_number
from weakspot.errors import ConfigError, DataError
from weakspot.progress import Progress

ProbaFn = Callable[[torch.Tensor], torch.Tensor]  # (m, *shape) inputs -> (m, k) probabilities


@dataclass
class LocalResult:
    """Test cases of one local generator: ``X_cases[j]`` was generated from seed ``seed_index[j]``."""

    method: str
    X_cases: np.ndarray
    seed_index: np.ndarray
    queries: int  # model evaluations (a PGD step's forward-backward pass counts as one)
    seconds: float
    extra: Dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------- scoring
def prediction_loss(proba: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Definition 3: J = p_best_other - p_y per row, in [-1, 1] (> 0: adversarial)."""
    return -cw_margin(proba, y)


def log_margin(proba: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log p_best_other - log p_y per row: the sign of J, without its saturation at -1 on confident inputs."""
    return -cw_margin(torch.log(proba.clamp_min(1e-30)), y)


def _ssim_window(h: int, w: int) -> int:
    m = min(h, w)
    return 3 if m < 22 else 7 if m < 44 else 11


def perceptual(x_adv: torch.Tensor, x: torch.Tensor, metric: str, radius: float, data_range: float) -> torch.Tensor:
    """The perceptual term Q of Eq. 8 per row (higher = closer to the seed)."""
    n = len(x)
    if metric == "ssim" and x.ndim == 4 and min(x.shape[-2:]) >= 3:
        from pytorch_msssim import ssim

        return ssim(x_adv, x, data_range=data_range, win_size=_ssim_window(*x.shape[-2:]), size_average=False)
    mse = (x_adv - x).reshape(n, -1).pow(2).mean(1)
    if metric == "psnr":
        return 10.0 * torch.log10(data_range**2 / mse.clamp_min(1e-10)) / 50.0
    return -mse / (radius**2)  # "mse", and the fallback of SSIM on inputs that are not images


def _check(radius: float, clip: Tuple[float, float], who: str) -> None:
    check_number(radius, "radius (in the data's units)", who, low=0)
    check_clip(clip, who)


def batched_proba(proba_fn: ProbaFn, x: torch.Tensor, batch: int) -> torch.Tensor:
    return torch.cat([proba_fn(x[i : i + batch]) for i in range(0, len(x), batch)]) if len(x) else x.new_zeros(0, 1)


# ------------------------------------------------------------------------------------------------- seed selection
def gradient_indicator(
    module: torch.nn.Module, X: np.ndarray, y: np.ndarray, *, batch: int = 512, device: Any = "cpu"
) -> np.ndarray:
    """Eq. 6, white-box: the L1 norm (the L-inf ball's dual norm) of the cross-entropy's input gradient."""
    from weakspot.adversarial.attacks import input_grad

    out = []
    module.eval()
    for i in range(0, len(X), batch):
        xb = torch.as_tensor(np.asarray(X[i : i + batch], np.float32), device=device)
        yb = torch.as_tensor(np.asarray(y[i : i + batch]), dtype=torch.int64, device=device)
        out.append(input_grad(module, xb, yb).reshape(len(xb), -1).abs().sum(1).cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def separation_indicator(
    P: np.ndarray, y: np.ndarray, P_ref: np.ndarray, y_ref: np.ndarray, *, batch: int = 512
) -> np.ndarray:
    """Eq. 6, black-box: the smallest L2 distance between an input's output (probabilities) and that of any
    reference (training) input with a different label. Smaller = more fragile."""
    P_ref_t = torch.as_tensor(np.asarray(P_ref, np.float32))
    y_ref_t = torch.as_tensor(np.asarray(y_ref, np.int64))
    out = []
    for i in range(0, len(P), batch):
        pb = torch.as_tensor(np.asarray(P[i : i + batch], np.float32))
        d = torch.cdist(pb, P_ref_t)
        same = torch.as_tensor(np.asarray(y[i : i + batch], np.int64))[:, None] == y_ref_t[None]
        out.append(d.masked_fill(same, float("inf")).min(1).values.numpy())
    return np.concatenate(out).astype(np.float64)


def _normalise(v: np.ndarray, how: str) -> np.ndarray:
    v = np.asarray(v, np.float64)
    if how == "rank":
        from scipy.stats import rankdata

        return rankdata(v, method="average") / len(v)
    m = np.max(v)
    return v / m if m > 0 else np.ones_like(v)


def select_seeds(log_density: np.ndarray, fragility: np.ndarray, k: int, *, normalise: str = "rank") -> np.ndarray:
    """Sec. 3.3: indices of the ``k`` candidates with the largest normalised density x normalised fragility (the
    indicator oriented so that larger = less robust), best first; ties keep the candidates' order."""
    log_density, fragility = np.asarray(log_density, np.float64), np.asarray(fragility, np.float64)
    if log_density.shape != fragility.shape or log_density.ndim != 1:
        raise DataError(f"seed selection: densities {log_density.shape} and indicators {fragility.shape} differ")
    if not (np.isfinite(log_density).all() and np.isfinite(fragility).all()):
        raise DataError("seed selection: a density or indicator is NaN or infinite")
    dens = _normalise(log_density, "rank") if normalise == "rank" else np.exp(log_density - log_density.max())
    score = dens * _normalise(fragility, normalise)
    return np.argsort(-score, kind="stable")[: int(k)]


def allocate(log_density: np.ndarray, total: int, cap: int) -> np.ndarray:
    """Test cases per seed in proportion to the seeds' re-normalised global densities (Sec. 3.4): at least 1 and at
    most ``cap`` each, summing to ``total`` (clipped to [k, k * cap]); largest remainders get the leftovers."""
    ld = np.asarray(log_density, np.float64)
    k = len(ld)
    total = int(min(max(total, k), k * cap))
    w = np.exp(ld - ld.max())
    w /= w.sum()
    n = np.ones(k, np.int64)
    left = total - k
    while left > 0:
        room = n < cap
        share = np.where(room, w, 0.0)
        share /= share.sum()
        add = np.minimum(np.floor(share * left).astype(np.int64), cap - n)
        if add.sum() == 0:  # the leftovers one each, to the densest seeds with room
            for i in np.argsort(-share, kind="stable")[:left]:
                add[i] = 1 if room[i] else 0
        n += add
        left -= int(add.sum())
    return n


# ------------------------------------------------------------------------------------------------------- the GA
def two_step_ga(
    proba_fn: ProbaFn,
    X: np.ndarray,
    y: np.ndarray,
    n_cases: Union[Sequence[int], np.ndarray],
    radius: float,
    *,
    clip: Tuple[float, float] = (0.0, 1.0),
    population: int = 20,
    generations: int = 40,
    metric: str = "ssim",
    lam: float = 20.0,
    switch_at: float = 0.5,
    crossover: bool = True,
    mutation_rate: float = 0.05,
    mutation_scale: float = 0.5,
    elite: int = 2,
    seed: int = 0,
    batch: int = 4096,
    device: Any = "cpu",
    progress: Optional[Progress] = None,
) -> LocalResult:
    """Algorithm 1 for every seed at once (black-box: only ``proba_fn``); see the module's caveats."""
    _check(radius, clip, "HDA GA")
    X = np.asarray(X, np.float32)
    if not np.isfinite(X).all():
        raise DataError("HDA GA: the seeds hold NaN or infinite values")
    n_cases = np.asarray(n_cases, np.int64)
    k, P = len(X), int(population)
    if len(n_cases) != k or (n_cases < 1).any() or (n_cases > P).any():
        raise ConfigError(f"HDA GA: n_cases must give 1..{P} (the population) test cases for each of {k} seeds")
    if metric not in ("ssim", "mse", "psnr"):
        raise ConfigError(f"HDA GA metric {metric!r}: use ssim, mse or psnr")
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(int(seed))
    lo, hi = float(clip[0]), float(clip[1])
    shape = X.shape[1:]
    x0 = torch.as_tensor(X, device=device)
    yt = torch.as_tensor(np.asarray(y, np.int64), device=device)
    seeds = x0[:, None].expand(k, P, *shape)
    ys = yt[:, None].expand(k, P).reshape(-1)

    def project(delta: torch.Tensor) -> torch.Tensor:
        return (seeds + delta.clamp(-radius, radius)).clamp(lo, hi) - seeds

    def rand(*s: int) -> torch.Tensor:
        return torch.rand(s, generator=g).to(device)

    delta = project((2 * rand(k, P, *shape) - 1) * radius)
    ne = min(int(elite), P - 1)
    curve = []
    queries = 0
    stage2 = torch.zeros(k, dtype=torch.bool, device=device)

    def evaluate(delta: torch.Tensor):
        xa = (seeds + delta).reshape(k * P, *shape)
        with torch.no_grad():
            pr = batched_proba(proba_fn, xa, batch)
            J = prediction_loss(pr, ys).reshape(k, P)
            M = log_margin(pr, ys).reshape(k, P)
            Q = (
                perceptual(xa, seeds.reshape(k * P, *shape), metric, radius, hi - lo).reshape(k, P)
                if lam > 0
                else torch.zeros_like(J)
            )
        return J, M, Q

    for gen in range(int(generations) + 1):
        J, M, Q = evaluate(delta)
        queries += k * P
        ae = (J > 0).float().mean(1)
        stage2 = ae >= switch_at  # switch to fitness 2 when most are adversarial, back when not
        # fitness 1 ranks by the log-probability margin (J's sign; J itself is flat at -1 on confident inputs)
        fit = torch.where(stage2[:, None], J + lam * Q, M)
        best = fit.argmax(1)
        curve.append(
            {
                "generation": gen,
                "ae_prop": float(ae.mean()),
                "stage2": float(stage2.float().mean()),
                "best_J": float(J.gather(1, best[:, None]).mean()),
                "best_Q": float(Q.gather(1, best[:, None]).mean()),
            }
        )
        if gen == int(generations):
            break
        # selection: fitness-proportional with the population's spread as temperature; elites survive unchanged
        temp = fit.std(1, keepdim=True).clamp_min(1e-6)
        prob = torch.softmax((fit - fit.max(1, keepdim=True).values) / temp, dim=1)
        nc = P - ne
        p1 = torch.multinomial(prob.cpu(), nc, replacement=True, generator=g).to(device)
        p2 = torch.multinomial(prob.cpu(), nc, replacement=True, generator=g).to(device)
        d1 = delta.gather(1, p1.reshape(k, nc, *([1] * len(shape))).expand(k, nc, *shape))
        d2 = delta.gather(1, p2.reshape(k, nc, *([1] * len(shape))).expand(k, nc, *shape))
        if crossover:
            w1, w2 = prob.gather(1, p1), prob.gather(1, p2)
            share = (w1 / (w1 + w2).clamp_min(1e-12)).reshape(k, nc, *([1] * len(shape)))
            child = torch.where(rand(k, nc, *shape) < share, d1, d2)
        else:
            child = d1
        mut = rand(k, nc, *shape) < mutation_rate
        shrink = rand(k, nc, *shape) < 0.5
        noise = (2 * rand(k, nc, *shape) - 1) * mutation_scale * radius
        child = torch.where(mut & shrink, child * rand(k, nc, *shape), torch.where(mut, child + noise, child))
        if lam > 0:  # ours: in fitness 2, a tenth of the children shrink their whole perturbation by up to 30%
            s2 = stage2[:, None] & (rand(k, nc) < 0.1)
            factor = torch.where(s2, 0.7 + 0.3 * rand(k, nc), torch.ones(k, nc, device=device))
            child = child * factor.reshape(k, nc, *([1] * len(shape)))
        order = torch.argsort(fit, dim=1, descending=True, stable=True)[:, :ne]
        elites = delta.gather(1, order.reshape(k, ne, *([1] * len(shape))).expand(k, ne, *shape))
        delta = project(torch.cat([elites, child], dim=1))
        if progress is not None:
            progress(f"two-step GA on {k} seeds (generations)", gen + 1, int(generations))
    # test cases: each seed's best individuals, adversarial ones first
    key = (J > 0).float() * 1e6 + fit
    rank = torch.argsort(key, dim=1, descending=True, stable=True)
    xs, idx = [], []
    x_all = (seeds + delta).cpu().numpy()
    ranked = rank.cpu().numpy()
    for i in range(k):
        xs.append(x_all[i, ranked[i, : n_cases[i]]])
        idx += [i] * int(n_cases[i])
    return LocalResult(
        "hda",
        np.concatenate(xs).astype(np.float32),
        np.asarray(idx, np.int64),
        queries,
        time.perf_counter() - t0,
        {"curve": curve},
    )


# ------------------------------------------------------------------------------------------------------ baselines
def pgd_cases(
    module: torch.nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    n_cases: Sequence[int],
    radius: float,
    *,
    clip: Tuple[float, float] = (0.0, 1.0),
    steps: int = 30,
    seed: int = 0,
    batch: int = 512,
    device: Any = "cpu",
) -> LocalResult:
    """PGD-``steps`` (cross-entropy, random start) once per test case: seed i gets ``n_cases[i]`` random starts."""
    from weakspot.adversarial.attacks import batched, pgd

    _check(radius, clip, "HDA PGD")
    t0 = time.perf_counter()
    idx = np.repeat(np.arange(len(X)), np.asarray(n_cases, np.int64))
    g = torch.Generator().manual_seed(int(seed))
    out = batched(
        pgd,
        module,
        np.asarray(X, np.float32)[idx],
        np.asarray(y)[idx],
        batch_size=batch,
        device=device,
        eps=float(radius),
        steps=int(steps),
        clip=tuple(clip),
        generator=g,
    )
    return LocalResult("pgd", out, idx, len(idx) * int(steps), time.perf_counter() - t0)


def foda_cases(
    density: Any,
    X: np.ndarray,
    n_cases: Union[Sequence[int], np.ndarray],
    *,
    samples: int = 20,
    scale: float = 1.0,
    seed: int = 0,
) -> LocalResult:
    """FODA-style test cases: ``n_cases[i]`` codes drawn from N(mu_i, (scale sigma_i)^2) around seed i's code and
    decoded (``samples`` caps nothing here: it is the number drawn, of which the first ``n_cases[i]`` are kept)."""
    t0 = time.perf_counter()
    mu, sig = density.encode(X)
    g = np.random.default_rng(seed)
    idx = np.repeat(np.arange(len(X)), np.asarray(n_cases, np.int64))
    z = mu[idx] + scale * sig[idx] * g.standard_normal((len(idx), mu.shape[1]))
    return LocalResult(
        "foda", density.decode(z.astype(np.float32)), idx, 0, time.perf_counter() - t0, {"decoded": True}
    )


# ----------------------------------------------------------------------------------------------------- evaluation
@dataclass
class CaseEval:
    method: str
    seeds: str
    n_seeds: int
    n_cases: int
    ae_prop: float
    pred_loss: float  # mean J over the AEs (NaN -> None when there are none)
    fid: float
    log_density: float  # mean relative log density of the AEs
    linf: float  # mean L-inf distance of the test cases from their seed
    ssim: float
    queries_per_seed: float
    seconds_per_seed: float
    ae_mask: Optional[np.ndarray] = field(repr=False, default=None)
    J: Optional[np.ndarray] = field(repr=False, default=None)
    ssim_cases: Optional[np.ndarray] = field(repr=False, default=None)  # each test case's SSIM to its seed
    pred: Optional[np.ndarray] = field(repr=False, default=None)  # the model's class for each test case
    conf: Optional[np.ndarray] = field(repr=False, default=None)  # ... and its probability
    fid_est: Any = field(repr=False, default=None)  # the FID with its pairs and interval (weakspot.hda.fid)
    valid: Optional[np.ndarray] = field(repr=False, default=None)  # each test case "in distribution" (Table 7)

    @property
    def valid_ae_share(self) -> float:
        """Table 7's "% of valid AEs": the share of this generator's AEs the VAE's reconstruction probability
        accepts (NaN without AEs or without a validity check)."""
        if self.valid is None:
            return float("nan")
        assert self.ae_mask is not None  # evaluate_cases sets every array
        if not self.ae_mask.any():
            return float("nan")
        return float(self.valid[self.ae_mask].mean())


def evaluate_cases(
    res: LocalResult,
    seeds_name: str,
    X: np.ndarray,
    y: np.ndarray,
    proba_fn: ProbaFn,
    density: Any,
    *,
    clip: Tuple[float, float],
    batch: int = 2048,
    device: Any = "cpu",
    fid_of: Optional[Callable[[np.ndarray, np.ndarray], Any]] = None,
    validity: Optional[Callable[[np.ndarray], np.ndarray]] = None,
    require_valid: bool = False,
) -> CaseEval:
    """Table 6's numbers for one generator's test cases around seeds ``X`` (labels ``y``).

    ``fid_of(seeds, AEs)`` gives the FID of the AEs against their own seeds (a
    :class:`weakspot.hda.fid.FidEstimate`; none: NaN); ``validity`` marks each test case "in distribution" (Table
    7's valid AEs); ``require_valid`` counts only valid AEs as AEs (OODA's filter).
    """
    from weakspot.hda.fid import NO_FID

    Xc = torch.as_tensor(res.X_cases, device=device)
    ys = torch.as_tensor(np.asarray(y, np.int64)[res.seed_index], device=device)
    with torch.no_grad():
        P = batched_proba(proba_fn, Xc, batch)
        J = prediction_loss(P, ys).cpu().numpy().astype(np.float64)
        conf, pred = (t.cpu().numpy() for t in P.max(1)) if len(P) else (np.zeros(0), np.zeros(0, np.int64))
    valid = np.asarray(validity(res.X_cases), bool) if validity is not None and len(J) else None
    ae = (J > 0) & (valid if require_valid and valid is not None else True)
    Xs = np.asarray(X, np.float32)[res.seed_index]
    est = fid_of(Xs[ae], res.X_cases[ae]) if fid_of is not None and ae.sum() >= 2 else NO_FID
    lin = float(np.abs(res.X_cases - Xs).reshape(len(Xs), -1).max(1).mean()) if len(Xs) else float("nan")
    ss = (
        perceptual(torch.as_tensor(res.X_cases), torch.as_tensor(Xs), "ssim", 1.0, clip[1] - clip[0]).numpy()
        if len(Xs)
        else np.zeros(0)
    )
    k = len(X)
    return CaseEval(
        res.method,
        seeds_name,
        k,
        len(J),
        float(ae.mean()) if len(J) else 0.0,
        float(J[ae].mean()) if ae.any() else float("nan"),
        float(est.value),
        float(density.log_density(res.X_cases[ae]).mean()) if ae.any() else float("nan"),
        lin,
        float(ss.mean()) if len(ss) else float("nan"),
        res.queries / max(k, 1),
        res.seconds / max(k, 1),
        ae,
        J,
        ss,
        pred,
        conf,
        est,
        valid,
    )


def module_proba(module: torch.nn.Module) -> ProbaFn:
    """A probability function of a torch module that maps inputs to logits (the only access the GA uses)."""
    first = next(module.parameters(), None)
    dev = first.device if first is not None else torch.device("cpu")

    def fn(x: torch.Tensor) -> torch.Tensor:  # the GA's tensors stay where they are; the module runs on its device
        with torch.no_grad():
            return torch.softmax(module(x.to(dev)), dim=1).to(x.device)

    return fn


class LogProbs(torch.nn.Module):
    """Appended to a torch model that answers probabilities: its log-probabilities serve as logits."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x.clamp_min(1e-12))


def classifier_proba(clf: Any, device: Any = "cpu") -> ProbaFn:
    """A probability function of any classifier with ``predict_proba`` (numpy in, numpy out): black-box."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(np.asarray(clf.predict_proba(x.detach().cpu().numpy()), np.float32), device=device)

    return fn
