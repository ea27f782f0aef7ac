"""The generator of seeds/003: a symmetric convolutional autoencoder (Sec. 4.2) and the discriminator of Sec. 3.

Caveats first:

* Four convolutions each side (Sec. 4.2: "4 convolutional layers (for each encoder and decoder)"); the widths, the
  3x3 kernels, the dense layer to and from the code and the up-sampling (nearest neighbour then a convolution,
  which works for any image size) are ours. The encoder halves the image while it is at least 4 pixels wide, so an
  8x8 digit ends at 2x2 after two strided layers and a 32x32 scene after four.
* Latent coordinates are standardised: ``Generator.encode(x) = (enc(x) - mu) / sd`` and
  ``Generator.decode(s) = dec(mu + sd * s)`` with ``mu, sd`` the training codes' per-axis mean and standard deviation.
  This only re-labels the code space (the paper does not say in which units its Adam step of 0.001 and its latent
  FGSM step of 0.25 are taken; here they are in units of the codes' spread).
* The discriminator (used by default only for RGB images) is trained after the autoencoder, the decoder frozen, to
  tell decoded training codes ``G(E(x))`` (real) from decoded seeds of a Gaussian ``disc_widen`` times wider than
  the codes (fake): a decoded image is always blurrier than a photo, so a real-vs-decoded discriminator would only
  learn "blur" and call every generated image fake. Its logit ``D`` is positive for realistic decoded images.
* Deterministic on the CPU for a given seed (weights and batch order come from that seed; the global RNG is left as
  it was).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

from weakspot.errors import DataError
from weakspot.progress import Progress


def _check_images(X: Any, where: str) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 4 or X.shape[0] < 2:
        raise DataError(f"{where}: images must be (n >= 2, C, H, W), got shape {X.shape}")
    if not np.isfinite(X).all():
        raise DataError(f"{where}: images contain NaN or inf")
    return np.ascontiguousarray(X, dtype=np.float32)


class ConvAutoencoder(nn.Module):
    """Four conv layers each side around a ``latent_dim`` code; the decoder ends in a sigmoid (images in [0, 1])."""

    def __init__(
        self, in_shape: Sequence[int], latent_dim: int, channels: Sequence[int] = (16, 32, 32, 64), hidden: int = 128
    ):
        super().__init__()
        C, H, W = (int(v) for v in in_shape)
        self.in_shape, self.latent_dim = (C, H, W), int(latent_dim)
        self.channels, self.hidden = [int(c) for c in channels], int(hidden)
        sizes = [(H, W)]
        enc: List[nn.Module] = []
        prev = C
        for c in channels:
            h, w = sizes[-1]
            stride = 2 if min(h, w) >= 4 else 1
            enc += [nn.Conv2d(prev, int(c), 3, stride=stride, padding=1), nn.ReLU()]
            sizes.append(((h - 1) // stride + 1, (w - 1) // stride + 1))
            prev = int(c)
        self.sizes = sizes
        h4, w4 = sizes[-1]
        flat = prev * h4 * w4
        self.encoder = nn.Sequential(
            *enc, nn.Flatten(), nn.Linear(flat, hidden), nn.ReLU(), nn.Linear(hidden, latent_dim)
        )
        self.fc = nn.Sequential(nn.Linear(latent_dim, hidden), nn.ReLU(), nn.Linear(hidden, flat), nn.ReLU())
        dec: List[nn.Module] = []
        outs = list(channels[:-1])[::-1] + [C]
        for i, c in enumerate(outs):
            target = sizes[len(channels) - 1 - i]
            dec.append(_Up(target))
            dec.append(nn.Conv2d(prev, int(c), 3, padding=1))
            if i < len(outs) - 1:
                dec.append(nn.ReLU())
            prev = int(c)
        self.decoder = nn.Sequential(*dec, nn.Sigmoid())
        self._top = (channels[-1], h4, w4)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.fc(z).view(-1, *self._top))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


class _Up(nn.Module):
    def __init__(self, size: Tuple[int, int]):
        super().__init__()
        self.size = tuple(int(v) for v in size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[-2:]) == self.size:
            return x
        return nn.functional.interpolate(x, size=self.size, mode="nearest")


class Discriminator(nn.Module):
    """A small CNN whose logit is positive for realistic (decoded-from-data-like) images."""

    def __init__(self, in_channels: int, width: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(2 * width, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, 0]


@dataclass
class Generator:
    """A trained autoencoder with standardised latent coordinates (and optionally a discriminator).

    Attributes
    ----------
    ae : ConvAutoencoder
    mu, sd : torch.Tensor, shape ``(latent_dim,)``
        Mean and standard deviation of the training codes (raw units).
    codes : numpy.ndarray, shape ``(n, latent_dim)``
        Standardised codes of the training images.
    discriminator : Discriminator or None
    history : dict
        ``loss`` per epoch (MSE per pixel), ``seconds``, ``disc_accuracy`` (training accuracy, last epoch).
    """

    ae: ConvAutoencoder
    mu: torch.Tensor
    sd: torch.Tensor
    codes: np.ndarray
    discriminator: Optional[Discriminator] = None
    history: Dict[str, Any] = field(default_factory=dict)

    @property
    def latent_dim(self) -> int:
        return self.ae.latent_dim

    @property
    def device(self) -> torch.device:
        return self.mu.device

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return (self.ae.encode(x) - self.mu) / self.sd

    def decode(self, s: torch.Tensor) -> torch.Tensor:
        return self.ae.decode(self.mu + self.sd * s)

    def encode_np(self, X: np.ndarray, batch: int = 1024) -> np.ndarray:
        with torch.no_grad():
            return (
                torch.cat(
                    [
                        self.encode(torch.as_tensor(np.asarray(X[i : i + batch], np.float32), device=self.device))
                        for i in range(0, len(X), batch)
                    ]
                )
                .cpu()
                .numpy()
            )

    def decode_np(self, S: np.ndarray, batch: int = 1024) -> np.ndarray:
        with torch.no_grad():
            return (
                torch.cat(
                    [
                        self.decode(torch.as_tensor(np.asarray(S[i : i + batch], np.float32), device=self.device))
                        for i in range(0, len(S), batch)
                    ]
                )
                .cpu()
                .numpy()
            )

    def reconstruct_np(self, X: np.ndarray) -> np.ndarray:
        return self.decode_np(self.encode_np(X))

    def to_bytes(self) -> bytes:
        """The generator as bytes (``torch.save`` of its architecture, weights, code statistics and history)."""
        import io

        ae = self.ae
        blob = {
            "format": "weakspot.corner.Generator/1",
            "arch": {
                "in_shape": list(ae.in_shape),
                "latent_dim": ae.latent_dim,
                "channels": list(ae.channels),
                "hidden": ae.hidden,
            },
            "ae": {k: v.detach().cpu() for k, v in ae.state_dict().items()},
            "mu": self.mu.detach().cpu(),
            "sd": self.sd.detach().cpu(),
            "codes": torch.as_tensor(self.codes),
            "disc": None
            if self.discriminator is None
            else {k: v.detach().cpu() for k, v in self.discriminator.state_dict().items()},
            "history": {k: (list(v) if isinstance(v, list) else v) for k, v in self.history.items()},
        }
        buf = io.BytesIO()
        torch.save(blob, buf)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, device: Any = "cpu") -> "Generator":
        """The inverse of :meth:`to_bytes`, on ``device``, frozen (no gradients to its weights)."""
        import io

        try:
            blob = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - a truncated or foreign file
            raise DataError(f"not a saved corner-case generator: {e}") from e
        if not isinstance(blob, dict) or blob.get("format") != "weakspot.corner.Generator/1":
            raise DataError("not a saved corner-case generator (format weakspot.corner.Generator/1)")
        dev = torch.device(device) if not isinstance(device, torch.device) else device
        a = blob["arch"]
        ae = ConvAutoencoder(a["in_shape"], a["latent_dim"], a["channels"], a["hidden"])
        ae.load_state_dict(blob["ae"])
        ae.to(dev).eval()
        for p in ae.parameters():
            p.requires_grad_(False)
        disc = None
        if blob["disc"] is not None:
            disc = Discriminator(int(a["in_shape"][0]))
            disc.load_state_dict(blob["disc"])
            disc.to(dev).eval()
            for p in disc.parameters():
                p.requires_grad_(False)
        return cls(
            ae=ae,
            mu=blob["mu"].to(dev),
            sd=blob["sd"].to(dev),
            codes=blob["codes"].numpy(),
            discriminator=disc,
            history=dict(blob["history"]),
        )


def train_autoencoder(
    X: np.ndarray,
    *,
    latent_dim: int = 2,
    channels: Sequence[int] = (16, 32, 32, 64),
    hidden: int = 128,
    epochs: int = 40,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
    max_steps: Optional[int] = None,
    discriminator: bool = False,
    disc_epochs: int = 5,
    disc_widen: float = 2.0,
    device: Any = "cpu",
    progress: Optional[Progress] = None,
) -> Generator:
    """Train the generator on images ``X`` ``(n, C, H, W)`` in [0, 1], without labels (Sec. 4.2).

    Adam on the per-pixel mean squared reconstruction error. With ``discriminator``, a :class:`Discriminator` is then
    trained (the autoencoder frozen) for ``disc_epochs`` passes: decoded training codes are "real", decoded seeds of
    ``N(0, disc_widen^2 I)`` (standardised units) "fake". ``max_steps`` caps the epochs so that
    ``epochs * ceil(n / batch_size) <= max_steps`` (at least one epoch). Deterministic for a given ``seed`` on the CPU.
    """
    X = _check_images(X, "train_autoencoder")
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    n = X.shape[0]
    per_epoch = -(-n // int(batch_size))
    if max_steps is not None:
        epochs = max(1, min(int(epochs), int(max_steps) // per_epoch))
    t0 = time.perf_counter()
    Xt = torch.as_tensor(X, device=dev)
    gen = torch.Generator().manual_seed(int(seed))
    history: Dict[str, Any] = {"loss": [], "epochs": int(epochs)}
    devices = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(seed))
        ae = ConvAutoencoder(X.shape[1:], latent_dim, channels, hidden).to(dev)
        opt = torch.optim.Adam(ae.parameters(), lr=float(lr))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, int(epochs)))
        for epoch in range(1, int(epochs) + 1):
            ae.train()
            perm = torch.randperm(n, generator=gen).to(dev)
            total = 0.0
            for start in range(0, n, int(batch_size)):
                xb = Xt[perm[start : start + int(batch_size)]]
                loss = nn.functional.mse_loss(ae(xb), xb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * xb.shape[0]
            sched.step()
            history["loss"].append(total / n)
            if progress is not None:
                progress(f"corner: autoencoder epoch (mse {total / n:.4f})", epoch, int(epochs))
        ae.eval()
        for p in ae.parameters():
            p.requires_grad_(False)
        with torch.no_grad():
            raw = torch.cat([ae.encode(Xt[i : i + 1024]) for i in range(0, n, 1024)])
            # share of the images' variance (around the mean image) the reconstructions explain: 1 = perfect, 0 =
            # no better than drawing the mean image (what a generator that decodes blurred blobs scores near)
            sse = sum(float(((ae.decode(raw[i : i + 1024]) - Xt[i : i + 1024]) ** 2).sum()) for i in range(0, n, 1024))
            sst = float(((Xt - Xt.mean(0, keepdim=True)) ** 2).sum())
            history["r2"] = 1.0 - sse / max(sst, 1e-12)
        mu = raw.mean(0)
        sd = raw.std(0).clamp_min(1e-6)
        g = Generator(ae=ae, mu=mu, sd=sd, codes=((raw - mu) / sd).cpu().numpy(), history=history)
        if discriminator:
            g.discriminator = _train_discriminator(
                g, Xt, gen, epochs=disc_epochs, widen=disc_widen, batch_size=batch_size, progress=progress
            )
    history["seconds"] = time.perf_counter() - t0
    return g


def _train_discriminator(
    g: Generator,
    Xt: torch.Tensor,
    gen: torch.Generator,
    *,
    epochs: int,
    widen: float,
    batch_size: int,
    progress: Optional[Progress],
) -> Discriminator:
    dev = Xt.device
    n = Xt.shape[0]
    d = Discriminator(Xt.shape[1]).to(dev)
    opt = torch.optim.Adam(d.parameters(), lr=1e-3, betas=(0.5, 0.999))
    codes = torch.as_tensor(g.codes, device=dev)
    acc = float("nan")
    for epoch in range(1, int(epochs) + 1):
        d.train()
        perm = torch.randperm(n, generator=gen).to(dev)
        hits = seen = 0
        for start in range(0, n, int(batch_size)):
            idx = perm[start : start + int(batch_size)]
            with torch.no_grad():
                real = g.decode(codes[idx])
                fake = g.decode(widen * torch.randn(len(idx), g.latent_dim, generator=gen).to(dev))
            logit = d(torch.cat([real, fake]))
            target = torch.cat([torch.ones(len(idx), device=dev), torch.zeros(len(idx), device=dev)])
            loss = nn.functional.binary_cross_entropy_with_logits(logit, target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            hits += int(((logit > 0).float() == target).sum())
            seen += 2 * len(idx)
        acc = hits / max(seen, 1)
        if progress is not None:
            progress(f"corner: discriminator epoch (accuracy {acc:.2f})", epoch, int(epochs))
    d.eval()
    for p in d.parameters():
        p.requires_grad_(False)
    g.history["disc_accuracy"] = acc
    return d
