"""Intrinsic robustness's entry point on a white-box image target (seeds/002): psi, the reference attacks and the
decision surfaces of the audited model, and at depth study Table 4, Fig. 6 and the same of its defended copies
(``intrinsic.defences``, trained through the runtime: cached, shared with HDA). It measures only;
:mod:`weakspot.intrinsic.report` and :mod:`weakspot.intrinsic.figures` turn the :class:`IntrinsicResult` into the
report section.

Caveats first:

* psi is computed on ``n_inputs`` inputs (the test split first, then val; never a training input: the model is not
  judged on what it trained on, so fewer inputs are used where the two hold fewer), the attacks on the first
  ``n_attack`` of them, Fig. 6 on the first ``stability.pool``; each part is shuffled (seeded), so the first inputs
  are a sample, not the first classes of a split stored class by class. Input numbers count in this shuffled order.
* Two depths (``intrinsic.depth``): ``audit`` measures the audited model alone (psi, its attacks, the check against
  ART, its surfaces) and computes the KL only on the psi inputs, rounded up to whole batches of the ascent so that
  each psi input's KL, and hence every finding, is the one the study computes; ``study`` adds the defended copies,
  Table 4 and Fig. 6 (whose pool may be larger than the psi inputs).
* None of the models is changed here (Table 4's rescaled models are copies).
* Every number is deterministic for the same seed on the CPU (random starts come from seeded generators).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from weakspot.adversarial.defended import defended_models, target_eps
from weakspot.data.dataset import image_range
from weakspot.device import resolve_device
from weakspot.errors import ConfigError, DataError
from weakspot.intrinsic.config import DEFENCE_TITLES, IntrinsicParams
from weakspot.intrinsic.evaluate import ModelEval, ascent_kwargs, evaluate_model, pgd_vs_art
from weakspot.intrinsic.psi import max_kl
from weakspot.intrinsic.reparam import reparam_row
from weakspot.intrinsic.stability import stability_table
from weakspot.intrinsic.surface import Surface, decision_surfaces
from weakspot.methods import AuditTarget
from weakspot.progress import Progress


@dataclass
class IntrinsicResult:
    """What intrinsic robustness measured on one target: every model's numbers, no prose.

    Attributes
    ----------
    evals : dict name -> ModelEval
        ``"none"`` (the audited model) first, then each defended model.
    X, y : np.ndarray
        The inputs psi ran on (shuffled; the attacks ran on the first ``n_attack``) and their labels.
    classes : list of str
    eps : float
        The L-inf radius, in the data's units; ``clip`` the data's range.
    n_test : int
        How many inputs of the pool came from the test split (the rest: val, then train).
    n_pool : int
        The inputs Fig. 6 drew its batches from (0 at depth audit: Fig. 6 did not run).
    n_attack : int
        The inputs attacked per model.
    defence_info : dict name -> dict
        What ran for each defended model (``label``, ``settings``, ``training_seconds``, ``eps``).
    init : {"target", "scratch"}
        How the defended models started.
    art_check : dict
        Our PGD against IBM ART's on the audited model (:func:`~weakspot.intrinsic.evaluate.pgd_vs_art`).
    reparam : dict name -> dict
        Table 4's row of each model in ``reparam.defences`` that ran (empty at depth audit).
    stability : pandas.DataFrame or None
        Fig. 6 (:func:`~weakspot.intrinsic.stability.stability_table`); None at depth audit.
    surfaces : dict input number -> {model label: [Surface]}
        Decision surfaces of the first inputs the audited model gets right, for it and the min-max model.
    depth : {"audit", "study"}
        What ran (``intrinsic.depth``): the audited model alone, or also the paper's comparisons.
    """

    evals: Dict[str, ModelEval]
    X: np.ndarray
    y: np.ndarray
    classes: List[str]
    eps: float
    clip: Tuple[float, float]
    n_test: int
    n_pool: int
    n_attack: int
    init: str
    art_check: Dict[str, float]
    reparam: Dict[str, Dict[str, float]]
    stability: Any
    surfaces: Dict[int, Dict[str, List[Surface]]]
    defence_info: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    depth: str = "audit"


def run(target: AuditTarget, params: IntrinsicParams, runtime: Any) -> IntrinsicResult:
    """Measure the target's model and, at depth study, its defended copies (the pool: the test split, then val; never
    train). At depth audit no defended copy is trained, whatever ``defences`` names."""
    splits = [s for s in (target.test, target.val) if s is not None]
    X_pool = np.concatenate([np.asarray(s.X, np.float32) for s in splits])
    y_pool = np.concatenate([np.asarray(s.y, np.int64) for s in splits])
    if not np.isfinite(X_pool).all():
        raise DataError(f"{target.name}: the inputs hold NaN or infinite values")
    clip = image_range(np.asarray(target.train.X))
    names = list(params.defences) if params.comparisons else []
    defended, info, eps = defended_models(target, names, params, runtime)
    eps = eps if names else target_eps(target, params)
    models = {"none": target.model.module, **defended}
    return measure(
        models,
        X_pool,
        y_pool,
        [str(c) for c in target.classes],
        params,
        eps=eps,
        clip=clip,
        n_test=len(target.test.X),
        defence_info=info,
        init=params.defence_init,
        device=resolve_device(runtime.device),
        progress=runtime.progress,
    )


def pool_order(n_test: int, n: int, seed: int) -> np.ndarray:
    """A seeded shuffle within the first ``n_test`` rows (the test split) and within the rest."""
    rng = np.random.default_rng([int(seed) % (2**32), 7])
    nt = min(int(n_test), n)
    return np.concatenate([rng.permutation(nt), nt + rng.permutation(n - nt)])


def measure(
    models: Dict[str, torch.nn.Module],
    X_pool: np.ndarray,
    y_pool: np.ndarray,
    classes: Sequence[str],
    params: IntrinsicParams,
    *,
    eps: float,
    clip: Tuple[float, float],
    n_test: int,
    defence_info: Optional[Dict[str, Dict[str, Any]]] = None,
    init: Optional[str] = None,
    device: Any = "cpu",
    progress: Optional[Progress] = None,
) -> IntrinsicResult:
    """Measure every model (``"none"`` = the audited one first, then its defended copies); at depth audit
    (``params.depth``) the audited model alone, whatever else ``models`` holds, without Table 4 and Fig. 6.

    Parameters
    ----------
    models : dict name -> torch.nn.Module
        ``"none"`` (required) and any of ``fgsm_at``, ``minmax``, ``gradreg``, ``distillation``.
    X_pool, y_pool : arrays
        Inputs in the data's range and their labels, the test split first (``n_test`` of them), then val (see the
        module's caveats for how they are shuffled and used).
    classes : list of str
    eps : float
        The L-inf radius (the data's units). ``clip``: the data's range.
    defence_info : dict name -> {"label": what ran, "training_seconds": training time, ...}
    init : {"target", "scratch"}, optional
        How the defended models started (default ``params.defence_init``), for the settings table.
    """
    p = params
    if "none" not in models:
        raise ConfigError(
            f"intrinsic robustness needs the audited model under the name 'none'; got models "
            f"{', '.join(map(repr, models)) or '(none)'}"
        )
    study = p.comparisons
    if not study:
        models = {"none": models["none"]}  # the defended copies are the study's
    k = len(classes)
    order = pool_order(n_test, len(X_pool), p.seed)
    X_pool = np.ascontiguousarray(X_pool, np.float32)[order]
    y_pool = np.asarray(y_pool, np.int64)[order]
    n_psi = min(int(p.n_inputs), len(X_pool))
    n_pool = min(int(p.stability.pool), len(X_pool)) if study else 0
    n_attack = min(int(p.n_attack), n_psi)
    X, y = X_pool[:n_psi], y_pool[:n_psi]
    pool_r = max_kl(
        models["none"],
        X_pool[: kl_rows(n_psi, n_pool, len(X_pool), p)],
        normalisation="invariant",
        progress=progress,
        **ascent_kwargs(p, eps, clip, device),
    )
    evals: Dict[str, ModelEval] = {}
    for name, module in models.items():
        evals[name] = evaluate_model(
            name,
            DEFENCE_TITLES.get(name, name),
            module,
            X,
            y,
            k,
            eps=eps,
            clip=clip,
            params=p,
            device=device,
            kl_pool=(pool_r.kl, pool_r.x_worst) if name == "none" else None,
            progress=progress,
        )
        if progress is not None:
            progress("models", len(evals), len(models))
    art_check = pgd_vs_art(
        models["none"],
        X[:n_attack],
        y[:n_attack],
        k,
        eps=eps,
        clip=clip,
        steps=p.pgd_steps,
        batch_size=int(p.batch_size),
        device=device,
    )
    nr = min(int(p.reparam.n_inputs), n_psi)
    reparam = {
        name: reparam_row(models[name], X[:nr], y[:nr], eps=eps, clip=clip, params=p, device=device)
        for name in (p.reparam.defences if study else [])
        if name in models
    }
    stab = stability_table(pool_r.kl[:n_pool], p.stability.batch_sizes, p.stability.draws, p.seed) if study else None
    right = np.flatnonzero(evals["none"].pred == y)[: int(p.surface.n_inputs)]
    return IntrinsicResult(
        evals=evals,
        X=X,
        y=y,
        classes=list(classes),
        eps=float(eps),
        clip=clip,
        n_test=int(n_test),
        n_pool=n_pool,
        n_attack=n_attack,
        init=init or p.defence_init,
        art_check=art_check,
        reparam=reparam,
        stability=stab,
        surfaces=surfaces(models, X, y, right, eps=eps, params=p, device=device),
        defence_info=dict(defence_info or {}) if study else {},
        depth=p.depth,
    )


def kl_rows(n_psi: int, n_pool: int, n: int, params: IntrinsicParams) -> int:
    """How many rows of the shuffled pool the audited model's KL ascent runs on: at depth study the psi inputs and
    Fig. 6's pool (``n_pool``), whichever is longer; at depth audit (``n_pool`` 0) the psi inputs rounded up to whole
    batches of the ascent (``batch_size // restarts`` inputs each, the study's batches), so that every psi input
    gets the same random start and the same batch as at depth study, and so the same KL. At most ``n``."""
    if n_pool:
        return max(n_psi, n_pool)
    chunk = max(1, int(params.batch_size) // int(params.psi.restarts))  # as weakspot.intrinsic.psi.max_kl batches
    return min(-(-n_psi // chunk) * chunk, max(n_psi, min(int(params.stability.pool), n)))


def surfaces(
    models: Dict[str, torch.nn.Module],
    X: np.ndarray,
    y: np.ndarray,
    inputs: Union[Sequence[int], np.ndarray],
    *,
    eps: float,
    params: IntrinsicParams,
    device: Any = "cpu",
) -> Dict[int, Dict[str, List[Surface]]]:
    """Decision surfaces (Sec. 3) of each input in ``inputs``, for the audited model and the min-max one (when it
    ran): ``{input: {model label: [Surface per direction]}}``; input ``j`` of the list draws its random directions
    from ``params.seed + j``."""
    p = params
    shown = [n for n in ("none", "minmax") if n in models]
    return {
        int(i): {
            DEFENCE_TITLES[n]: decision_surfaces(
                models[n],
                X[i],
                int(y[i]),
                eps=eps,
                grid=p.surface.grid,
                span=p.surface.span,
                seed=p.seed + j,
                device=device,
            )
            for n in shown
        }
        for j, i in enumerate(inputs)
    }
