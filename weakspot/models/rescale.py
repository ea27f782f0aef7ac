"""Rescaling a network's last layer: Table 4 of seeds/002 ("*100", "/100"; Dinh et al. 2017, "Sharp minima can
generalize for deep nets") and the warm start of defensive distillation."""

from __future__ import annotations

import copy

import torch

from weakspot.checks import check_number
from weakspot.errors import ModelError


def scaled_last_layer(module: torch.nn.Module, factor: float) -> torch.nn.Module:
    """A deep copy of ``module`` whose last ``torch.nn.Linear`` (in ``module.modules()`` order) has its weight and
    bias multiplied by ``factor``: Table 4's "*100" (factor 100) and "/100" (factor 0.01) reparameterisation.

    With a piecewise-linear network and nothing but an arg-max after that layer, the predictions do not change
    (Dinh et al. 2017); the logits are multiplied by ``factor``.

    Raises
    ------
    ConfigError
        factor not finite and > 0.
    ModelError
        The module has no ``torch.nn.Linear`` layer.
    """
    check_number(factor, "factor", "scaled_last_layer", low=0)
    twin = copy.deepcopy(module)
    # a TorchScript module's layers are script modules that keep their class's name (and their parameters)
    linears = [
        m for m in twin.modules() if isinstance(m, torch.nn.Linear) or getattr(m, "original_name", "") == "Linear"
    ]
    if not linears:
        raise ModelError(f"scaled_last_layer: {type(module).__name__} has no torch.nn.Linear layer to rescale")
    last: torch.nn.Linear = linears[-1]  # type: ignore[assignment]  # or a scripted Linear, with the same parameters
    with torch.no_grad():
        last.weight.mul_(float(factor))
        if last.bias is not None:
            last.bias.mul_(float(factor))
    return twin
