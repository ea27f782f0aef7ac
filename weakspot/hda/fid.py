"""FID (seeds/004 Table 2: the Fréchet Inception Distance between a method's AEs and the seeds they came from) on the
features of a network this pipeline trains.

Caveats first: no Inception weights can be downloaded here, so the features are the input of the audited model's
last linear layer where it has one (the network the pipeline trained), else the VAE encoder's last hidden layer
(:meth:`weakspot.hda.density.Density.features`). FIDs therefore compare methods within a target, never with the
paper's numbers. FID also falls with the number of samples compared, so a method with fewer AEs is handicapped.

Example
-------
>>> import numpy as np
>>> a = np.random.default_rng(0).normal(size=(4000, 2))
>>> round(frechet_distance(a, a + [2.0, 0.0]), 6)
4.0
"""

from __future__ import annotations

import warnings
from typing import Any, List, Optional

import numpy as np
import torch


def frechet_distance(F1: np.ndarray, F2: np.ndarray) -> float:
    """FID between two feature sets (rows are samples): |m1 - m2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2)).

    NaN where either set has fewer than 2 rows.
    """
    from scipy import linalg

    F1, F2 = np.asarray(F1, np.float64), np.asarray(F2, np.float64)
    if len(F1) < 2 or len(F2) < 2:
        return float("nan")
    m1, m2 = F1.mean(0), F2.mean(0)
    s1, s2 = np.atleast_2d(np.cov(F1, rowvar=False)), np.atleast_2d(np.cov(F2, rowvar=False))
    with warnings.catch_warnings():  # fewer samples than features make the product singular: its root still exists
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        covmean = linalg.sqrtm(s1 @ s2)
        if not np.isfinite(covmean).all():  # regularise as the reference implementation (pytorch-fid) does
            off = np.eye(len(s1)) * 1e-6
            covmean = linalg.sqrtm((s1 + off) @ (s2 + off))
    covmean = np.real(covmean)
    return float(max(0.0, ((m1 - m2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2.0 * np.trace(covmean)))


class Featurizer:
    """FID features: the input of the audited model's last linear layer, else the VAE encoder's hidden layer.

    Parameters
    ----------
    module : torch.nn.Module or None
        The audited model (None for a black box, or a model without a linear layer: the VAE's features then).
    density : Density
        The trained VAE and KDE (:func:`weakspot.hda.density.train_density`).
    batch : int
        Rows per forward pass.
    device : str or torch.device
        Where ``module`` runs.
    """

    def __init__(self, module: Optional[torch.nn.Module], density: Any, batch: int = 1024, device: Any = "cpu"):
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


def fid(featurize: Any, A: np.ndarray, B: np.ndarray) -> float:
    """FID between inputs ``A`` and ``B`` on ``featurize``'s features; NaN where either has fewer than 2 rows."""
    return frechet_distance(featurize(A), featurize(B)) if len(A) >= 2 and len(B) >= 2 else float("nan")
