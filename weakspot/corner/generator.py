"""The generator a corner-case run uses, made from its params: trained once per data set, checked against the data.

Caveats first: the generator depends on the training images and the params in :data:`GENERATOR_KEYS` only, never on
a classifier, so every target trained on the same images can share one (:func:`weakspot.corner.run.run` caches it
keyed on the pixels and these params). The architecture and its training are
:func:`weakspot.corner.autoencoder.train_autoencoder`'s; this module maps :class:`~weakspot.corner.config.CornerParams`
onto it and resolves ``latent_dim`` and ``discriminator`` for the images' channels.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from weakspot.corner.autoencoder import Generator, train_autoencoder
from weakspot.corner.config import CornerParams
from weakspot.device import resolve_device, single_thread
from weakspot.errors import ConfigError, DataError
from weakspot.progress import Progress

GENERATOR_KEYS = (
    "seed",
    "latent_dim",
    "channels",
    "hidden",
    "epochs",
    "max_ae_steps",
    "lr_ae",
    "batch_size",
    "discriminator",
    "disc_epochs",
    "disc_widen",
)
"""The params the generator depends on (its cache key, with the training images)."""


def check_images(X: Any) -> np.ndarray:
    """``X`` as an array, if it is images ``(n, C, H, W)`` with C = 1 or 3; a DataError names the shape if not."""
    X = np.asarray(X)
    if X.ndim != 4 or X.shape[1] not in (1, 3):
        raise DataError(f"corner cases need images (n, C, H, W) with C = 1 or 3, got shape {X.shape}")
    return X


def generator_params(params: CornerParams) -> Dict[str, Any]:
    """The part of ``params`` the generator depends on (:data:`GENERATOR_KEYS`), as JSON values."""
    return {k: v for k, v in params.model_dump(mode="json").items() if k in GENERATOR_KEYS}


def train_generator(
    train_X: np.ndarray,
    params: Union[CornerParams, Dict[str, Any], None] = None,
    *,
    device: Any = "cpu",
    progress: Optional[Progress] = None,
) -> Generator:
    """The generator (autoencoder, and discriminator where used) of ``params`` on training images ``(n, C, H, W)``.

    Depends on the images and the generator's params only (not on any classifier): one per data set.
    """
    params = params if isinstance(params, CornerParams) else CornerParams(**(params or {}))
    X = check_images(train_X)
    C = int(X.shape[1])
    return train_autoencoder(
        X,
        latent_dim=params.resolved_latent_dim(C),
        channels=params.channels,
        hidden=params.hidden,
        epochs=params.epochs,
        lr=params.lr_ae,
        batch_size=params.batch_size,
        seed=params.seed,
        max_steps=params.max_ae_steps,
        discriminator=params.uses_discriminator(C),
        disc_epochs=params.disc_epochs,
        disc_widen=params.disc_widen,
        device=device,
        progress=progress,
    )


def check_generator(g: Generator, image_shape: Sequence[int], params: CornerParams) -> None:
    """Raise a ConfigError unless ``g`` was made for images of ``image_shape`` ``(C, H, W)`` and these params."""
    C = int(image_shape[0])
    latent, use_disc = params.resolved_latent_dim(C), params.uses_discriminator(C)
    has_disc = g.discriminator is not None
    if tuple(g.ae.in_shape) != tuple(image_shape) or g.latent_dim != latent or has_disc != use_disc:
        raise ConfigError(
            f"corner: the given generator (images {tuple(g.ae.in_shape)}, latent {g.latent_dim}, "
            f"discriminator {has_disc}) does not match the data "
            f"{tuple(image_shape)} and params (latent {latent}, discriminator {use_disc})"
        )


def generator_bytes(
    X: np.ndarray, generator_params: Dict[str, Any], device: str, progress: Any = None
) -> Dict[str, Any]:
    """Train the generator on images ``X``; ``{"generator": bytes, "seconds": s}``: the runtime call the corner stage
    caches (keyed on the pixels and the generator's params, and on this module's code only, so an edit to the search
    or the report reuses the generator)."""
    p = CornerParams.model_validate(generator_params)
    dev = resolve_device(device)
    with single_thread(dev):
        g = train_generator(np.asarray(X, np.float32), p, device=dev, progress=progress)
    return {"generator": g.to_bytes(), "seconds": float(g.history.get("seconds", 0.0))}
