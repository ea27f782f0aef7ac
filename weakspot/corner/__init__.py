"""Corner cases (seeds/003, Platon, Avrin & Chan-Hon-Tong, ECAI 2020): generated inputs on the decision boundary.

Caveats first: white box only (a :class:`weakspot.models.TorchClassifier` on images ``(n, C, H, W)`` in [0, 1],
C = 1 or 3). The library is pure (no Prefect, no DVC, no files). See :func:`run_corner` for the stage, and
:func:`train_autoencoder`, :func:`latent_density`, :func:`search_corner_cases`, :func:`fgsm_vs_latent` for the parts.
"""

from weakspot.corner.config import CornerParams

__all__ = [
    "CornerParams", "CornerSearch", "FgsmComparison", "Generator", "LatentDensity", "fgsm_vs_latent",
    "latent_density", "manifold_distance", "nearest_train_distance", "run_corner", "search_corner_cases",
    "total_variation", "train_autoencoder", "train_generator", "GENERATOR_KEYS",
]

_LAZY = {
    "train_autoencoder": "autoencoder", "Generator": "autoencoder",
    "latent_density": "realism", "LatentDensity": "realism", "manifold_distance": "realism",
    "nearest_train_distance": "realism", "total_variation": "realism",
    "search_corner_cases": "search", "CornerSearch": "search", "fgsm_vs_latent": "search", "FgsmComparison": "search",
    "run_corner": "experiment", "train_generator": "experiment", "GENERATOR_KEYS": "experiment",
}


def __getattr__(name: str):
    if name in _LAZY:  # lazy: pulls in torch and matplotlib
        import importlib

        return getattr(importlib.import_module(f"weakspot.corner.{_LAZY[name]}"), name)
    raise AttributeError(name)
