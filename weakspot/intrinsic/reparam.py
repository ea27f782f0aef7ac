"""Table 4 of seeds/002 (Sec. 5.4): psi and eps-sharpness of a model whose last layer is rescaled ("*100", "/100").

Caveats first: with the paper's scale-invariant normalisation psi should not move under the rescaling (up to the KL
ascent's float error), while softmax psi and the input-space eps-sharpness of Keskar et al. (2017) do; the
rescaled models are copies (:func:`weakspot.models.rescale.scaled_last_layer`), the model given is left as it is.
Deterministic for the same seed (every measurement starts its random draws from ``params.seed``).
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np
import torch

from weakspot.intrinsic.config import IntrinsicParams
from weakspot.intrinsic.evaluate import ascent_kwargs
from weakspot.intrinsic.psi import eps_sharpness, max_kl, psi
from weakspot.models.rescale import scaled_last_layer


def factor_key(factor: float) -> str:
    """The key of one rescaling factor in a row: ``x1``, ``x100``, ``x0.01``."""
    return f"x{factor:g}"


def reparam_row(
    module: torch.nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    *,
    eps: float,
    clip: Tuple[float, float],
    params: IntrinsicParams,
    device: Any = "cpu",
) -> Dict[str, float]:
    """Table 4 for one model: psi (normalised and softmax) and input-space eps-sharpness, with the last layer as it is
    and scaled by each factor of ``params.reparam.factors``.

    Returns
    -------
    dict
        ``x<f>`` (normalised psi), ``softmax_x<f>`` and ``sharpness_x<f>`` for f = 1 and each factor.
    """
    p = params
    out: Dict[str, float] = {}
    kw = ascent_kwargs(p, eps, clip, device)
    for f in [1.0] + list(p.reparam.factors):
        m = module if f == 1.0 else scaled_last_layer(module, f)
        key = factor_key(f)
        out[key] = psi(max_kl(m, X, normalisation="invariant", **kw).kl)
        out[f"softmax_{key}"] = psi(max_kl(m, X, normalisation="softmax", **kw).kl)
        out[f"sharpness_{key}"] = float(
            eps_sharpness(
                m, X, y, eps=eps, steps=p.psi.steps, clip=clip, seed=p.seed, batch_size=int(p.batch_size), device=device
            )
        )
    return out
